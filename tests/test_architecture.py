"""The layout rules of docs/architecture.md, checked on the source (no imports of gradlab).

- no import cycles between gradlab's modules, counting imports inside functions too;
- no use of another module's private (underscore) names;
- only the rendering layer (gradlab/render/) and the CLI import rich or print;
- no module over MAX_MODULE_LINES lines, no function over MAX_FUNCTION_LINES lines.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradlab"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: The layer allowed to import rich and to print.
PRINTING = ("gradlab.render", "gradlab.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The gradlab module an imported name lives in (a module, or the package holding it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per session (the tests only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import statement, nested ones too."""
    tree = parsed(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                # `from gradlab.checks import contract` imports a module, not a name
                found.append((sub, []) if sub in MODULES else (node.module, [a.name]))
    return found


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        for target, _ in imports(path):
            dep = resolve(target) if target.startswith("gradlab") else None
            # a package's __init__ importing its own submodules is how packages re-export
            if dep and dep != mod and not dep.startswith(mod + "."):
                edges[mod].add(dep)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (cycle := visit(d)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_no_import_cycles() -> None:
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()) or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_no_private_names_of_other_modules(mod: str) -> None:
    path = MODULES[mod]
    bad = [f"{target}.{n}" for target, names in imports(path) if target.startswith("gradlab")
           for n in names if n.startswith("_") and not n.startswith("__")]
    tree = parsed(path)
    aliases = {a.asname or a.name for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom))
               for a in node.names
               if (isinstance(node, ast.Import) and a.name.startswith("gradlab"))
               or (isinstance(node, ast.ImportFrom) and f"{node.module}.{a.name}" in MODULES)}
    bad += [f"{n.value.id}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id in aliases and n.attr.startswith("_")
            and not n.attr.startswith("__")]
    assert not bad, f"{mod} uses private names of other modules: {bad}"


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_only_the_rendering_layer_prints(mod: str) -> None:
    if mod.startswith(PRINTING):
        return
    path = MODULES[mod]
    assert not [t for t, _ in imports(path) if t == "rich" or t.startswith("rich.")], mod
    tree = parsed(path)
    prints = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert not prints, f"{mod} prints at lines {prints}"


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_module_and_function_sizes(mod: str) -> None:
    path = MODULES[mod]
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path}: {len(text.splitlines())} lines"
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(parsed(path))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path}: functions over {MAX_FUNCTION_LINES} lines: {long}"

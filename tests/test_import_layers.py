"""checks/'s rooms import only downward (issue 31), read from the source with ast.

Each sub-package of gradlab/checks is a room with one role; the third line of its __init__
docstring says which rooms it may import ("May import: numeric, diagnosis; ...").  Every import
of every module in a room (inside functions and under TYPE_CHECKING too) is mapped to the room
it names, and one that the importing room's docstring does not allow fails.

    python tests/test_import_layers.py    # modules per room, the largest, imports up or across
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

CHECKS = Path(__file__).resolve().parent.parent / "gradlab" / "checks"
PACKAGE = "gradlab.checks"


def rooms() -> dict[str, Path]:
    """Each room's name and folder: the sub-packages of checks/."""
    return {p.parent.name: p.parent for p in sorted(CHECKS.glob("*/__init__.py"))}


def docstring(room: str) -> str:
    return ast.get_docstring(ast.parse((CHECKS / room / "__init__.py").read_text("utf-8"))) or ""


def allowed(room: str) -> set[str]:
    """The rooms `room` may import, as its docstring's "May import:" line names them (up to
    its first ';'), besides itself."""
    line = next((ln for ln in docstring(room).splitlines() if ln.startswith("May import:")), "")
    names = line.removeprefix("May import:").split(";")[0]
    return {r for r in rooms() if re.search(rf"\b{r}\b", names)}


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every gradlab.checks module or name an import takes."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from ((n.lineno, a.name) for a in n.names if a.name.startswith(PACKAGE))
        elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(PACKAGE):
            yield from ((n.lineno, f"{n.module}.{a.name}") for a in n.names)


def room_of(name: str) -> str | None:
    """The room a dotted name under gradlab.checks lives in (None: none of them)."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in rooms() else None


def wrong_imports(room: str, source: str) -> list[tuple[int, str, str]]:
    """(line, imported name, its room) of each import in `source` (a module of `room`) that
    runs up or across: into a room that `room`'s docstring does not allow."""
    ok = allowed(room) | {room}
    return [(line, name, target) for line, name in imported(ast.parse(source))
            if (target := room_of(name) or "checks") not in ok]


def modules() -> dict[str, list[Path]]:
    """Each room's modules (its __init__ included)."""
    return {r: sorted(folder.rglob("*.py")) for r, folder in rooms().items()}


def violations() -> list[str]:
    return [f"{path.relative_to(CHECKS.parent.parent)}:{line} imports {name} ({target})"
            for room, paths in modules().items() for path in paths
            for line, name, target in wrong_imports(room, path.read_text("utf-8"))]


def test_every_module_lives_in_a_room() -> None:
    loose = [p.name for p in CHECKS.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside checks/'s rooms: {loose}"
    assert set(rooms()) == {"diagnosis", "numeric", "families", "run"}


def test_each_room_says_in_three_lines_what_lives_there_and_what_it_may_import() -> None:
    for room in rooms():
        lines = docstring(room).splitlines()
        assert len(lines) == 3, f"{room}/__init__.py: {len(lines)} docstring lines"
        assert lines[2].startswith("May import:"), f"{room}: {lines[2]!r}"


def test_imports_only_go_down() -> None:
    """The rooms' allowances form a strict order (no two rooms may import each other, no
    cycle), and no module imports against it."""
    may = {r: allowed(r) for r in rooms()}
    order: list[str] = []
    while len(order) < len(may):
        ready = [r for r in may if r not in order and may[r] <= set(order)]
        assert ready, f"the rooms' allowances have a cycle: {may}"
        order += ready
    assert order[0] == "diagnosis" and order[-1] == "run", order
    assert violations() == []


def test_the_checker_finds_an_import_up_or_across() -> None:
    up = "from gradlab.checks.run.runner import item_rows\n"
    across = "def f():\n    from gradlab.checks.families import variants\n"
    assert wrong_imports("numeric", up) == [(1, "gradlab.checks.run.runner.item_rows", "run")]
    assert wrong_imports("numeric", across) == [(2, "gradlab.checks.families.variants",
                                                 "families")]
    assert wrong_imports("run", up + across) == []
    assert wrong_imports("diagnosis", "import gradlab.checks.numeric.jacobian\n") != []


def summary() -> str:
    """Modules and lines per room, the largest module, and any import up or across."""
    lines = []
    sizes = {p: len(p.read_text("utf-8").splitlines()) for ps in modules().values() for p in ps}
    for room, paths in modules().items():
        mods = [p for p in paths if p.name != "__init__.py"]
        lines.append(f"{room}: {len(mods)} modules, {sum(sizes[p] for p in mods)} lines "
                     f"(may import: {', '.join(sorted(allowed(room))) or 'no other room'})")
    largest = max(sizes, key=sizes.__getitem__)
    lines.append(f"largest: {largest.relative_to(CHECKS)} ({sizes[largest]} lines)")
    wrong = violations()
    lines.append(f"imports up or across: {len(wrong)}")
    return "\n".join(lines + wrong)


if __name__ == "__main__":
    import sys

    sys.stdout.write(summary() + "\n")

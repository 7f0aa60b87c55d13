"""A spec's `package.module:attr` looked up without importing it: the module found on the path
(importlib's finders, no module run) and `attr` among the names its source binds at the top
(`ast`), so that a misspelt module or attribute is one line before torch or a worker starts
(an import takes seconds when the module imports torch).

Only what is certain is said: a name bound in a way no parse can follow (a star import,
`globals()`, a module `__getattr__`, a package that edits `__path__`) leaves the judgement to
the import itself (gradlab.spec.imports.load_object), which gives the same words.
"""

from __future__ import annotations

import ast
import importlib.util
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

#: Source text that binds module names (or finds submodules) at run time: a module holding
#: any is not judged statically.
DYNAMIC = ("import *", "globals", "vars(", "setattr", "exec(", "eval(", "__getattr__",
           "__dict__", "sys.modules", "__path__", "extend_path", "__import__", "importlib",
           "global ")


def source_of(spec: ModuleSpec) -> str | None:
    """The module's Python source, or None (an extension, a namespace package, unreadable,
    or written to bind names at run time: see DYNAMIC)."""
    origin = spec.origin
    if not origin or not origin.endswith(".py"):
        return None
    try:
        text = Path(origin).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if any(d in text for d in DYNAMIC) else text


def missing_module(module_name: str) -> str | None:
    """The dotted name of `module_name`'s first part that is certainly not importable (the
    name Python's ModuleNotFoundError would give), else None.  Imports nothing."""
    parts = module_name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return parts[0]
    for i in range(1, len(parts)):
        where = spec.submodule_search_locations
        if where is None or (spec.origin is not None and source_of(spec) is None):
            return None  # not a package, or one whose __init__ could add submodules
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), list(where))
        if spec is None:
            return ".".join(parts[: i + 1])
    return None


def module_names(module_name: str) -> list[str] | None:
    """The names `module_name`'s source binds at its top level (definitions, assignments,
    imports), definitions first; None where that cannot be known without running it."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    text = source_of(spec) if spec is not None else None
    if spec is None or text is None or spec.submodule_search_locations is not None:
        return None  # a package's attributes include submodules imported by anyone
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None  # the import says what is wrong
    defined: list[str] = []
    bound: list[str] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.append(node.name)
            continue  # its body binds its own names
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound += [a.asname or a.name.partition(".")[0] for a in node.names]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.append(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.append(node.name)
        if isinstance(node, ast.comprehension):  # its target is its own; a walrus is not
            stack += [node.iter, *node.ifs]
        elif not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return sorted(set(defined)) + sorted(set(bound) - set(defined))

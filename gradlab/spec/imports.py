"""The Python objects a spec names: `package.module:attr`, and Functions as callables.

Where `package` is looked for, in order: the spec file's own folder (when `package` is there),
the folders given with `--path` (add_import_paths), sys.path (PYTHONPATH, installed packages),
then the current directory.  Folders are put on sys.path itself, not searched on the side: an
isolated run's worker gets the parent's sys.path and must import the same modules.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from gradlab.customops import (
    MODULE_NAME,
    LibraryOp,
    OpNotFound,
    is_qualname,
    library_op,
    registered_names,
)
from gradlab.customops import lookup as library_lookup
from gradlab.errors import LoadError, SpecError, one_line, shown, unknown_name
from gradlab.spec import lookup
from gradlab.spec.values import fail, join


def put_first(folder: str | Path) -> None:
    """`folder` (absolute) at the front of sys.path, moved there if it is already on it."""
    entry = str(Path(folder).resolve())
    if sys.path[:1] == [entry]:
        return
    if entry in sys.path:
        sys.path.remove(entry)
    sys.path.insert(0, entry)
    importlib.invalidate_caches()  # a finder may have cached this folder's listing before


def add_import_paths(folders: Iterable[str | Path]) -> None:
    """`--path` folders ahead of sys.path, in the order given (a spec's own folder still comes
    first for the modules it holds)."""
    for folder in reversed(list(folders)):
        put_first(folder)


def _import(module_name: str, folder: Path | None) -> Any:
    """Import `module_name` with the spec folder first (only when the top-level package is in
    it: a spec folder must not shadow other modules by accident) and the cwd last."""
    _search_path(module_name, folder)
    return importlib.import_module(module_name)


def _search_path(module_name: str, folder: Path | None) -> None:
    """sys.path as importing `module_name` from a spec in `folder` needs it (see _import)."""
    top = module_name.partition(".")[0]
    if folder is not None and top not in sys.modules:
        try:
            here = PathFinder.find_spec(top, [str(folder)]) is not None
        except Exception:  # a name find_spec cannot take: import_module says why below
            here = False
        if here:
            put_first(folder)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        # last resort: specs often sit next to the user's code in the working directory
        sys.path.append(str(Path.cwd()))


def look_up(ref: str, key: str, folder: Path | None = None) -> None:
    """SpecError naming `key` when `package.module:attr` is certainly not there: the module on
    no path, or `attr` bound nowhere in its source (gradlab.spec.lookup: nothing imported or
    run, the words load_object would give); where it cannot be told, nothing."""
    module_name, _, attr = ref.partition(":")
    if module_name in sys.modules:
        return  # importing it costs nothing: load_object judges
    _search_path(module_name, folder)
    gone = lookup.missing_module(module_name)
    if gone is not None:
        raise fail(key, f"cannot import {shown(module_name)}: ModuleNotFoundError: No module "
                        f"named {gone!r}")
    names = lookup.module_names(module_name)
    part = attr.partition(".")[0]
    if names is not None and part not in names:
        raise fail(key, f"module {shown(module_name)} has no attribute {shown(attr)} "
                        + unknown_name("", part, [n for n in names if not n.startswith("_")],
                                       "its names"))


def import_at(module_name: str, key: str, folder: Path | None = None) -> Any:
    """Import `module_name` (see _import); an error names `key`."""
    try:
        return _import(module_name, folder)
    except (Exception, SystemExit) as exc:
        # a module that calls sys.exit() on import is a bad reference, not the end of gradlab
        raise fail(key, f"cannot import {shown(module_name)}: {type(exc).__name__}: "
                        f"{one_line(str(exc), 200)}") from None


def load_object(ref: str, key: str, folder: Path | None = None) -> Any:
    """Import `package.module:attr` (attr may be dotted); `folder`: the spec file's."""
    if not isinstance(ref, str) or ":" not in ref:
        raise fail(key, f"expected {EXPECTED}, got {shown(ref)}")
    module_name, _, attr = ref.partition(":")
    obj: Any = import_at(module_name, key, folder)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise fail(key, f"module {shown(module_name)} has no attribute {shown(attr)} "
                            + unknown_name("", part, public_names(obj), "its names"))
        obj = getattr(obj, part)
    return obj


def public_names(obj: Any) -> list[str]:
    """What `module:attr` could have meant: `obj`'s public attributes, classes and callables
    first (a Function or a reference is what a spec names), sorted."""
    names = sorted(n for n in dir(obj) if not n.startswith("_"))
    return sorted(names, key=lambda n: not callable(getattr(obj, n, None)))


def as_callable(obj: Any, modules: Iterable[str] = ()) -> Callable[..., Any]:
    """An autograd.Function subclass becomes its `apply`, a torch.library op a
    gradlab.customops.LibraryOp (`modules`: those that register it); any other callable
    stays."""
    import torch

    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        from gradlab.torchcompat import function_apply  # keywords on a torch before 2.13

        return function_apply(obj)
    op = library_op(obj, modules)
    if op is not None:
        return op
    if not callable(obj):
        raise LoadError(f"{shown(obj)} is not callable")
    return obj  # type: ignore[no-any-return]


def function_name(fn: Any) -> str:
    """What to call a checked callable: an autograd.Function's class name, for the class and
    for its `apply` (a classmethod whose own name is 'apply'), through functools.partial; else
    the callable's name."""
    if inspect.isclass(fn):
        return fn.__name__
    owner = getattr(fn, "__self__", None)
    if inspect.isclass(owner):  # a classmethod bound to its class: Function.apply
        return owner.__name__
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and callable(inner):
        return function_name(inner)
    return str(getattr(fn, "__name__", type(fn).__name__))


def load_callable(ref: Any, key: str, folder: Path | None = None) -> Callable[..., Any]:
    """`package.module:attr` imported and made callable (a Function becomes its apply)."""
    return as_callable(load_object(ref, key, folder))


#: What a spec's `function:` and `reference:` take, in words.
EXPECTED = "'package.module:attr' or a torch.library op 'namespace::name'"
#: (module name, its key path) of each module a spec's `import:` names.
Imports = tuple[tuple[str, str], ...]


def op_ref(ref: str) -> tuple[str, str] | None:
    """(module, qualified name) when `ref` names a torch.library op: `mylib::op` ('' for the
    module) or `package.module:mylib::op`; None for a `package.module:attr`."""
    module, _, rest = ref.partition(":")
    if "::" not in ref or ":" not in rest:
        return None
    return ("", ref) if rest.startswith(":") else (module, rest)


def load_op(ref: str, key: str, folder: Path | None, imported: list[str]) -> LibraryOp:
    """The torch.library op `ref` names (op_ref), its module imported first; `imported`: the
    modules `import:` named, already imported (a LibraryOp imports them all again in a
    worker)."""
    found = op_ref(ref)
    assert found is not None
    module, qualname = found
    if module:
        import_at(module, key, folder)
        imported = [*imported, module]
    try:
        op = library_lookup(qualname)
    except OpNotFound:
        after = (f" after importing {', '.join(imported)}" if imported else
                 "; name the module that registers it with `import: package.module`")
        ns = qualname.partition("::")[0]
        known = registered_names(ns)
        raise fail(key, f"no torch.library op {shown(qualname)} is registered{after}" + (
            " " + unknown_name("", qualname, known, f"ops in {ns}") if known else "")) from None
    return LibraryOp(qualname, imported, op)


class Pending:
    """A spec's `package.module:attr` or torch.library op `namespace::name` (with the modules
    its `import:` names), its form checked but not imported yet: a whole spec is validated
    before any user module (and the torch it imports) is, so that a spec error comes at once
    (gradlab.spec.files.import_callables imports them; calling one first is a bug)."""

    __slots__ = ("folder", "imports", "key", "ref", "source")

    def __init__(self, ref: str, key: str, folder: Path | None, source: str | None = None,
                 imports: Imports = ()):
        self.ref, self.key, self.folder, self.source = ref, key, folder, source
        self.imports = imports

    def at(self, source: str) -> Pending:
        """The same reference, its errors naming the spec file `source`."""
        return Pending(self.ref, self.key, self.folder, source, self.imports)

    def _load(self) -> Callable[..., Any]:
        for module, key in self.imports:  # in order: the op's registration, then the rest
            import_at(module, key, self.folder)
        modules = [m for m, _ in self.imports]
        if op_ref(self.ref) is not None:
            return load_op(self.ref, self.key, self.folder, modules)
        obj = load_object(self.ref, self.key, self.folder)
        return as_callable(obj, [*modules, self.ref.partition(":")[0]])

    def load(self) -> Callable[..., Any]:
        """The callable, imported; an error names the spec file (source) and key."""
        try:
            return self._load()
        except SpecError as exc:
            raise (exc.at(source=self.source) if self.source else exc) from None
        except LoadError as exc:  # not callable
            raise SpecError(str(exc), source=self.source, key=self.key) from None

    def look_up(self) -> None:
        """SpecError naming the spec file and key where the module or attribute is certainly
        missing (found without importing: gradlab.spec.lookup)."""
        try:
            found = op_ref(self.ref)
            if found is None:
                look_up(self.ref, self.key, self.folder)
            # a torch.library op: its modules (import:, and module:ns::name's) are what can be
            # missing; the op is registered by importing them, so it is judged at the import
            for module, key in [*self.imports, *([(found[0], self.key)] if found and found[0]
                                                 else [])]:
                if lookup.missing_module(module) is not None:
                    import_at(module, key, self.folder)  # says why, naming its key
        except SpecError as exc:
            raise (exc.at(source=self.source) if self.source else exc) from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise LoadError(f"{self.key}: {self.ref} was not imported (import_callables)")

    def __repr__(self) -> str:
        return f"Pending({self.ref!r})"


def pending(ref: Any, key: str, folder: Path | None = None, imports: Imports = ()) -> Pending:
    """`package.module:attr` or `[package.module:]namespace::name` checked in form (no
    import): see Pending; `imports`: the modules to import first (`import:`)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise fail(key, f"expected {EXPECTED}, got {shown(ref)}")
    found = op_ref(ref)
    if found is not None and not (is_qualname(found[1]) and (
            not found[0] or MODULE_NAME.fullmatch(found[0]))):
        raise fail(key, f"expected {EXPECTED} (with an optional '.overload'), or "
                        f"'package.module:namespace::name', got {shown(ref)}")
    return Pending(ref, key, folder, imports=imports)


def parse_imports(value: Any, key: str) -> Imports:
    """A spec's `import:`: one module name or a list of them, each with its key path."""
    names = value if isinstance(value, list) else [value]
    if not names:
        raise fail(key, "expected a module name (package.module) or a list of them, got []")
    found = []
    for i, name in enumerate(names):
        where = join(key, i) if isinstance(value, list) else key
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
            raise fail(where, f"expected a module name (package.module), got {shown(name)}")
        found.append((name, where))
    return tuple(found)

"""What the recorder wraps: `Function.apply` and the `__call__` of custom ops, and what an op is.

Standalone like gradlab.record.hook (the standard library and torch only).  `install` wraps:

- `torch.autograd.Function.apply` (a classmethod every subclass inherits: one wrapper sees
  every Function, inside nn.Modules or nested in another's forward; a subclass overriding
  `apply` itself is not seen);
- `OpOverload.__call__` and `OpOverloadPacket.__call__`, for ops outside torch's namespaces:
  what `torch.library.custom_op` / `triton_op` objects call and what `torch.ops.ns.name(...)`
  runs.  Ops called from C++ or a TorchDispatchMode are not seen.

Calls while torch.compile traces are left alone (compiled code runs no Python apply).
"""

from __future__ import annotations

import atexit
import functools
import site
import sys
from pathlib import Path
from typing import Any

import torch

#: The package whose Functions are torch's own (checkpointing, parallel helpers): the module
#: `torch` or one inside it, never a package whose name merely starts so (torchkbnufft).
TORCH_PACKAGE = "torch"


def torch_own(module: str) -> bool:
    """`module` is torch itself or one of its submodules."""
    return module == TORCH_PACKAGE or module.startswith(TORCH_PACKAGE + ".")
#: The marker set on torch.autograd.Function once wrapped (a second recorder in one process,
#: the pytest plugin's beside the start-up one, finds it and does nothing).
MARKER = "_gradlab_recorder"
#: Namespaces of torch's own ops, besides those registered when torch finished importing.
TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "quantized", "_quantized", "profiler",
                              "c10d", "_c10d_functional", "_c10d_functional_autograd",
                              "_dtensor", "inductor", "higher_order", "debugprims",
                              "mkldnn", "mkl", "_test", "onednn", "fbgemm", "_inductor_test"})


def installed_roots() -> list[Path]:
    """The site folders: a module under one is installed, imported by name as it is."""
    found = [*site.getsitepackages(), site.getusersitepackages(), sys.prefix, sys.base_prefix]
    return [Path(p).resolve() for p in found if p]


def locate(module: str, qualname: str) -> dict[str, Any]:
    """Where `module:qualname` is imported from: installed, a module under an import root (a
    checkout, a test folder), a script's `__main__`, or why it cannot be."""
    if "<locals>" in qualname or "<lambda>" in qualname:
        return {"unreplayable": f"defined inside a function ({qualname}): not importable"}
    mod = sys.modules.get(module)
    spec = getattr(mod, "__spec__", None)
    if module == "__main__" and spec is not None and spec.name and spec.name != "__main__":
        module = spec.name  # `python -m pkg.mod`: importable by its own name
    file = getattr(mod, "__file__", None)
    if not file:
        return {"unreplayable": f"module {module} has no file (defined interactively?)"}
    path = Path(file).resolve()
    if module == "__main__":
        return {"how": "script", "file": str(path)}
    if any(path.is_relative_to(r) for r in installed_roots()):
        return {"how": "installed", "file": str(path)}
    parts = module.split(".")
    up = len(parts) if path.name == "__init__.py" else len(parts) - 1
    root = path.parents[up] if up < len(path.parents) else None
    if root is not None and (path == root.joinpath(*parts).with_suffix(".py")
                             or path == root.joinpath(*parts, "__init__.py")):
        return {"how": "module", "file": str(path), "root": str(root)}
    return {"how": "path", "file": str(path)}  # pytest's importmode=importlib, runpy, ...


def function_info(cls: type) -> dict[str, Any]:
    """What a Function is: its importable name and where it is imported from."""
    module, qual = str(cls.__module__), str(cls.__qualname__)
    info: dict[str, Any] = {"kind": "function", "name": f"{module}:{qual}", "module": module,
                            "qualname": qual}
    if torch_own(module) or module.startswith("gradlab."):
        return {**info, "ignored": True}  # torch's own Functions, or gradlab's bundled ones
    return {**info, **locate(module, qual)}


def holder(opdef: Any) -> tuple[str, str] | None:
    """The module and attribute holding a CustomOpDef: where its function was defined when
    the decorator bound its name there, else any loaded module holding it (triton_op)."""
    fn = getattr(opdef, "_init_fn", None)
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    mod = sys.modules.get(module or "")
    if mod is not None and "<locals>" not in qual and getattr(mod, qual, None) is opdef:
        return str(module), qual
    for name, mod in list(sys.modules.items()):
        if torch_own(name) or mod is None:
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            if value is opdef:
                return name, attr
    return None


def op_info(qualified: str) -> dict[str, Any]:
    """What a custom op `ns::name` is: the module attribute holding its CustomOpDef (which
    registers it when imported), or why none was found."""
    info: dict[str, Any] = {"kind": "custom_op", "name": qualified}
    from torch._library import custom_ops

    opdef = custom_ops.OPDEFS.get(qualified)
    if torch_own(str(getattr(getattr(opdef, "_init_fn", None), "__module__", ""))):
        return {**info, "ignored": True}  # one of torch's own
    if opdef is None:
        return {**info, "unreplayable": "registered without torch.library.custom_op or "
                                        "triton_op: no Python callable to import"}
    found = holder(opdef)
    if found is None:
        return {**info, "unreplayable": "its CustomOpDef is held by no module attribute"}
    module, attr = found
    # without an autograd formula it is checked on its forward only (its calls as recorded)
    return {**info, "module": module, "qualname": attr,
            "backward": getattr(opdef, "_backward_fn", None) is not None,
            **locate(module, attr)}


def wrap_function(box: dict[str, Any]) -> None:
    """Function.apply recorded by `box["rec"]`, then run as torch runs it."""
    fn_cls = torch.autograd.function.Function
    original = fn_cls.__dict__["apply"].__func__

    @functools.wraps(original)
    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        rec = box["rec"]
        if not rec.busy() and not torch.compiler.is_compiling():
            rec.call(cls, lambda: function_info(cls), args, kwargs)
        return original(cls, *args, **kwargs)

    fn_cls.apply = classmethod(apply)  # type: ignore[assignment,method-assign]


def wrap_ops(box: dict[str, Any], builtin: frozenset[str]) -> None:
    """OpOverload and OpOverloadPacket calls of ops outside `builtin` recorded."""
    from torch import _ops

    def wrapped(cls: type, qualified: Any) -> None:
        original = cls.__call__

        @functools.wraps(original)
        def call(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            name = qualified(self)
            rec = box["rec"]
            if (name.partition("::")[0] not in builtin and not rec.busy()
                    and not torch.compiler.is_compiling()):
                rec.call(name, lambda: op_info(name), args, kwargs)
            return original(self, *args, **kwargs)

        cls.__call__ = call  # type: ignore[method-assign]

    wrapped(_ops.OpOverload, lambda op: op._name)
    wrapped(_ops.OpOverloadPacket, lambda op: op._qualified_op_name)


def builtin_namespaces() -> frozenset[str]:
    """The namespaces of the ops registered now, less those holding a custom_op (installed
    late, in a process that imported a project's ops already: the pytest plugin's)."""
    from torch._library import custom_ops

    every = {n.partition("::")[0] for n in torch._C._dispatch_get_all_op_names()}
    custom = {n.partition("::")[0] for n in list(custom_ops.OPDEFS.keys())}
    return frozenset(every - custom) | TORCH_NAMESPACES


def install(rec: Any) -> bool:
    """Wrap torch's calls for `rec` and write its counts at exit.  Once per process: a later
    recorder takes over from a stopped one (the pytest plugin's, a test's), never from one
    that still records (False then: the start-up one of `gradlab record`)."""
    fn_cls = torch.autograd.function.Function
    box = getattr(fn_cls, MARKER, None)
    if box is not None:
        if not box["rec"].stopped:
            return False
        box["rec"] = rec
    else:
        box = {"rec": rec}
        builtin = builtin_namespaces()
        wrap_function(box)
        wrap_ops(box, builtin)
        setattr(fn_cls, MARKER, box)
    atexit.register(rec.flush)
    return True


def installed() -> Any:
    """The recorder wrapping this process's calls, or None."""
    box = getattr(torch.autograd.function.Function, MARKER, None)
    return None if box is None else box["rec"]

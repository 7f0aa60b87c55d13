"""torch.library custom ops as gradlab checks them: recognized, named `namespace::name`, and
carried to a worker process by that name with the modules that register them.

An op object (`torch.ops.mylib.op`, one overload of it, or the `torch.library.custom_op` /
`triton_op`-decorated function) cannot be pickled, and a worker that has not imported the module
registering it cannot find it: `LibraryOp` holds the qualified name and those modules, imports
them and looks the op up on first use, and pickles as the two.  A spec names such an op as
`function: mylib::op` with `import: mypkg.ops` (docs/specs.md, "torch.library ops").

The name's form is checked here without torch (`is_qualname`): a spec is validated before
torch or any module it names is imported.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any

#: `namespace::name` or `namespace::name.overload`, as torch.library names an operator.
QUALNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
#: A module name as `import:` takes it (`package.module`).
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_qualname(text: Any) -> bool:
    """Whether `text` is an operator's qualified name (`mylib::op`, `mylib::op.default`)."""
    return isinstance(text, str) and QUALNAME.fullmatch(text) is not None


class OpNotFound(LookupError):
    """No op of that qualified name is registered (after importing the modules named)."""


def lookup(qualname: str) -> Any:
    """The torch op `ns::name` (its OpOverloadPacket) or `ns::name.overload` (an OpOverload);
    OpNotFound, with the ops registered in that namespace, when there is none."""
    import torch

    ns, _, rest = qualname.partition("::")
    name, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(torch.ops, ns), name)
        return getattr(op, overload) if overload else op
    except (AttributeError, RuntimeError):
        raise OpNotFound(qualname) from None


def registered_names(namespace: str) -> list[str]:
    """The qualified names of every op registered in `namespace` (for a did-you-mean)."""
    import torch

    return sorted(n for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith(namespace + "::"))


class LibraryOp:
    """A torch.library op under check: called as the op itself, pickled as its qualified name
    and the modules that register it (imported again, in order, before the lookup)."""

    def __init__(self, qualname: str, modules: Iterable[str] = (), op: Any = None) -> None:
        self.qualname, self.modules = qualname, tuple(modules)
        self.__name__ = qualname  # what reports call it (gradlab.spec.imports.function_name)
        self._op = op

    @property
    def op(self) -> Any:
        """The torch op (OpOverloadPacket or OpOverload), looked up on first use."""
        if self._op is None:
            for module in self.modules:
                importlib.import_module(module)
            self._op = lookup(self.qualname)
        return self._op

    @property
    def overload(self) -> Any:
        """The OpOverload torch.library.opcheck takes: the one named, or the op's only one
        (a packet with several is handed over as it is: opcheck says why it cannot choose)."""
        op = self.op
        names = op.overloads() if hasattr(op, "overloads") else None
        if names is not None and len(names) == 1:
            return getattr(op, names[0])
        return op

    @property
    def is_triton(self) -> bool:
        """Whether torch.library.triton_op made it (torch's registry of those, where it has
        one)."""
        import torch._library

        triton = getattr(torch._library, "triton", None)
        made = getattr(triton, "triton_ops_to_kernels", {})
        return self.qualname.partition(".")[0] in made

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.op(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LibraryOp, (self.qualname, self.modules))

    def __repr__(self) -> str:
        return f"LibraryOp({self.qualname!r})"


def library_op(obj: Any, modules: Iterable[str] = ()) -> LibraryOp | None:
    """`obj` as a LibraryOp when it is a torch.library op (a custom_op or triton_op function,
    an OpOverloadPacket, an OpOverload), else None; `modules`: those that register it (a
    custom_op's own module is added: where its function was defined)."""
    if isinstance(obj, LibraryOp):
        return obj
    import torch

    found = list(modules)
    custom_op_def = getattr(getattr(torch, "_library", None), "custom_ops", None)
    if custom_op_def is not None and isinstance(obj, custom_op_def.CustomOpDef):
        home = getattr(getattr(obj, "_init_fn", None), "__module__", None)
        if home and home != "__main__" and home not in found:
            found.append(home)
        return LibraryOp(f"{obj._namespace}::{obj._name}", found, obj._opoverload)
    if isinstance(obj, torch._ops.OpOverloadPacket):
        return LibraryOp(obj._qualified_op_name, found, obj)
    if isinstance(obj, torch._ops.OpOverload):
        packet = obj.overloadpacket._qualified_op_name
        return LibraryOp(f"{packet}.{obj._overloadname}", found, obj)
    return None

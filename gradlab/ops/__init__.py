"""The registry of bundled ops.

Each op lives in its own module and exports `OP` (an `OpDef`: the Function, its reference and
facts, no cases).  Its cases live only in its spec file, gradlab/specs/NAME.yaml (package data,
see `spec_file`; gradlab.spec loads it).  The registry below only names the ops, with the few
facts `gradlab list` shows (its capabilities among them), so listing ops never imports torch; a
test checks that these facts match each module's `OP` (and measures the capabilities again),
that every module in this package is registered and that every op has a spec file.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from gradlab.model import OpDef

#: The folder of the bundled spec files, inside the gradlab package.
SPEC_FOLDER = "specs"


#: What a bundled op written as a classic Function (forward(ctx, ...), no setup_context)
#: supports, as `gradlab check specs/ --capabilities all` measured it on a CPU-only machine
#: (cuda "-": not measured there; forward_ad "no": none has a jvp, information); the states
#: are gradlab.results.capabilities'.  The README's op table gives the reasons;
#: tests/ops/test_registry.py measures them again.
CLASSIC_FUNCTION = {"first_order": "yes", "second_order": "yes", "forward_ad": "no",
                    "autocast": "yes", "compile": "yes", "vmap": "no", "func_grad": "no",
                    "batched_grad": "yes", "deterministic": "yes", "noncontiguous": "yes",
                    "cuda": "-"}
#: The same for an op that declares no double backward (second_order: False; checked to raise).
FIRST_ORDER_ONLY = CLASSIC_FUNCTION | {"second_order": "no"}


@dataclass(frozen=True)
class OpEntry:
    """A bundled op as `gradlab list` knows it, without importing it."""

    name: str
    module: str
    summary: str
    second_order: bool
    devices: tuple[str, ...]
    #: {capability: state} over gradlab.model.MATRIX, as measured (see CLASSIC_FUNCTION).
    capabilities: dict[str, str] = field(default_factory=lambda: dict(CLASSIC_FUNCTION))


BUNDLED: tuple[OpEntry, ...] = (
    OpEntry("linear", "gradlab.ops.linear", "LinearFunction: x @ W.T + b, optional bias", True,
            ("cpu", "cuda")),
    OpEntry("mulconstant", "gradlab.ops.mulconstant", "tensor times a python float", True,
            ("cpu", "cuda")),
    OpEntry("exp", "gradlab.ops.exp", "exp, saving its result for backward", True, ("cpu", "cuda")),
    OpEntry("relu", "gradlab.ops.relu", "ReLU that clones grad_output (never writes into it)",
            False, ("cpu", "cuda"), dict(FIRST_ORDER_ONLY)),
    OpEntry("conv2d", "gradlab.ops.conv2d",
            "conv2d, backward via torch.nn.grad.conv2d_input/conv2d_weight", True, ("cpu", "cuda")),
    OpEntry("blur", "gradlab.ops.blur", "depthwise 3x3 blur whose backward is a Function", True,
            ("cpu", "cuda")),
    OpEntry("modconv", "gradlab.ops.modconv",
            "StyleGAN2 modulated conv (EqualLinear, PixelNorm, demodulation, up/down + blur)", True,
            ("cpu", "cuda")),
    OpEntry("involution", "gradlab.ops.involution",
            "involution: per-pixel KxK kernels per group; Triton on CUDA, saves only x, w",
            False, ("cpu", "cuda"), FIRST_ORDER_ONLY | {"batched_grad": "no"}),
)


def names() -> list[str]:
    """Names of the bundled ops, in registry order."""
    return [e.name for e in BUNDLED]


def entry(name: str) -> OpEntry | None:
    """The registry entry called `name`, or None."""
    return next((e for e in BUNDLED if e.name == name), None)


def known(name: str) -> OpEntry:
    """The registry entry called `name`; UnknownOpError when there is none."""
    e = entry(name)
    if e is None:
        from gradlab.errors import UnknownOpError, unknown_name

        raise UnknownOpError(unknown_name("op", name, names(), "bundled ops"))
    return e


def load(name: str) -> OpDef:
    """Import the bundled op `name` and return its `OpDef` (facts only; cases: `spec_file`)."""
    op: OpDef = importlib.import_module(known(name).module).OP
    return op


class OpRef:
    """A bundled op's function or reference, imported on first use: specs load without torch
    (the CLI's parent process never calls an op; its workers import it).  Pickles by name."""

    __slots__ = ("_attr", "_module", "_target")

    def __init__(self, module: str, attr: str) -> None:
        self._module, self._attr = module, attr
        self._target: Any = None

    def resolve(self) -> Any:
        """The op module's `OP.<attr>` (imported once)."""
        if self._target is None:
            self._target = _op_attr(self._module, self._attr)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # what a check asks of the callable (a Function's `apply`: `__self__`) is the op's own
        if name in OpRef.__slots__:
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        # a worker gets the op's own callable: it runs the op anyway
        return _op_attr, (self._module, self._attr)

    def __repr__(self) -> str:
        return f"OpRef({self._module}:OP.{self._attr})"


def _op_attr(module: str, attr: str) -> Any:
    """Bundled op module `module`'s `OP.<attr>` (what an OpRef stands for)."""
    return getattr(importlib.import_module(module).OP, attr)


def resolved(op: OpDef) -> OpDef:
    """`op` with its OpRefs imported: what runs an op calls (and torch.compile traces) the
    op's own callables, not a proxy."""
    from dataclasses import replace

    fn, ref = op.function, op.reference
    if not isinstance(fn, OpRef) and not isinstance(ref, OpRef):
        return op
    return replace(op, function=fn.resolve() if isinstance(fn, OpRef) else fn,
                   reference=ref.resolve() if isinstance(ref, OpRef) else ref)


def lazy(name: str) -> OpDef:
    """Bundled op `name`'s OpDef from the registry's facts, its function and reference
    imported on first use (OpRef): what loading a spec needs, without importing the op."""
    from gradlab.model import OpDef

    e = known(name)
    return OpDef(name=e.name, summary=e.summary, function=OpRef(e.module, "function"),
                 reference=OpRef(e.module, "reference"), second_order=e.second_order,
                 devices=e.devices)


def spec_folder() -> Traversable:
    """The folder of the bundled spec files (gradlab/specs, found as package data)."""
    return files("gradlab") / SPEC_FOLDER


def spec_file(name: str) -> Traversable:
    """The spec file of the bundled op `name`, the one home of its cases."""
    return spec_folder() / f"{known(name).name}.yaml"

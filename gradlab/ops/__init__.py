"""The registry of bundled ops.

Each op lives in its own module and exports `OP` (an `OpDef`).  The registry below only names
them, with the few facts `gradlab list` shows, so listing ops never imports torch; a test checks
that these facts match each module's `OP` and that every module in this package is registered.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradlab.model import OpDef


@dataclass(frozen=True)
class OpEntry:
    """A bundled op as `gradlab list` knows it, without importing it."""

    name: str
    module: str
    summary: str
    second_order: bool
    devices: tuple[str, ...]


BUNDLED: tuple[OpEntry, ...] = (
    OpEntry("linear", "gradlab.ops.linear", "LinearFunction: x @ W.T + b, optional bias", True,
            ("cpu", "cuda")),
    OpEntry("mulconstant", "gradlab.ops.mulconstant", "tensor times a python float", True,
            ("cpu", "cuda")),
    OpEntry("exp", "gradlab.ops.exp", "exp, saving its result for backward", True, ("cpu", "cuda")),
    OpEntry("relu", "gradlab.ops.relu", "ReLU that clones grad_output (never writes into it)",
            False, ("cpu", "cuda")),
    OpEntry("conv2d", "gradlab.ops.conv2d",
            "conv2d, backward via torch.nn.grad.conv2d_input/conv2d_weight", True, ("cpu", "cuda")),
    OpEntry("blur", "gradlab.ops.blur", "depthwise 3x3 blur whose backward is a Function", True,
            ("cpu", "cuda")),
    OpEntry("modconv", "gradlab.ops.modconv",
            "StyleGAN2 modulated conv (EqualLinear, PixelNorm, demodulation, up/down + blur)", True,
            ("cpu", "cuda")),
    OpEntry("involution", "gradlab.ops.involution",
            "involution: per-pixel KxK kernels per group; Triton on CUDA, saves only x, w",
            False, ("cpu", "cuda")),
)


def names() -> list[str]:
    """Names of the bundled ops, in registry order."""
    return [e.name for e in BUNDLED]


def entry(name: str) -> OpEntry | None:
    """The registry entry called `name`, or None."""
    return next((e for e in BUNDLED if e.name == name), None)


def load(name: str) -> OpDef:
    """Import the bundled op `name` and return its `OpDef`."""
    e = entry(name)
    if e is None:
        from gradlab.errors import UnknownOpError

        raise UnknownOpError(f"unknown op {name!r}; bundled ops: {', '.join(names())}")
    op: OpDef = importlib.import_module(e.module).OP
    return op

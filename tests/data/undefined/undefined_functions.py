"""One-output Functions that ask autograd not to materialize undefined gradients
(ctx.set_materialize_grads(False)): backward then gets None when the output's gradient is
undefined (a loss that does not use it), and must return None or zeros."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class ScaleNoneUnsafe(torch.autograd.Function):
    """2x whose backward multiplies grad_output without looking: a TypeError on None."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.set_materialize_grads(False)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor | None) -> Tensor | None:
        return g * 2  # type: ignore[operator]


class ScaleNoneSafe(ScaleNoneUnsafe):
    """The correct twin: None in, None out."""

    @staticmethod
    def backward(ctx: Any, g: Tensor | None) -> Tensor | None:
        return None if g is None else g * 2


def scale_reference(x: Tensor) -> Tensor:
    return x * 2

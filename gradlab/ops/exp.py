"""`exp`: saves its result (not its input) for backward, as the classic example does."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gradlab.model import OpDef


class Exp(torch.autograd.Function):
    """y = exp(x); dy/dx = y, so the output is what backward needs."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> Tensor:
        (result,) = ctx.saved_tensors
        # `result` is this Function's own output, so double backward flows through it.
        grad: Tensor = grad_out * result
        return grad


def exp(x: Tensor) -> Tensor:
    """The custom Function as a plain callable."""
    out: Tensor = Exp.apply(x)
    return out


OP = OpDef(
    name="exp",
    summary="exp, saving its result for backward",
    function=exp,
    reference=torch.exp,
    second_order=True,
)

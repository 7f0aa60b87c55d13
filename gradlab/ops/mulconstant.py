"""`mulconstant`: a tensor times a python float; the float gets a None gradient."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gradlab.model import OpDef


class MulConstant(torch.autograd.Function):
    """y = x * c for a python number c."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, constant: float) -> Tensor:
        # A python float needs no save_for_backward: ctx attributes are fine for non-tensors.
        ctx.constant = constant
        return x * constant

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, None]:
        grad_x = grad_out * ctx.constant if ctx.needs_input_grad[0] else None
        return grad_x, None


def mulconstant(x: Tensor, constant: float) -> Tensor:
    """The custom Function as a plain callable."""
    out: Tensor = MulConstant.apply(x, constant)
    return out


def mulconstant_reference(x: Tensor, constant: float) -> Tensor:
    """Plain-autograd baseline."""
    return x * constant


OP = OpDef(
    name="mulconstant",
    summary="tensor times a python float",
    function=mulconstant,
    reference=mulconstant_reference,
    second_order=True,
)

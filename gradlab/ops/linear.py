"""`linear`: the LinearFunction of the PyTorch extending guide, with an optional bias."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gradlab.model import OpDef


class LinearFunction(torch.autograd.Function):
    """y = x @ W.T + b for a 2-D x."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        ctx.save_for_backward(x, weight, bias)
        out = x.mm(weight.t())
        if bias is not None:
            out = out + bias.unsqueeze(0).expand_as(out)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, bias = ctx.saved_tensors
        # Under torch.autocast the forward's mm ran in half precision, so grad_out comes in
        # half while x and weight were saved in float32: compute in grad_out's dtype, as
        # autograd's own mm backward does (a no-op without autocast).
        x, weight = x.to(grad_out.dtype), weight.to(grad_out.dtype)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_w = grad_out.t().mm(x)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """The custom Function as a plain callable."""
    out: Tensor = LinearFunction.apply(x, weight, bias)
    return out


def linear_reference(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Plain-autograd baseline."""
    out = x @ weight.t()
    return out + bias if bias is not None else out


OP = OpDef(
    name="linear",
    summary="LinearFunction: x @ W.T + b, optional bias",
    function=linear,
    reference=linear_reference,
    second_order=True,
)

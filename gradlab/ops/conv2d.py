"""`conv2d`: forward F.conv2d; backward torch.nn.grad.conv2d_input / conv2d_weight."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
import torch.nn.grad
from torch import Tensor

from gradlab.model import OpDef

IntOrPair = int | tuple[int, int] | list[int]


class Conv2dFunction(torch.autograd.Function):
    """2-D convolution with an explicit backward; stride, padding, dilation and groups honoured."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None = None,
                stride: IntOrPair = 1, padding: IntOrPair = 0, dilation: IntOrPair = 1,
                groups: int = 1) -> Tensor:
        ctx.save_for_backward(x, weight, bias)
        ctx.conf = (stride, padding, dilation, groups)
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, bias = ctx.saved_tensors
        # Under torch.autocast the forward's conv ran in half precision, so grad_out comes in
        # half while x and weight were saved in float32: compute in grad_out's dtype, as
        # autograd's own conv backward does (a no-op without autocast).
        x, weight = x.to(grad_out.dtype), weight.to(grad_out.dtype)
        stride, padding, dilation, groups = ctx.conf
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.nn.grad.conv2d_input(x.shape, weight, grad_out, stride, padding,
                                                dilation, groups)
        if ctx.needs_input_grad[1]:
            grad_w = torch.nn.grad.conv2d_weight(x, weight.shape, grad_out, stride, padding,
                                                 dilation, groups)
        if bias is not None and ctx.needs_input_grad[2]:
            # No .squeeze(): with one output channel it would turn the [1] gradient into a 0-d one.
            grad_b = grad_out.sum((0, 2, 3))
            if grad_b.shape != bias.shape:
                # no input channels: F.conv2d returns no output channels either, so no output
                # depends on the bias (found by --explore; autograd's own conv gives zeros)
                grad_b = torch.zeros_like(bias)
        return grad_x, grad_w, grad_b, None, None, None, None


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrPair = 1,
           padding: IntOrPair = 0, dilation: IntOrPair = 1, groups: int = 1) -> Tensor:
    """The custom Function as a plain callable with F.conv2d's signature."""
    out: Tensor = Conv2dFunction.apply(x, weight, bias, stride, padding, dilation, groups)
    return out


def conv2d_reference(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrPair = 1, padding: IntOrPair = 0, dilation: IntOrPair = 1,
                     groups: int = 1) -> Tensor:
    """Plain-autograd baseline."""
    return F.conv2d(x, weight, bias, stride, padding, dilation, groups)


OP = OpDef(
    name="conv2d",
    summary="conv2d, backward via torch.nn.grad.conv2d_input/conv2d_weight",
    function=conv2d,
    reference=conv2d_reference,
    second_order=True,
)

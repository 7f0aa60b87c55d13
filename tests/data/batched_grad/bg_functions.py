"""Functions for the batched_grad capability (tests/test_batched_grad.py): backward under vmap
over a batch of grad_outputs (autograd.grad with is_grads_batched)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class Exp(torch.autograd.Function):
    """exp, its backward plain tensor arithmetic: runs under vmap."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class ExpSkipsZero(torch.autograd.Function):
    """exp whose backward returns early when grad_output is all zero: right, but a Python
    branch on grad_output's values, which vmap refuses (a missing capability)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        if not g.any():  # bool() of a tensor: data-dependent control flow
            return torch.zeros_like(y)
        return g * y


class ExpItemScaled(torch.autograd.Function):
    """exp whose backward rescales by .item() of grad_output's largest magnitude (to keep a
    kernel's accumulator in range): right, and vmap refuses .item()."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        s = (g.abs().max().item() if g.numel() else 0.0) or 1.0  # max() of no element raises
        return (g / s) * y * s


def exp_item_reference(x: Tensor) -> Tensor:
    """A reference whose batched backward raises too (it is the same Function)."""
    return ExpItemScaled.apply(x)


class ExpFallbackClipped(torch.autograd.Function):
    """exp whose backward hands grad_output's data pointer to a kernel (a stand-in here) and
    falls back to a pure-torch path when the tensor refuses one; the fallback clips the
    gradient.  Eager backwards always take the kernel path (right); under vmap the data pointer
    raises, the fallback runs, and the batched gradients are wrong."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        try:
            g.data_ptr()  # the kernel's argument check
        except RuntimeError:
            return (g * y).clamp(-1.0, 1.0)  # the fallback's bug
        return g * y


class ExpGradData(torch.autograd.Function):
    """exp whose backward reads grad_output.data (old code): right; under torch's legacy vmap
    .data of a batched tensor crashes the process unless gradlab refuses it first."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g.data * y

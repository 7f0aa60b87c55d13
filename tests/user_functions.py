"""Small user-style Functions the spec and CLI tests load via `module:attr`."""

from typing import Any

import torch
from torch import Tensor


class Square(torch.autograd.Function):
    """x**2, correct."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class SquareNoChainRule(torch.autograd.Function):
    """x**2 whose backward forgets to multiply by grad_output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x


def square_reference(x: Tensor) -> Tensor:
    """Plain autograd x**2."""
    return x**2

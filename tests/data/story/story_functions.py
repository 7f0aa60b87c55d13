"""A Function with one bug that shows in many variants (tests/test_one_story.py), and its twin."""

from typing import Any

import torch
from torch import Tensor


class CubeTwiceGrad(torch.autograd.Function):
    """x**3 whose backward is off by a factor 2: every layout variant and the Jacobian show it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 6 * x * x * grad


class Cube(torch.autograd.Function):
    """x**3, correct."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


def cube_reference(x: Tensor) -> Tensor:
    """Plain autograd x**3."""
    return x * x * x

"""Functions for the trust specs beside this file: each broken one has a correct twin.

A green run must mean "verified": each spec here either fails, or passes only because it
declares what does not apply.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class Exp(Function):
    """Correct: saves its result for backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


def raising_reference(x: Tensor) -> Tensor:
    """BROKEN reference: cannot do the case it is asked for."""
    raise NotImplementedError("this reference only handles 2-D inputs")


class ExpOnce(Function):
    """Right first order, but once_differentiable: a gradient penalty through it crashes."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class NanLog(Function):
    """BROKEN: log(x) computed as log(x - 2) + log(2)... for x in (-1, 1): NaN everywhere."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return (x - 2).log() + torch.log(torch.tensor(2.0, dtype=x.dtype))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / x


class Log(Function):
    """Correct twin of NanLog."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.log()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / x


class ScaleBadShape(Function):
    """BROKEN: y = k * x for a 0-d x and an int k, but the gradient comes back as [3, 1]
    (autograd sums it down to a wrong value; the raw shape gives it away)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, k: int) -> Tensor:
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return (g * ctx.k).reshape(1, 1).expand(3, 1), None


class Scale(Function):
    """Correct twin of ScaleBadShape."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, k: int) -> Tensor:
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * ctx.k, None


def scale_reference(x: Tensor, k: int) -> Tensor:
    return x * k


class ExpLeavesFloat64Default(Function):
    """BROKEN: correct math, but forward switches the default dtype to float64 for good (every
    later torch.tensor(...) and factory call in the program changes dtype)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        torch.set_default_dtype(torch.float64)
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


def scale_by_new_ones(x: Tensor) -> Tensor:
    """A correct op that makes a tensor with the default dtype: it breaks only when the op
    before it leaked a float64 default (float32 x * float64 ones is float64)."""
    return x * torch.ones(x.shape)


def scale_by_ones_reference(x: Tensor) -> Tensor:
    return x * 1.0

"""Test Functions for tolerances: an approximate backward (0.5% off by design, varying with the
values), a float64 Function whose backward rounds through float32, and their correct twins."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

#: How far the approximate backward is off by design (relative, varying with x).
APPROX_ERROR = 0.005


def reference(x: Tensor) -> Tensor:
    """sin(x) * x in plain autograd."""
    return torch.sin(x) * x


def _derivative(x: Tensor) -> Tensor:
    """d/dx (sin(x) * x), computed with differentiable ops (so second order works)."""
    return torch.cos(x) * x + torch.sin(x)


class ApproxSinX(torch.autograd.Function):
    """sin(x) * x whose backward is off by up to 0.5%: scaled by 1 + 0.005 * sin(3x), a factor
    that varies with the values (as an adjoint solver's error does), not a constant one."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x) * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _derivative(x) * (1 + APPROX_ERROR * torch.sin(3 * x))


class ExactSinX(torch.autograd.Function):
    """The correct twin of ApproxSinX."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x) * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _derivative(x)


class Float32Backward(torch.autograd.Function):
    """sin(x) * x in float64 whose backward computes in float32 and casts back: a float64
    gradient only float32-accurate."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x) * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return (g.float() * _derivative(x.float())).to(g.dtype)


def approx(x: Tensor) -> Tensor:
    """ApproxSinX as a callable (for specs)."""
    return ApproxSinX.apply(x)


def exact(x: Tensor) -> Tensor:
    """ExactSinX as a callable (for specs)."""
    return ExactSinX.apply(x)


def float32_backward(x: Tensor) -> Tensor:
    """Float32Backward as a callable (for specs)."""
    return Float32Backward.apply(x)


class Float32Forward(torch.autograd.Function):
    """sin(x) * x in float64 whose forward rounds through float32 (a real package's float64
    Function computing in float32 inside): only float32-accurate, its finite differences noise;
    backward is right."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return (torch.sin(x.float()) * x.float()).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _derivative(x)


def float32_forward(x: Tensor) -> Tensor:
    """Float32Forward as a callable (for specs)."""
    return Float32Forward.apply(x)


#: How far the rough backward is off by design: well beyond bfloat16's default tolerance (5e-2
#: relative, plus 5e-2 of the scale).
ROUGH_ERROR = 0.3


class RoughSinX(torch.autograd.Function):
    """sin(x) * x whose backward is off by up to 30% by design (a coarse approximation)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x) * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _derivative(x) * (1 + ROUGH_ERROR * torch.sin(3 * x))

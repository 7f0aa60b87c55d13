"""Functions whose bugs live at particular input values (small magnitudes, planted zeros) and
their correct twins, for tests/test_value_variants.py and the specs beside this module."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def log_expm1_reference(x: Tensor) -> Tensor:
    """log(exp(x) - 1), stable for x > 0 (plain autograd)."""
    return x + torch.log(-torch.expm1(-x))


class LogExpm1Naive(torch.autograd.Function):
    """log(expm1(x)) whose backward cancels at small x: 1 / (1 - exp(-x)) (the bug)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x + torch.log(-torch.expm1(-x))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / (1 - torch.exp(-x))


class LogExpm1(torch.autograd.Function):
    """The twin: 1 / -expm1(-x), accurate at every x > 0."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x + torch.log(-torch.expm1(-x))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / -torch.expm1(-x)


def sinc_reference(x: Tensor) -> Tensor:
    """sin(x) / x with 1 at 0 (torch.sinc is sin(pi t) / (pi t))."""
    return torch.sinc(x / math.pi)


def _sinc(x: Tensor) -> Tensor:
    safe = torch.where(x == 0, torch.ones_like(x), x)
    return torch.where(x == 0, torch.ones_like(x), torch.sin(safe) / safe)


class SincNaive(torch.autograd.Function):
    """sin(x) / x whose backward (x cos x - sin x) / x^2 is NaN at exactly 0 (the bug)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _sinc(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * (x * torch.cos(x) - torch.sin(x)) / x**2


class Sinc(torch.autograd.Function):
    """The twin: the removable singularity removed (0 at x = 0, as torch.sinc's autograd; the
    series -x/3 + x^3/30 near 0, where the formula cancels)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _sinc(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        near = x.abs() < 1e-2
        safe = torch.where(near, torch.ones_like(x), x)
        formula = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2
        return g * torch.where(near, -x / 3 + x**3 / 30, formula)


class ReluAtZeroOne(torch.autograd.Function):
    """relu whose backward takes relu'(0) = 1 (x >= 0): a convention, torch.relu's is 0."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * (x >= 0).to(g.dtype)

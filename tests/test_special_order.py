"""Second order at the special variant's planted values (gradlab.checks.families.special_order):
a backward that special-cases a point can be right at first order and wrong at second (the
held-out jax5054: sinc's derivative guarded by a select at 0), while a kink, where the second
derivative is a convention, is never judged."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.render.words import message

F64 = torch.float64


def rand(*shape: int, seed: int = 0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (2 * torch.rand(shape, generator=gen, dtype=F64) - 1).requires_grad_()


def sinc(x: Tensor) -> Tensor:
    """sinc in plain autograd, a series near 0 (torch.special.sinc's own second derivative at
    exactly 0 is NaN in torch 2.13: its backward masks x = 0 as the broken Function below does)."""
    px = math.pi * x
    near = px.abs() < 1e-3
    safe = torch.where(near, torch.ones_like(px), px)
    return torch.where(near, 1 - px ** 2 / 6 + px ** 4 / 120, torch.sin(safe) / safe)


class Sinc(Function):
    """sinc(x) = sin(pi x) / (pi x); backward (cos(pi x) pi x - sin(pi x)) / (pi x^2), with x = 0
    selected out to its limit 0: right at first order everywhere, but when `guarded` the
    select's constant makes the second derivative at 0 zero instead of -pi^2/3; the twin's
    backward is differentiable through 0 (a series near it)."""

    guarded = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.special.sinc(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        px = math.pi * x
        if cls.guarded:
            safe = torch.where(x == 0, torch.ones_like(x), x)
            d = (torch.cos(math.pi * safe) * math.pi * safe - torch.sin(math.pi * safe)) / (
                math.pi * safe ** 2)
            return g * torch.where(x == 0, torch.zeros_like(x), d)
        near = px.abs() < 1e-3
        safe = torch.where(near, torch.ones_like(x), x)
        d = (torch.cos(math.pi * safe) * math.pi * safe - torch.sin(math.pi * safe)) / (
            math.pi * safe ** 2)
        series = -(math.pi ** 2) * x / 3 + (math.pi ** 4) * x ** 3 / 30
        return g * torch.where(near, series, d)


class SincSeries(Sinc):
    guarded = False


def special_row(fn: Any, args: list[Any], ref: Any) -> tuple[str, str] | None:
    report = gradlab.check(fn, args, reference=ref, checks=["second_order"])
    rows = [r for r in report.rows if r.check == "second_order" and r.variant == "special"]
    assert all(r.status in ("pass", "fail") for r in rows), [message(r) for r in rows]
    return (rows[0].status, rows[0].hint) if rows else None


def test_a_second_derivative_wrong_only_at_a_planted_zero_fails() -> None:
    x = rand(3, 4)
    base = gradlab.check(Sinc, [x], reference=sinc, checks=["second_order"])
    (row,) = [r for r in base.rows if r.check == "second_order" and r.variant == "base"]
    assert row.status == "pass", message(row)  # drawn values never land on 0
    assert special_row(Sinc, [x], sinc) == ("fail", "special_only")
    assert special_row(SincSeries, [x], sinc) == ("pass", "")


class SignedSquare(Function):
    """x |x|, whose second derivative 2 sign(x) jumps at 0: backward picks the x >= 0 branch
    there (slope 2), autograd's abs the other convention (sgn(0) = 0): no second derivative
    exists at 0, so the two differ without either being wrong."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x.abs()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.where(x >= 0, 2 * x, -2 * x)


def test_a_kink_of_the_first_derivative_at_a_planted_zero_is_not_judged() -> None:
    x = rand(3, 4)
    assert special_row(SignedSquare, [x], lambda t: t * t.abs()) in (None, ("pass", ""))

"""A gradient wrong only where the reference's is exactly 0 (past a clamp the case's values
never reach) warns; a NaN there, or a wrong value where the case reaches the clamp, fails
(gradlab.checks.families.saturation)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.cases import Inputs
from gradlab.checks.families.saturation import flat_beyond_case, wrong_where_flat
from gradlab.checks.numeric.execute import Run
from gradlab.model import Case, Tolerance
from gradlab.render.words import message

F64 = torch.float64
EDGE = 1 - 1e-12
TOL = Tolerance(1e-7, 1e-7)


def rand(*shape: int, low: float = -0.9, high: float = 0.9) -> Tensor:
    gen = torch.Generator().manual_seed(0)
    return (low + (high - low) * torch.rand(shape, generator=gen, dtype=F64)).requires_grad_()


def artanh_ref(x: Tensor, s: float) -> Tensor:
    return (s * x).clamp(-EDGE, EDGE).atanh()


class ScaledArtanh(Function):
    """artanh(clamp(s x)); backward gives s / (1 - y^2) at the clamped y (a hyperbolic
    library's convention: a point past the edge still gets a gradient pointing back in), or
    (`nan_past`) s / sqrt(1 - (s x)^2)^2 at the unclamped value: NaN past the clamp."""

    nan_past = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, s: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.s = s
        return (s * x).clamp(-EDGE, EDGE).atanh()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        y = ctx.s * x
        inside = y.abs() < EDGE
        if cls.nan_past:
            slope = ctx.s / torch.sqrt(1 - y * y) ** 2
        else:
            slope = ctx.s / (1 - y.clamp(-EDGE, EDGE) ** 2)
        return g * torch.where(inside, ctx.s / (1 - y * y), slope), None


class ScaledArtanhNaN(ScaledArtanh):
    nan_past = True


def rows(fn: Any, x: Tensor, s: float) -> dict[str, Any]:
    report = gradlab.check(fn, [x, s], reference=artanh_ref)
    return {f"{r.check}/{r.variant}": r for r in report.rows}


def test_a_gradient_past_a_clamp_the_case_never_reaches_warns() -> None:
    # s = 0.5 keeps every s x inside (-1, 1); the magnitude variant (1e3 x) and the edge's
    # inverse s = 2 cross the clamp
    got = rows(ScaledArtanh, rand(3, 4), 0.5)
    edge, big = got["edges/float[1]"], got["gradient/magnitude"]
    assert (edge.status, edge.hint) == ("warn", "edge_domain"), message(edge)
    assert big.status == "warn", message(big)  # every element past it: scale_limited
    assert not [k for k, r in got.items() if r.status == "fail"], [
        (k, message(r)) for k, r in got.items() if r.status == "fail"]


def test_a_nan_past_the_clamp_fails() -> None:
    big = rows(ScaledArtanhNaN, rand(3, 4), 0.5)["gradient/magnitude"]
    assert big.status == "fail" and "NaN" in message(big), message(big)


def run(outs: list[Tensor], grads: list[Tensor]) -> Run:
    return Run(outs, list(grads))


def test_wrong_only_where_the_reference_is_flat() -> None:
    out = torch.tensor([1.0, 2.0], dtype=F64)
    want = run([out], [torch.tensor([0.0, 3.0], dtype=F64)])
    assert list(wrong_where_flat(run([out], [torch.tensor([5.0, 3.0], dtype=F64)]), want,
                                 TOL)) == [0]
    # wrong where the reference's gradient is not 0, a NaN, or a wrong output: none
    assert wrong_where_flat(run([out], [torch.tensor([5.0, 4.0], dtype=F64)]), want, TOL) == {}
    nan = torch.tensor([float("nan"), 3.0], dtype=F64)
    assert wrong_where_flat(run([out], [nan]), want, TOL) == {}
    assert wrong_where_flat(run([out + 1], [torch.tensor([5.0, 3.0], dtype=F64)]), want,
                            TOL) == {}


def test_a_case_that_reaches_the_clamp_keeps_the_failure() -> None:
    # the case's own values already cross the clamp (s x up to 1.8): its reference gradient
    # has zeros, so a wrong value where it is 0 at other values is no new region
    x = rand(3, 4)
    case = Case("c", (x, 2.0))
    y = x.detach() * 2
    want = run([artanh_ref(x.detach(), 2.0)], [torch.where(y.abs() < EDGE, 2 / (1 - y * y), 0)])
    got = run([want.outs[0]], [torch.where(y.abs() < EDGE, want.grads[0], 7.0)])
    assert list(wrong_where_flat(got, want, TOL)) == [0]
    inputs = Inputs([x.detach().clone().requires_grad_(), 2.0])
    assert not flat_beyond_case(artanh_ref, case, inputs, got, want, TOL, "cpu")


def row_artanh_ref(x: Tensor) -> Tensor:
    return x.norm(dim=-1).clamp(max=EDGE).atanh()


class RowArtanh(Function):
    """artanh(|row|) of each row, |row| clamped below 1 (a Poincare-ball distance's artanh);
    backward passes 1 / (1 - r^2) at the clamped r past the edge (the convention)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.norm(dim=-1).clamp(max=EDGE).atanh()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        r = x.norm(dim=-1, keepdim=True)
        return g[..., None] / (1 - r.clamp(max=EDGE) ** 2) * x / r


def test_rows_grown_past_the_clamp_warn_at_the_variants() -> None:
    # each row's norm below 1 (entries 0.4 to 0.7, two columns); the ragged variant's
    # third column, drawn in the same range, takes some rows past 1
    x = rand(6, 2, low=0.4, high=0.7)
    report = gradlab.check(RowArtanh, [x], reference=row_artanh_ref)
    ragged = [r for r in report.rows if r.check == "gradient" and r.variant.startswith("ragged")]
    assert ragged and all(r.status in ("pass", "warn") for r in ragged), [
        message(r) for r in ragged]
    assert any(r.reason == "past_clamp" for r in ragged), [message(r) for r in ragged]
    assert not [r for r in report.rows if r.status == "fail"], [
        (r.check, r.variant, message(r)) for r in report.rows if r.status == "fail"]


class HalfSquare(Function):
    """x^2 / 2; BROKEN: backward gives 1 at exactly 0 (a slope taken from one side), where
    the derivative x is 0 at a point, not over a region: no clamp."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x / 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.where(x == 0, torch.ones_like(x), x)


def test_a_wrong_gradient_at_a_stationary_point_still_fails() -> None:
    report = gradlab.check(HalfSquare, [rand(3, 4)],
                           reference=lambda x: x * x / 2)
    failed = [r for r in report.rows if r.status == "fail"]
    assert failed and all(r.reason != "past_clamp" for r in failed), [
        (r.check, r.variant, r.status, r.reason) for r in report.rows if r.status != "pass"]

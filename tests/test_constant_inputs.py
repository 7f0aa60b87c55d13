"""A constant input (one that does not require grad) is data the Function is conditioned on:
gradlab's variants never invent values for it that its own slices do not hold (pypose's unit
quaternions: the calibration set's false reds), and a gradient returned for it is not judged
(autograd drops it unread).  Each beside a broken Function that must still fail."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.checks.families.sizes import grown_within, tiled


def unit_rows(n: int, seed: int = 0) -> Tensor:
    """n rotations (cos t, sin t), rows of norm 1."""
    t = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 6
    return torch.stack([t.cos(), t.sin()], -1)


def rotate_ref(r: Tensor, p: Tensor) -> Tensor:
    c, s = r[..., 0:1], r[..., 1:2]
    return torch.cat([c * p[..., :1] - s * p[..., 1:], s * p[..., :1] + c * p[..., 1:]], -1)


class Rotate(Function):
    """Points p rotated by r = (cos t, sin t) rows; backward applies the inverse rotation as
    the transpose, right for rotations (|r| = 1) only, as Lie-group code does.  block_bug:
    BROKEN, rows past the first 4 get the forward rotation instead of its transpose."""

    block_bug = False

    @classmethod
    def forward(cls, ctx: Any, r: Tensor, p: Tensor) -> Tensor:
        ctx.save_for_backward(r)
        return rotate_ref(r, p)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (r,) = ctx.saved_tensors
        inverse = r * torch.tensor([1.0, -1.0], dtype=r.dtype)  # the transpose of a rotation
        if cls.block_bug and r.shape[0] > 4:
            inverse = torch.cat([inverse[:4], r[4:]], 0)
        # a gradient for r too, of the Lie algebra's shape (one angle): autograd drops it, r
        # does not require grad
        return torch.zeros((*r.shape[:-1], 1), dtype=r.dtype), rotate_ref(inverse, g)


class RotateBlockBug(Rotate):
    block_bug = True


def failing(report: gradlab.Report) -> list[tuple[str, str, str]]:
    return [(r.check, r.variant, r.hint) for r in report.rows if r.status in ("fail", "error")]


def test_a_constant_grows_by_its_own_slices() -> None:
    r = unit_rows(3)
    grown = grown_within(r, (5, 2))
    assert torch.equal(grown[:3], r) and torch.equal(grown[3:], r[:2])
    assert torch.allclose(grown.norm(dim=-1), torch.ones(5, dtype=torch.float64))
    assert torch.equal(tiled(r, (2, 1)), r[:2, :1])
    # an input that requires grad still takes new values within its range (any value of
    # its domain is the Function's to differentiate)
    x = torch.tensor([[0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    drawn = grown_within(x, (3, 2))
    assert not torch.equal(drawn[1:], x.detach().expand(2, 2))


def test_a_function_right_for_its_constants_own_kind_of_values_passes() -> None:
    p = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    report = gradlab.check(Rotate.apply, [unit_rows(6), p.requires_grad_()],
                           reference=rotate_ref)
    assert failing(report) == []
    # one rotation for all points ([1, 2]: its one dim of size 2 is a rotation's components,
    # never repeated into another object)
    report = gradlab.check(Rotate.apply, [unit_rows(1), p], reference=rotate_ref)
    assert failing(report) == []


def test_a_bug_past_a_block_still_fails_with_the_constant_tiled() -> None:
    p = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    report = gradlab.check(RotateBlockBug.apply, [unit_rows(4), p.requires_grad_()],
                           reference=rotate_ref)
    assert any(check == "gradient" and variant.startswith("ragged")
               for check, variant, _ in failing(report)), failing(report)


def test_a_gradient_of_the_wrong_shape_fails_where_the_input_requires_grad() -> None:
    p = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    r = unit_rows(6).requires_grad_()
    report = gradlab.check(Rotate.apply, [r, p.requires_grad_()], reference=rotate_ref)
    assert ("contract", "base", "wrong_shape") in failing(report), failing(report)


def weighted_mean_ref(x: Tensor, w: Tensor) -> Tensor:
    return (x * w).sum(-1) / w.sum(-1)


class WeightedMean(Function):
    """Rows of x averaged with the weights w (a constant); assume_unit: BROKEN, backward takes
    w as already normalised (summing to 1), which the case's own weights do."""

    assume_unit = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(w)
        return weighted_mean_ref(x, w)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (w,) = ctx.saved_tensors
        share = w if cls.assume_unit else w / w.sum(-1, keepdim=True)
        return g[..., None] * share, None


class WeightedMeanFixed(WeightedMean):
    assume_unit = False


def explore_hint(fn: type[Function], w: Tensor, budget: float = 2.0) -> tuple[str, str]:
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    report = gradlab.check(fn.apply, [x.requires_grad_(), w], reference=weighted_mean_ref,
                           checks=["explore"], explore=budget)
    (row,) = [r for r in report.rows if r.check == "explore"]
    return row.status, row.hint


def test_explore_moves_a_constants_values_and_a_failure_there_warns() -> None:
    w = torch.softmax(torch.randn(3, 4, dtype=torch.float64), -1)  # rows summing to 1
    # the defaults never make up a constant's values: the bug that needs them passes there
    report = gradlab.check(WeightedMean.apply, [torch.randn(3, 4, dtype=torch.float64)
                                                .requires_grad_(), w],
                           reference=weighted_mean_ref)
    assert failing(report) == []
    # --explore does, and says so: likely, not certain (the weights may have to sum to 1)
    assert explore_hint(WeightedMean, w) == ("warn", "explored_constant")
    assert explore_hint(WeightedMeanFixed, w) == ("pass", "")


class RotateByInverse(Rotate):
    """Backward applies the inverse rotation (conj / |r|^2), which is the transpose for unit
    rows only: right for rotations, wrong for any other r (pypose's Lie groups)."""

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (r,) = ctx.saved_tensors
        inverse = r * torch.tensor([1.0, -1.0], dtype=r.dtype) / (r * r).sum(-1, keepdim=True)
        return torch.zeros((*r.shape[:-1], 1), dtype=r.dtype), rotate_ref(inverse, g)


def test_a_function_right_only_for_its_constants_kind_of_values_warns_never_fails() -> None:
    p = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    args = [unit_rows(4), p.requires_grad_()]
    assert failing(gradlab.check(RotateByInverse.apply, args, reference=rotate_ref)) == []
    report = gradlab.check(RotateByInverse.apply, args, reference=rotate_ref,
                           checks=["explore"], explore=2.0)
    (row,) = [r for r in report.rows if r.check == "explore"]
    assert (row.status, row.hint) == ("warn", "explored_constant"), row

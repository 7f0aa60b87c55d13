"""Second order with one differentiable input at a time (second_order.subset_rows): a double
backward that unpacks the first backward's packed gradients by position goes wrong only when
an operand does not require grad (the held-out bug catalogue's cueq264): silently wrong
values fail, a raise there is an error (as at first order: xitorch's quad packs its parameters
for all of them); correct Functions, in-place ones too, pass every subset."""

from __future__ import annotations

from typing import Any

import torch
from bug_catalogue import BY_ID
from bug_catalogue.heldout import Linear, LinearBackward, unpacked
from torch import Tensor

import gradlab


def subset_rows(fn: object, args: list[Any], ref: Any) -> list[tuple[str, str, str]]:
    r = gradlab.check(fn, args, reference=ref, checks=["second_order"])
    return [(x.variant, x.status, x.hint) for x in r.rows
            if x.check == "second_order" and x.variant.startswith("requires_grad")]


def entry_rows(fn: object, entry: str) -> list[tuple[str, str, str]]:
    e = BY_ID[entry]
    return subset_rows(fn, e.inputs(), e.reference)


class MulBackward(LinearBackward):
    """The backward of x * w as an op returning only the needed gradients, packed; BROKEN: its
    own backward unpacks the incoming gradients by position (same shapes: silently wrong)."""

    @classmethod
    def forward(cls, ctx: Any, g: Tensor, x: Tensor, w: Tensor, nx: bool,
                nw: bool) -> tuple[Tensor, ...]:
        ctx.save_for_backward(g, x, w)
        ctx.flags = (nx, nw)
        return tuple(([g * w] if nx else []) + ([g * x] if nw else []))

    @classmethod
    def backward(cls, ctx: Any, *ggs: Tensor) -> tuple[Any, ...]:
        g, x, w = ctx.saved_tensors
        ggx, ggw = unpacked(ggs, ctx.flags, cls.by_flags, (x, w))
        return ggx * w + ggw * x, g * ggw, g * ggx, None, None


class MulBackwardFixed(MulBackward):
    by_flags = True


class Mul(Linear):
    """x * w, its backward the packed op above (the catalogue's Linear, another product)."""

    bwd = MulBackward

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w


class MulFixed(Mul):
    bwd = MulBackwardFixed


def pair() -> list[Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
            for _ in range(2)]


def test_a_double_backward_unpacking_by_position_fails_at_its_subset() -> None:
    got = subset_rows(Mul.apply, pair(), torch.mul)
    assert ("requires_grad=[1]", "fail", "requires_grad_subset") in got, got
    assert subset_rows(MulFixed.apply, pair(), torch.mul) == [
        ("requires_grad=[0]", "pass", ""), ("requires_grad=[1]", "pass", "")]


def test_a_double_backward_raising_only_at_a_subset_is_an_error() -> None:
    # cueq264's reproduction: the misread gradient has another shape, so autograd raises
    e = BY_ID["cueq264-packed-bwd-bwd"]
    assert ("requires_grad=[1]", "error", "requires_grad_subset") in entry_rows(e.buggy.apply,
                                                                                e.id)
    assert entry_rows(e.twin.apply, e.id) == [("requires_grad=[0]", "pass", ""),
                                              ("requires_grad=[1]", "pass", "")]


def test_an_in_place_function_passes_every_subset() -> None:
    # its forward writes into its first input: each probe runs on copies of its own
    e = BY_ID["pt5871-slice-add-no-mark-dirty"]
    assert entry_rows(e.twin.apply, e.id) == [("requires_grad=[0]", "pass", ""),
                                              ("requires_grad=[1]", "pass", "")]


def test_one_differentiable_input_has_no_subset_rows() -> None:
    e = BY_ID["kornia367-where-division-nan"]
    assert entry_rows(e.twin, e.id) == []


def mean_and_spread(x: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
    """Two outputs, the second of s alone (a filter's covariance beside its mean): with only x
    requiring grad, the second does not require grad."""
    return x * s.exp(), (2 * s).sin()


def test_an_output_that_does_not_depend_on_the_subset_passes() -> None:
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    s = torch.rand(4, dtype=torch.float64, requires_grad=True)
    assert subset_rows(mean_and_spread, [x, s], mean_and_spread) == [
        ("requires_grad=[0]", "pass", ""), ("requires_grad=[1]", "pass", "")]

"""A Function's precision is what it computes in: one returning float32 whatever it is given, or
a float64 one computing in float32 inside, is judged at float32's precision (finite differences,
table, criterion) and says so in exactly one precision_loss warn per op and case; a correct
float64 Function gets none, and a bug planted in the float32 one still fails."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.results import CheckRow

F64 = torch.float64


def rand(*shape: int) -> Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(shape, generator=gen, dtype=F64).requires_grad_()


class Float32Tanh(Function):
    """tanh computed in and returned as float32 whatever it is given (a float32-only kernel);
    its gradient in the input's dtype."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.tanh(x.float())
        ctx.save_for_backward(y)
        ctx.dtype = x.dtype
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return (g.float() * (1 - y * y) * cls.factor).to(ctx.dtype)


class Float32TanhWrong(Float32Tanh):
    """BROKEN: the same Function, its gradient 5% too large."""

    factor = 1.05


class Softmax(Function):
    """softmax over the last dim, computed in `inside` and returned in the input's dtype."""

    inside = F64

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = torch.softmax(x.to(cls.inside), -1).to(x.dtype)
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        y_, g_ = y.to(cls.inside), g.to(cls.inside)
        return (y_ * (g_ - (g_ * y_).sum(-1, keepdim=True))).to(g.dtype)


class SoftmaxInFloat32(Softmax):
    """A float64 softmax computing in float32 inside (its error ~6e-8 is under float64's
    rtol of 1e-7: the table alone passes it silently)."""

    inside = torch.float32


def softmax(x: Tensor) -> Tensor:
    return torch.softmax(x, -1)


def precision_rows(rows: list[CheckRow]) -> list[CheckRow]:
    return [r for r in rows if r.hint == "precision_loss"]


def not_passing(rows: list[CheckRow]) -> list[tuple[str, str, str, str]]:
    return [(r.variant, r.check, r.status, r.hint) for r in rows if r.status != "pass"]


def test_a_float32_only_function_checked_in_float64_passes_with_one_warn() -> None:
    r = gradlab.check(Float32Tanh, [rand(4, 8)], reference=torch.tanh)
    assert r.passed, not_passing(r.rows)
    warns = [x for x in r.rows if x.status == "warn"]
    assert [(x.check, x.hint) for x in warns] == [("forward", "precision_loss")]
    jacobian = [x for x in r.rows if x.check == "jacobian"]
    assert jacobian and jacobian[0].status == "pass"
    assert "only accurate to" in jacobian[0].note  # differenced at float32's precision


def test_a_bug_planted_in_the_float32_only_function_still_fails() -> None:
    r = gradlab.check(Float32TanhWrong, [rand(4, 8)], reference=torch.tanh)
    failed = {(x.variant, x.check) for x in r.rows if x.status == "fail"}
    assert {("base", "gradient"), ("base", "jacobian")} <= failed, not_passing(r.rows)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5, 16)], ids=["2d", "3d"])
def test_a_softmax_in_float32_inside_warns_once_per_op_and_case(shape: tuple[int, ...]) -> None:
    r = gradlab.check(SoftmaxInFloat32, [rand(*shape)], reference=softmax)
    assert r.passed, not_passing(r.rows)
    evidence = [x for x in precision_rows(r.rows) if x.status == "warn"]
    assert len(evidence) == 1 and evidence[0].variant == "base", not_passing(r.rows)
    assert [x for x in r.rows if x.status == "warn"] == evidence
    # the case's other float32-computed rows point to it
    assert any(x.reason == "float32_accurate" and x.status == "pass" for x in r.rows)


def test_the_true_float64_softmax_gets_no_warn() -> None:
    r = gradlab.check(Softmax, [rand(4, 8)], reference=softmax)
    assert r.passed and not [x for x in r.rows if x.status != "pass"], not_passing(r.rows)
    assert not precision_rows(r.rows)


class Float32SinMixed(Function):
    """sin computed in float32 and cast (forward: float32 values), its backward's derivative
    in float32 times grad_output in float64: the gradient is float32-accurate without being
    float32 values (fairscale's float32 vocabulary projection does the same)."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x.float()).to(x.dtype)

    @classmethod
    @once_differentiable  # a kernel's backward: first order only
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return torch.cos(x.float()).to(x.dtype) * g * cls.factor


class Float32SinMixedWrong(Float32SinMixed):
    """BROKEN: its gradient 1% too large."""

    factor = 1.01


def test_a_float32_accurate_gradient_beside_a_float32_forward_is_precision() -> None:
    r = gradlab.check(Float32SinMixed.apply, [rand(4, 8)], reference=torch.sin)
    assert r.passed, not_passing(r.rows)
    assert [(x.check, x.hint) for x in r.rows if x.status == "warn"] == [
        ("forward", "precision_loss")], not_passing(r.rows)
    wrong = gradlab.check(Float32SinMixedWrong.apply, [rand(4, 8)], reference=torch.sin)
    assert ("base", "gradient") in {(x.variant, x.check) for x in wrong.rows
                                    if x.status == "fail"}, not_passing(wrong.rows)

"""A gradient that is not the derivative by design (a straight-through estimator, a clipped
surrogate): where the reference states the same surrogate, the jacobian row's finite
differences are not the truth either, and the row passes (reason reference_surrogate); a
Function whose surrogate differs from the reference's still fails."""

from __future__ import annotations

import torch

import gradlab
from gradlab.render.words import message


class RoundSTE(torch.autograd.Function):
    """round(x) with the identity as its backward (quantization-aware training)."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class ClippedRoundSTE(torch.autograd.Function):
    """round(x) whose straight-through gradient is zero outside [-1, 1] (a clipped STE)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1)


def ste_ref(x: torch.Tensor) -> torch.Tensor:
    return x + (torch.round(x) - x).detach()


def values() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(3, 4, generator=gen, dtype=torch.float64) * 4 - 2).requires_grad_()


def rows(report: gradlab.Report, check: str) -> list:
    return [r for r in report.rows if r.check == check and r.variant == "base"]


def test_a_surrogate_the_reference_states_passes() -> None:
    report = gradlab.check(RoundSTE, [values()], reference=ste_ref)
    (jac,) = rows(report, "jacobian")
    assert jac.status == "pass" and jac.reason == "reference_surrogate", message(jac)
    assert report.passed, [message(r) for r in report.failures]


def test_a_surrogate_other_than_the_reference_s_fails() -> None:
    report = gradlab.check(ClippedRoundSTE, [values()], reference=ste_ref)
    (jac,) = rows(report, "jacobian")
    assert jac.status == "fail" and jac.reason == "", message(jac)
    assert any(r.check == "gradient" and r.failed for r in report.rows)


def test_against_the_true_derivative_a_surrogate_fails() -> None:
    # the reference is round itself: its gradient is zero, as the finite differences say
    report = gradlab.check(RoundSTE, [values()], reference=torch.round)
    (jac,) = rows(report, "jacobian")
    assert jac.status == "fail", message(jac)


def quantized(w: torch.Tensor) -> torch.Tensor:
    """w rounded to 7 levels of its absmax scale (moving with the largest element)."""
    s = w.abs().amax() / 7
    return torch.round(w / s) * s


class QuantLinear(torch.autograd.Function):
    """x @ q(w) + b, q an absmax-scaled rounding, backward straight through it (quantization-
    aware training, as optimum-quanto's qlinear): its gradient in x holds q(w), whose scale
    moves with w, so its second order is no finite-difference derivative, nor the reference's;
    b's gradient does not depend on the inputs, so neither double backward reaches b (cal7's
    quanto: 4 false fails)."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ quantized(w) + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        # straight through again: differentiable in w as the identity, as the reference is
        return g @ (w + (quantized(w) - w).detach()).T, x.T @ g, g.sum(0)


def quant_linear_ref(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x @ (w + (quantized(w) - w).detach()) + b


def test_a_second_order_surrogate_with_an_input_neither_reaches_passes() -> None:
    gen = torch.Generator().manual_seed(1)
    x, w, b = (torch.rand(*s, generator=gen, dtype=torch.float64).requires_grad_()
               for s in ((3, 4), (4, 5), (5,)))
    report = gradlab.check(QuantLinear, [x, w, b], reference=quant_linear_ref,
                           checks=["second_order"])
    (row,) = rows(report, "second_order")
    assert row.status == "pass" and row.reason == "reference_surrogate", message(row)

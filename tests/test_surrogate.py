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

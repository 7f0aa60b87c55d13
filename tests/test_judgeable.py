"""The one judgeability rule (gradlab.checks.families.judgeable): a variant's row fails only
where the Function is wrong in a way the reference, on the same values, is not.  A stable IIR
filter given a coefficient outside its domain overflows in float32 as its reference does; a
few CG iterations on an SPD system the planted values made harder are off by a method's
accuracy.  Both pass (a pass saying why, a warn giving the number), while a bug planted in the
same Functions still fails its base row."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.render.words import message

#: Steps of the filter: a coefficient of 3 (special) reaches 3**200 ~ 3e95, past float32's
#: range (3e38) and inside float64's.
STEPS = 200
#: CG iterations: the base system (I + M M^T, M ~ 0.05) converges in them to float64's
#: rounding, one with a planted 3 in M does not.
ITERS = 5


class IIR(Function):
    """y[t] = a * y[t-1] + x[t] along the last dim, one coefficient a per row (|a| < 1)."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: Tensor, a: Tensor) -> Tensor:
        y, prev = torch.empty_like(x), torch.zeros_like(x[..., 0])
        for t in range(x.shape[-1]):
            prev = a * prev + x[..., t]
            y[..., t] = prev
        ctx.save_for_backward(y, a)
        return y

    @classmethod
    @once_differentiable
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        y, a = ctx.saved_tensors
        gx, acc = torch.empty_like(g), torch.zeros_like(g[..., 0])
        for t in reversed(range(g.shape[-1])):
            acc = g[..., t] + a * acc
            gx[..., t] = acc
        before = torch.cat([torch.zeros_like(y[..., :1]), y[..., :-1]], -1)
        return gx, (gx * before).sum(-1) * cls.factor


class IIRWrong(IIR):
    """BROKEN: the coefficient's gradient 5% too large."""

    factor = 1.05


def iir_reference(x: Tensor, a: Tensor) -> Tensor:
    prev, ys = torch.zeros_like(x[..., 0]), []
    for t in range(x.shape[-1]):
        prev = a * prev + x[..., t]
        ys.append(prev)
    return torch.stack(ys, -1)


def cg(A: Tensor, b: Tensor, rtol: float = 1e-12) -> Tensor:
    """ITERS conjugate-gradient steps on each system, each stopped once its residual is below
    rtol of |b|."""
    x, r = torch.zeros_like(b), b.clone()
    p, rs = r.clone(), (r * r).sum(-1, keepdim=True)
    stop, one = rtol ** 2 * rs, torch.ones_like(rs)
    for _ in range(ITERS):
        live = rs > stop
        Ap = (A @ p.unsqueeze(-1)).squeeze(-1)
        pAp = (p * Ap).sum(-1, keepdim=True)
        alpha = torch.where(live, rs / torch.where(live, pAp, one), torch.zeros_like(rs))
        x, r = x + alpha * p, r - alpha * Ap
        rn = (r * r).sum(-1, keepdim=True)
        p = torch.where(live, r + rn / torch.where(live, rs, one) * p, p)
        rs = torch.where(live, rn, rs)
    return x


def spd(M: Tensor) -> Tensor:
    return M @ M.transpose(-1, -2) + torch.eye(M.shape[-1], dtype=M.dtype)


class CGSolve(Function):
    """x = (I + M M^T)^-1 b by CG; backward by the adjoint solve, also by CG."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, M: Tensor, b: Tensor) -> Tensor:
        A = spd(M)
        x = cg(A, b)
        ctx.save_for_backward(M, A, x)
        return x

    @classmethod
    @once_differentiable
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        M, A, x = ctx.saved_tensors
        gb = cg(A, g)
        gA = -gb.unsqueeze(-1) * x.unsqueeze(-2)
        return (gA + gA.transpose(-1, -2)) @ M * cls.factor, gb


class CGSolveWrong(CGSolve):
    """BROKEN: the matrix's gradient 5% too large."""

    factor = 1.05


def solve_reference(M: Tensor, b: Tensor) -> Tensor:
    return torch.linalg.solve(spd(M), b.unsqueeze(-1)).squeeze(-1)


def iir_args() -> list[Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, STEPS, generator=gen, dtype=torch.float64)
    a = 0.5 + 0.4 * torch.rand(3, generator=gen, dtype=torch.float64)
    return [x.float().requires_grad_(), a.float().requires_grad_()]


def cg_args() -> list[Tensor]:
    gen = torch.Generator().manual_seed(0)
    M = 0.05 * torch.randn(2, 6, 6, generator=gen, dtype=torch.float64)
    return [M.requires_grad_(), torch.randn(2, 6, generator=gen, dtype=torch.float64)
            .requires_grad_()]


#: name: (correct, broken, reference, inputs, special values planted in one input)
CASES = {
    "iir_filter": (IIR, IIRWrong, iir_reference, iir_args, {1: [3.0]}),
    "cg_solve": (CGSolve, CGSolveWrong, solve_reference, cg_args, {0: [3.0]}),
}


def not_passing(r: gradlab.Report) -> list[tuple[str, str, str, str, str]]:
    return [(x.variant, x.check, x.status, x.reason, x.note[:80]) for x in r.rows
            if x.status != "pass"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_function_whose_domain_the_variants_leave_passes(name: str) -> None:
    fn, _, ref, args, special = CASES[name]
    r = gradlab.check(fn, args(), reference=ref, special=special)
    assert r.passed and not r.failures, not_passing(r)
    special_rows = [x for x in r.rows if x.variant == "special" and x.check != "contract"]
    assert special_rows, not_passing(r)
    if name == "iir_filter":  # inf in float32 for the reference as for the Function
        assert any(x.reason == "overflow_alike" for x in special_rows), not_passing(r)
    else:  # a method's accuracy: a warn giving the number
        warned = [x for x in special_rows if x.status == "warn"]
        assert warned and all(x.reason == "method_accuracy" for x in warned), not_passing(r)
        assert "of its scale, direction kept" in warned[0].note


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bug_planted_in_the_same_function_still_fails_its_base_row(name: str) -> None:
    _, broken, ref, args, special = CASES[name]
    r = gradlab.check(broken, args(), reference=ref, special=special)
    assert [x for x in r.failures if x.variant == "base" and x.check == "gradient"], \
        not_passing(r)


class RepeatSensitive(Function):
    """2 x, by a method 1e-5 off (relative, in its direction) wherever two values repeat (a
    solver stopped at its tolerance on a system that repeated rows make harder: helper-18's
    linear_cg on an expanded input); `layout`: BROKEN instead, 1e-5 off wherever the input's
    memory has stride 0 (its values alone are right)."""

    layout = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        off = (0 in x.stride()) if cls.layout else x.unique().numel() < x.numel()
        ctx.scale = 2 * (1 + 1e-5 * off)
        return x * ctx.scale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.scale


class LayoutSensitive(RepeatSensitive):
    layout = True


def test_an_expanded_input_s_values_at_a_method_s_accuracy_warn() -> None:
    x = torch.rand(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    r = gradlab.check(RepeatSensitive, [x.requires_grad_()], reference=lambda x: 2 * x)
    expanded = [v for v in r.rows if v.variant.startswith("expanded")]
    assert expanded and all(v.status == "warn" and v.reason == "method_accuracy"
                            for v in expanded), not_passing(r)
    assert not r.failures, not_passing(r)
    broken = gradlab.check(LayoutSensitive, [x], reference=lambda x: 2 * x)
    assert [v for v in broken.failures if v.variant.startswith("expanded")
            and v.hint == "expanded_only"], not_passing(broken)


class SpikeSigmoidSurrogate(torch.autograd.Function):
    """A spike (x > 0) with a sigmoid surrogate, its slope written as k e^{-kx} / (e^{-kx} + 1)^2
    (snntorch 1.0's): inf / inf = NaN once e^{-kx} overflows, float32's at kx < -88."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        e = torch.exp(-5 * x)
        return g * 5 * e / (e + 1) ** 2


def spike_sigmoid_reference(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(5 * x)
    return (x > 0).to(x.dtype) + (s - s.detach())


def test_a_nan_where_the_reference_is_finite_in_the_same_dtype_is_no_conditioning() -> None:
    # cal8: the float32 magnitude row was a declared skip, `ill_conditioned` (the reference's
    # gradient, 0 in float32 and ~1e-40 in float64, "moves by 1"), over the Function's NaN
    x = torch.tensor([[-0.0513, -0.9582, 0.9211, -0.1067, 0.9816, -0.1275, 0.8344],
                      [0.1965, 0.7708, 0.3059, 0.6280, 0.4031, 0.0513, 0.5322],
                      [0.5946, -0.6186, 0.7910, 0.2101, -0.5587, 0.1139, 0.9005]])
    r = gradlab.check(SpikeSigmoidSurrogate, [x.requires_grad_()],
                      reference=spike_sigmoid_reference)
    (row,) = [x for x in r.rows if x.check == "gradient" and x.variant == "magnitude"]
    assert row.status == "fail" and row.hint == "magnitude_only", message(row)

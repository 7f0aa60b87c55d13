"""gradlab.checks.families.domain: a variant that leaves the reference's own domain is a declared
skip, never a failure of a correct Function, and never hides a wrong backward.

Correct Functions with a domain edge (an explicit RK4 solver with a hand-written adjoint,
unstable at the magnitude variant's rates; an eigh-based square root and a nearest rotation
whose references meet repeated eigen/singular values at the ties and expanded variants; a
reference that refuses large inputs) pass at the defaults; each broken twin (a wrong backward
inside the domain) still fails, and so does a naive logsumexp that overflows where the
reference is stable.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.checks.families import domain

STEPS, DT = 12, 0.05


def _f(y: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return r * y * (1 - y)


def rk4_logistic(y0: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """y' = r y (1 - y) by fixed-step RK4: the plain-autograd reference."""
    y = y0
    for _ in range(STEPS):
        k1 = _f(y, r)
        k2 = _f(y + DT / 2 * k1, r)
        k3 = _f(y + DT / 2 * k2, r)
        k4 = _f(y + DT * k3, r)
        y = y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def _step_adjoint(y: torch.Tensor, r: torch.Tensor, a: torch.Tensor,
                  drop: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The discrete adjoint of one RK4 step (drop: the broken twin forgets k4's r-share)."""
    def fy(z: torch.Tensor) -> torch.Tensor:
        return r * (1 - 2 * z)

    def fr(z: torch.Tensor) -> torch.Tensor:
        return z * (1 - z)

    k1 = _f(y, r)
    z2 = y + DT / 2 * k1
    k2 = _f(z2, r)
    z3 = y + DT / 2 * k2
    k3 = _f(z3, r)
    z4 = y + DT * k3
    a1, a2, a3, a4 = a * DT / 6, a * DT / 3, a * DT / 3, a * DT / 6
    ay, ar = a.clone(), torch.zeros_like(r)
    az4 = a4 * fy(z4)
    ar = ar + (0 if drop else a4 * fr(z4))
    a3, ay = a3 + az4 * DT, ay + az4
    az3 = a3 * fy(z3)
    ar, a2, ay = ar + a3 * fr(z3), a2 + az3 * DT / 2, ay + az3
    az2 = a2 * fy(z2)
    ar, a1, ay = ar + a2 * fr(z2), a1 + az2 * DT / 2, ay + az2
    return ay + a1 * fy(y), ar + a1 * fr(y)


class RK4Logistic(Function):
    """The same solver with a hand-written discrete adjoint."""

    DROP = False

    @staticmethod
    def forward(ctx: Any, y0: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        ys = [y0]
        with torch.no_grad():
            for _ in range(STEPS):
                ys.append(rk4_logistic_step(ys[-1], r))
        ctx.save_for_backward(r, *ys[:-1])
        return ys[-1]

    @classmethod
    @once_differentiable
    def backward(cls, ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r, *ys = ctx.saved_tensors
        a, ar = g, torch.zeros_like(r)
        for y in reversed(ys):
            a, dr = _step_adjoint(y, r, a, cls.DROP)
            ar = ar + dr
        return a, ar


def rk4_logistic_step(y: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """One step as a solver library writes it: the same math in another order of operations
    (so where the solution diverges, the two give different non-finite values)."""
    def f(z: torch.Tensor) -> torch.Tensor:
        return r * z - r * z * z

    k1 = f(y)
    k2 = f(y + k1 * (DT / 2))
    k3 = f(y + k2 * (DT / 2))
    k4 = f(y + k3 * DT)
    return y + k1 * (DT / 6) + k2 * (DT / 3) + k3 * (DT / 3) + k4 * (DT / 6)


class RK4LogisticBroken(RK4Logistic):
    DROP = True


def sqrtm_reference(x: torch.Tensor) -> torch.Tensor:
    """sqrt(X X^T + I) through eigh in plain autograd (its backward has 1/(l_i - l_j))."""
    a = x @ x.mT + torch.eye(x.shape[-1], dtype=x.dtype)
    lam, q = torch.linalg.eigh(a)
    return q @ torch.diag_embed(lam.sqrt()) @ q.mT


class Sqrtm(Function):
    """The same square root, backward by the Sylvester form 1/(sqrt l_i + sqrt l_j)."""

    BROKEN = False

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        a = x @ x.mT + torch.eye(x.shape[-1], dtype=x.dtype)
        lam, q = torch.linalg.eigh(a)
        s = lam.sqrt()
        ctx.save_for_backward(x, q, s)
        return q @ torch.diag_embed(s) @ q.mT

    @classmethod
    @once_differentiable
    def backward(cls, ctx: Any, g: torch.Tensor) -> torch.Tensor:
        x, q, s = ctx.saved_tensors
        den = s[..., :, None] * s[..., None, :] if cls.BROKEN else s[..., :, None] + s[..., None, :]
        ga = q @ ((q.mT @ g @ q) / den) @ q.mT
        return (ga + ga.mT) @ x


class SqrtmBroken(Sqrtm):
    BROKEN = True


def rotation_reference(m: torch.Tensor) -> torch.Tensor:
    """The nearest orthogonal matrix (polar factor) U V^T through autograd's SVD."""
    u, _, vh = torch.linalg.svd(m)
    return u @ vh


class NearestRotation(Function):
    """The polar factor, backward (H - H^T) / (s_i + s_j) in the singular bases."""

    BROKEN = False

    @staticmethod
    def forward(ctx: Any, m: torch.Tensor) -> torch.Tensor:
        u, s, vh = torch.linalg.svd(m)
        ctx.save_for_backward(u, s, vh)
        return u @ vh

    @classmethod
    @once_differentiable
    def backward(cls, ctx: Any, g: torch.Tensor) -> torch.Tensor:
        u, s, vh = ctx.saved_tensors
        h = u.mT @ g @ vh.mT
        k = (h - h.mT) / (s[:, None] + s[None, :])
        return u @ (k.mT if cls.BROKEN else k) @ vh


class NearestRotationBroken(NearestRotation):
    BROKEN = True


class NaiveLogSumExp(Function):
    """logsumexp as log(sum(exp(x))): overflows at the magnitude variant."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        e = x.exp()
        ctx.save_for_backward(e)
        return e.sum(-1).log()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (e,) = ctx.saved_tensors
        return g[..., None] * e / e.sum(-1, keepdim=True)


class ExpFloat32(Function):
    """exp whose float64 forward and backward are computed in float32: right at the base case
    (within float64's 1e-7), inf from x ~ 89 where the float64 reference is finite to 709."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        out = x.float().exp().to(x.dtype)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (out,) = ctx.saved_tensors
        return g * out


class StableLogSumExp(Function):
    """The twin with the max shift."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        out = torch.logsumexp(x, -1)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        x, out = ctx.saved_tensors
        return g[..., None] * (x - out[..., None]).exp()


class Softplus(Function):
    """softplus in its stable form, backward sigmoid(x)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


def bounded_softplus(x: torch.Tensor) -> torch.Tensor:
    """A reference defined only on |x| <= 500 (its backward refuses beyond, as a solver's
    step-size control does): the magnitude variant (1000 in float64) leaves its domain."""
    out = torch.nn.functional.softplus(x)
    if out.requires_grad and float(x.detach().abs().max()) > 500:
        def refuse(g: torch.Tensor) -> torch.Tensor:
            raise ValueError("outside |x| <= 500")
        out.register_hook(refuse)
    return out


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def ode_args(dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    y0 = 0.1 + 0.8 * torch.rand(2, 3, generator=_gen(), dtype=torch.float64)
    r = 0.5 + torch.rand(2, 3, generator=_gen(1), dtype=torch.float64)
    return [y0.to(dtype).requires_grad_(), r.to(dtype).requires_grad_()]


def matrix_args(dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    return [torch.randn(3, 3, generator=_gen(2), dtype=torch.float64).to(dtype)
            .requires_grad_()]


def lse_args(dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    return [(2 * torch.rand(3, 5, generator=_gen(3), dtype=torch.float64) - 1).to(dtype)
            .requires_grad_()]


#: name: (correct, broken, reference, example)
PAIRS = {
    "rk4_logistic": (RK4Logistic, RK4LogisticBroken, rk4_logistic, ode_args),
    "eigh_sqrtm": (Sqrtm, SqrtmBroken, sqrtm_reference, matrix_args),
    "nearest_rotation": (NearestRotation, NearestRotationBroken, rotation_reference,
                         matrix_args),
    "logsumexp": (StableLogSumExp, NaiveLogSumExp, lambda x: torch.logsumexp(x, -1), lse_args),
}


def _table(r: gradlab.Report) -> list[tuple[str, str, str, str, str]]:
    return [(x.variant, x.check, x.status, x.hint or x.reason, x.note[:90]) for x in r.rows
            if x.status != "pass"]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_correct_function_passes_at_the_defaults(name: str) -> None:
    fn, _, ref, example = PAIRS[name]
    r = gradlab.check(fn.apply, example(), reference=ref)
    assert r.passed and not r.failures, _table(r)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_broken_twin_still_fails(name: str) -> None:
    _, broken, ref, example = PAIRS[name]
    r = gradlab.check(broken.apply, example(), reference=ref)
    assert r.failures, _table(r)
    if name == "logsumexp":
        # in the domain (the base case) it is right: only the magnitude variant shows it,
        # where the reference is stable and well-conditioned
        assert [x for x in r.failures if x.variant == "magnitude"], _table(r)
        assert not [x for x in r.rows if x.variant == "magnitude"
                    and x.reason in ("outside_domain", "ill_conditioned")], _table(r)
    else:
        assert [x for x in r.failures if x.variant == "base"], _table(r)


def test_the_domain_skips_say_why_with_numbers() -> None:
    # the reference refuses the magnitude variant's values (float64, 1000): not judgeable there
    r = gradlab.check(Softplus.apply, lse_args(torch.float64), reference=bounded_softplus)
    skips = [x for x in r.rows if x.variant == "magnitude" and x.status == "skip"]
    assert skips and all(x.declared and x.reason == "outside_domain" for x in skips), _table(r)
    assert "raises in float64" in skips[0].note and r.passed, _table(r)
    # a stride-0 row makes the matrix rank 1: the nearest rotation is not unique
    rot = gradlab.check(NearestRotation.apply, matrix_args(), reference=rotation_reference)
    ill = [x for x in rot.rows if x.reason == "ill_conditioned"]
    assert [x.variant for x in ill] == ["expanded[0]"], _table(rot)
    assert ill[0].status == "skip" and ill[0].declared and "moves by" in ill[0].note


def test_a_partly_finite_reference_still_judges_its_finite_elements() -> None:
    # the magnitude variant: the reference is inf past 709 and finite below, where the
    # float32 overflow is the bug
    r = gradlab.check(ExpFloat32.apply, lse_args(torch.float64), reference=torch.exp)
    assert [x for x in r.failures if x.variant == "magnitude"], _table(r)
    assert not [x for x in r.rows if x.reason in ("outside_domain", "ill_conditioned")]


def test_moved_measures_relative_change() -> None:
    from gradlab.checks.numeric.execute import Run

    a = Run([torch.tensor([1.0, 2.0], dtype=torch.float64)], [])
    b = Run([torch.tensor([1.0, 2.2], dtype=torch.float64)], [])
    assert domain.moved(a, b) == pytest.approx(0.1)
    c = Run([torch.tensor([1.0, float("inf")], dtype=torch.float64)], [])
    assert domain.moved(a, c) == float("inf")
    # only where the first run is finite
    assert domain.moved(c, a) == 0.0
    # the threshold and the nudge name the same condition number
    assert domain.ILL_CONDITIONED / domain.NUDGE == pytest.approx(1e5)

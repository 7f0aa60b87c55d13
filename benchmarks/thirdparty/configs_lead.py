"""The lead's half of the third-party corpus (issue 28): custom autograd.Functions with a
hand-written backward from torchdiffeq, torchsde, POT, roma, torchinterp1d and kornia, each
against a plain-autograd reference written here from the math (format: corpus.py).  The
Functions found broken (torchinterp1d, POT's emd2 and envelope, roma's SVD route, kornia's null
space) are configs_bugs.py's, from the set-ups and references here.

Every package is imported inside make(), so this module imports without them (run_corpus.py
puts $GRADLAB_THIRDPARTY on sys.path).  The examples are float64; run_corpus.py checks each in
float64 and float32.  The iterative configs set their solver tolerance for the dtype they run
in: tight in float64, as a user checking against exact math would set it (float32 cannot reach
1e-11, and an adaptive solver asked for it would not stop).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
from corpus import Config, Made  # benchmarks/thirdparty is on sys.path (run_corpus.py)

F64 = torch.float64
TORCHDIFFEQ = "torchdiffeq==0.2.5"
TORCHSDE = "torchsde==0.2.6"
POT = "POT==0.9.7.post1"
ROMA = "roma==1.8.0"
TORCHINTERP1D = "torchinterp1d==1.1"
KORNIA = "kornia==0.9.0"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, seed: int, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, dtype=F64, generator=_gen(seed)).requires_grad_(grad)


def _spd(batch: tuple[int, ...], n: int, seed: int) -> torch.Tensor:
    b = torch.randn(*batch, n, n, dtype=F64, generator=_gen(seed))
    return (b @ b.mT / n + 0.5 * torch.eye(n, dtype=F64)).requires_grad_()


def _tol(dtype: torch.dtype, f64: float, f32: float) -> float:
    """A solver tolerance for `dtype`: `f64` in float64, `f32` otherwise."""
    return f64 if dtype == F64 else f32


# ---- torchdiffeq: OdeintAdjointMethod (the adjoint ODE solved backwards in time) -----------

ODE_TIMES = (0.0, 0.5, 1.0)


def _ode_linear() -> Made:
    from torchdiffeq import odeint_adjoint

    def fn(a: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
        t = torch.tensor(ODE_TIMES, dtype=y0.dtype)
        tol = _tol(y0.dtype, 1e-11, 1e-6)
        return odeint_adjoint(lambda _t, y: y @ a.mT, y0, t, rtol=tol, atol=tol * 1e-2,
                              adjoint_params=(a,))

    a = (0.5 * torch.randn(3, 3, dtype=F64, generator=_gen(1))).requires_grad_()
    return fn, [a, _randn(2, 3, seed=2)], {}


def ref_ode_linear(a: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
    """y' = y A^T: y(t) = y0 expm(t A)^T."""
    return torch.stack([y0 @ torch.linalg.matrix_exp(t * a).mT for t in ODE_TIMES])


LOGISTIC_TIMES = (0.0, 0.4, 0.8)


def _ode_logistic_rk4() -> Made:
    from torchdiffeq import odeint_adjoint

    def fn(r: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
        t = torch.tensor(LOGISTIC_TIMES, dtype=y0.dtype)
        return odeint_adjoint(lambda _t, y: r * y * (1 - y), y0, t, method="rk4",
                              options={"step_size": LOGISTIC_STEP}, adjoint_params=(r,))

    r = torch.tensor([1.3], dtype=F64, requires_grad=True)
    y0 = torch.tensor([0.2, 0.5, 0.7, 0.9], dtype=F64, requires_grad=True)
    return fn, [r, y0], {}


LOGISTIC_STEP = 0.01


def ref_ode_logistic(r: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
    """y' = r y (1 - y) by the scheme the Function differentiates, written out: fixed-grid RK4
    (the 3/8 rule, torchdiffeq's "rk4") on the grid k * step (the last point clipped to the
    final time), outputs linearly interpolated between grid points.  Not the closed form
    1 / (1 + (1/y0 - 1) exp(-r t)): that also measures the discretisation, which at the
    magnitude variant's rates (r = 1300, y0 up to 900) makes the explicit scheme diverge
    while the closed form stays finite, a property of RK4 at that step, not of the adjoint."""
    def f(y: torch.Tensor) -> torch.Tensor:
        return r * y * (1 - y)

    t_end = LOGISTIC_TIMES[-1]
    n = math.ceil(t_end / LOGISTIC_STEP + 1)
    grid = [min(k * LOGISTIC_STEP, t_end) for k in range(n)]
    ys, y, out = [y0], y0, [y0]
    for t0, t1 in itertools.pairwise(grid):
        h = t1 - t0
        k1 = f(y)
        k2 = f(y + h * k1 / 3)
        k3 = f(y + h * (k2 - k1 / 3))
        k4 = f(y + h * (k1 - k2 + k3))
        y = y + h * (k1 + 3 * (k2 + k3) + k4) / 8
        ys.append(y)
    for t in LOGISTIC_TIMES[1:]:
        j = next(k for k in range(1, n) if grid[k] >= t)
        w = (t - grid[j - 1]) / (grid[j] - grid[j - 1])
        out.append(ys[j - 1] + w * (ys[j] - ys[j - 1]))
    return torch.stack(out)


def _ode_rotation_final() -> Made:
    from torchdiffeq import odeint_adjoint

    def fn(w: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
        t = torch.tensor([0.0, 2.0], dtype=y0.dtype)
        jt = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=y0.dtype)
        tol = _tol(y0.dtype, 1e-11, 1e-6)
        ys = odeint_adjoint(lambda _t, y: w * (y @ jt), y0, t, rtol=tol, atol=tol * 1e-2,
                            adjoint_params=(w,))
        return (ys[-1] ** 2 * torch.arange(1, 3, dtype=y0.dtype)).sum(0)

    w = torch.tensor([[0.7]], dtype=F64, requires_grad=True)
    return fn, [w, _randn(5, 2, seed=3)], {}


def ref_ode_rotation(w: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
    """y' = w y J^T (J the 90-degree rotation): y(2) = y0 R(2w)^T, then weighted squares
    summed over the batch."""
    th = 2.0 * w[0, 0]
    c, s = torch.cos(th), torch.sin(th)
    y = y0 @ torch.stack([torch.stack([c, -s]), torch.stack([s, c])])
    return (y ** 2 * torch.arange(1, 3, dtype=y0.dtype)).sum(0)


# ---- torchsde: _SdeintAdjointMethod with reversible Heun, whose adjoint is exact for its ----
# ---- discretisation: the reference is the same scheme written out, on the same Brownian path -

SDE_T1 = 0.5
#: Steps per config (state noise or not): dt = SDE_T1 / steps a power of two, exact in float32
#: and float64.  torchsde's reversible adjoint retraces the forward's time grid exactly only
#: then: at dt = 0.05 its float64 gradient is 6.4e-3 off the same scheme written out (a real
#: bug, configs_bugs.py and demos/torchsde_adjoint_inexact_dt.py); at 1/32 it is 1.8e-15.
SDE_STEPS = {True: 32, False: 16}
SDE_TIMES = (0.0, 0.25, SDE_T1)
SDE_ENTROPY = 7


class _SDE(torch.nn.Module):
    """dY = theta (1/2 - Y) dt + sigma g(Y) o dW, Stratonovich, diagonal noise; g = sin or 1."""

    noise_type = "diagonal"
    sde_type = "stratonovich"

    def __init__(self, theta: torch.Tensor, sigma: torch.Tensor, state_noise: bool) -> None:
        super().__init__()
        self.theta, self.sigma, self.state_noise = theta, sigma, state_noise

    def f(self, _t: Any, y: torch.Tensor) -> torch.Tensor:
        return self.theta * (0.5 - y)

    def g(self, _t: Any, y: torch.Tensor) -> torch.Tensor:
        return self.sigma * torch.sin(y) if self.state_noise else self.sigma.expand_as(y)


def _brownian(y0: torch.Tensor) -> Any:
    import torchsde

    return torchsde.BrownianInterval(t0=0.0, t1=SDE_T1, size=y0.shape, dtype=y0.dtype,
                                     entropy=SDE_ENTROPY)


def _sde(state_noise: bool, steps: int) -> Made:
    import torchsde

    def fn(theta: torch.Tensor, sigma: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
        ts = torch.tensor(SDE_TIMES, dtype=y0.dtype)
        return torchsde.sdeint_adjoint(_SDE(theta, sigma, state_noise), y0, ts,
                                       bm=_brownian(y0), method="reversible_heun",
                                       adjoint_method="adjoint_reversible_heun",
                                       dt=SDE_T1 / steps, adjoint_params=(theta, sigma))

    if state_noise:
        theta = torch.tensor([0.8, 1.5], dtype=F64, requires_grad=True)
        sigma = torch.tensor([0.3, 0.6], dtype=F64, requires_grad=True)
        return fn, [theta, sigma, _randn(3, 2, seed=4)], {}
    theta = torch.tensor([1.1], dtype=F64, requires_grad=True)
    sigma = torch.tensor([0.4], dtype=F64, requires_grad=True)
    return fn, [theta, sigma, _randn(4, 1, seed=5)], {}


def _reversible_heun(state_noise: bool, steps: int) -> Any:
    """The reversible Heun scheme (Kidger et al. 2021) in plain autograd, stepping and
    interpolating at the output times as torchsde's fixed-step integrator does."""

    def ref(theta: torch.Tensor, sigma: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
        sde, bm = _SDE(theta, sigma, state_noise), _brownian(y0)
        ts = torch.tensor(SDE_TIMES, dtype=y0.dtype)
        dt = SDE_T1 / steps
        t, y, z = ts[0], y0, y0
        f, g = sde.f(t, z), sde.g(t, z)
        ys = [y0]
        for out_t in ts[1:]:
            while t < out_t:
                t_prev, y_prev = t, y
                t_next = torch.minimum(t + dt, ts[-1])
                dw = bm(t, t_next)
                z = 2 * y - z + f * (t_next - t) + g * dw
                f1, g1 = sde.f(t_next, z), sde.g(t_next, z)
                y = y + (f + f1) * (0.5 * (t_next - t)) + (g + g1) * (0.5 * dw)
                f, g, t = f1, g1, t_next
            ys.append((t - out_t) / (t - t_prev) * y_prev + (out_t - t_prev) / (t - t_prev) * y)
        return torch.stack(ys)

    return ref


# ---- POT: MatrixSqrtFunction (closed-form VJP) and ValFunction (set_gradients) -------------

def ref_sqrtm(a: torch.Tensor) -> torch.Tensor:
    """The SPD square root of (A + A^T)/2 by an eigendecomposition."""
    lam, v = torch.linalg.eigh(0.5 * (a + a.mT))
    return (v * lam.sqrt().unsqueeze(-2)) @ v.mT


def _pot_sqrtm_function() -> Made:
    from ot.backend import TorchBackend

    return TorchBackend().MatrixSqrtFunction, [_spd((2,), 4, seed=6)], {}


def _pot_sqrtm_method() -> Made:
    from ot.backend import TorchBackend

    return TorchBackend().sqrtm, [_spd((1,), 3, seed=7)], {}


OT_A = (0.2, 0.5, 0.3)
OT_B = (0.1, 0.4, 0.25, 0.25)


def _marginals() -> list[torch.Tensor]:
    return [torch.tensor(OT_A, dtype=F64), torch.tensor(OT_B, dtype=F64)]


def _lp_plan(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The optimal plan of min <P, M> s.t. P 1 = a, P^T 1 = b, P >= 0, by scipy's HiGHS
    (independent of POT), as a constant.  The costs are scaled to a largest magnitude of 1 (the
    plan does not change): HiGHS's absolute tolerances would take costs of 1e-12 for ties."""
    import numpy as np
    from scipy.optimize import linprog

    n, k = m.shape
    eq = np.vstack([np.kron(np.eye(n), np.ones((1, k))), np.kron(np.ones((1, n)), np.eye(k))])
    rhs = np.concatenate([a.detach().double().numpy(), b.detach().double().numpy()])
    cost = m.detach().double().numpy().ravel()
    res = linprog(cost / max(abs(cost).max(), 1e-300), A_eq=eq, b_eq=rhs, bounds=(0, None),
                  method="highs")
    return torch.from_numpy(res.x.reshape(n, k)).to(m.dtype)


def _pot_emd2() -> Made:
    import ot

    def fn(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return ot.emd2(a, b, m)

    return fn, [*_marginals(), torch.rand(3, 4, dtype=F64, generator=_gen(8)).requires_grad_()], {}


def ref_emd2(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """<P*, M> with P* the LP's optimal plan held constant (Danskin: d/dM = P*)."""
    return (_lp_plan(a, b, m) * m).sum()


SINKHORN_REG = 0.5


def _pot_sinkhorn_envelope() -> Made:
    import ot

    def fn(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        tol = _tol(m.dtype, 1e-13, 1e-7)
        return ot.solve(m, a, b, reg=SINKHORN_REG, grad="envelope", tol=tol,
                        max_iter=5000).value

    return fn, [*_marginals(), torch.rand(3, 4, dtype=F64, generator=_gen(9)).requires_grad_()], {}


def ref_sinkhorn(a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """<P, M> + reg KL(P | a b^T) with P from log-domain Sinkhorn unrolled 300 iterations."""
    u, v = torch.zeros_like(a), torch.zeros_like(b)
    for _ in range(300):
        v = b.log() - torch.logsumexp(-m / SINKHORN_REG + u[:, None], 0)
        u = a.log() - torch.logsumexp(-m / SINKHORN_REG + v[None, :], 1)
    plan = torch.exp(-m / SINKHORN_REG + u[:, None] + v[None, :])
    ab = a[:, None] * b[None, :]
    return (m * plan).sum() + SINKHORN_REG * (plan * (plan / ab).log() - plan + ab).sum()


# ---- roma: _ProcrustesManualDerivatives (SVD) and _HornEigenvectorManualDerivatives --------

def _procrustes(m: torch.Tensor, special: bool) -> torch.Tensor:
    u, _, vh = torch.linalg.svd(m)
    if special:  # flip the last singular vector where det(U V^T) = -1
        d = torch.det(u @ vh)
        flip = torch.cat([torch.ones_like(u[..., 0, :-1]), d[..., None]], -1)
        u = u * flip[..., None, :]
    return u @ vh


def ref_rotation(m: torch.Tensor, *_: Any) -> torch.Tensor:
    """The nearest rotation: U diag(1, .., det(U V^T)) V^T from the SVD."""
    return _procrustes(m, True)


def ref_orthonormal(m: torch.Tensor) -> torch.Tensor:
    """The nearest orthonormal matrix: U V^T from the SVD."""
    return _procrustes(m, False)


def _roma_special_procrustes() -> Made:
    import roma

    def fn(m: torch.Tensor, method: str) -> torch.Tensor:
        return roma.special_procrustes(m, method=method)

    return fn, [_randn(2, 3, 3, seed=10), "horn"], {}


def _roma_procrustes_svd() -> Made:
    import roma

    return roma.procrustes, [_randn(2, 2, 4, 4, seed=11)], {}


def _roma_unitquat_outer() -> Made:
    import roma

    def fn(m: torch.Tensor) -> torch.Tensor:
        q = roma.special_procrustes_unitquat(m)
        return q[..., :, None] * q[..., None, :]

    return fn, [_randn(3, 3, seed=13)], {}


def ref_unitquat_outer(m: torch.Tensor) -> torch.Tensor:
    """q q^T (XYZW) of the nearest rotation R: each product is linear in R's entries."""
    r = ref_rotation(m)
    tr = r[0, 0] + r[1, 1] + r[2, 2]
    xx, yy, zz = ((1 + 2 * r[i, i] - tr) / 4 for i in range(3))
    ww = (1 + tr) / 4
    xy, xz, yz = (r[0, 1] + r[1, 0]) / 4, (r[0, 2] + r[2, 0]) / 4, (r[1, 2] + r[2, 1]) / 4
    xw, yw, zw = (r[2, 1] - r[1, 2]) / 4, (r[0, 2] - r[2, 0]) / 4, (r[1, 0] - r[0, 1]) / 4
    rows = [[xx, xy, xz, xw], [xy, yy, yz, yw], [xz, yz, zz, zw], [xw, yw, zw, ww]]
    return torch.stack([torch.stack(row) for row in rows])


def _pot_bures() -> Made:
    import ot

    return ot.gaussian.bures_distance, [_spd((2,), 3, seed=26), _spd((3,), 3, seed=27)], {}


def ref_bures(cs: torch.Tensor, ct: torch.Tensor) -> torch.Tensor:
    """Bures distance of every pair: sqrt(tr(Cs + Ct - 2 (Cs^1/2 Ct Cs^1/2)^1/2)), (n, m)."""
    cs12 = ref_sqrtm(cs)
    inner = ref_sqrtm(cs12[:, None] @ ct[None] @ cs12[:, None])
    bw2 = (cs[:, None] + ct[None] - 2 * inner).diagonal(dim1=-2, dim2=-1).sum(-1)
    return bw2.clamp_min(0).sqrt()


def _roma_symmatrixvec() -> Made:
    import roma

    def fn(x: torch.Tensor) -> torch.Tensor:
        q = roma.symmatrixvec_to_unitquat(x)
        return q[..., :, None] * q[..., None, :]

    return fn, [_randn(2, 3, 10, seed=28)], {}


def ref_symmatrixvec_outer(x: torch.Tensor) -> torch.Tensor:
    """v v^T for v the eigenvector of the smallest eigenvalue of the symmetric 4x4 matrix whose
    lower triangle, column by column, is x (x00, x10, x20, x30, x11, x21, ...)."""
    entries: dict[tuple[int, int], torch.Tensor] = {}
    k = 0
    for col in range(4):
        for row in range(col, 4):
            entries[row, col] = entries[col, row] = x[..., k]
            k += 1
    a = torch.stack([torch.stack([entries[r, c] for c in range(4)], -1) for r in range(4)], -2)
    v = torch.linalg.eigh(a)[1][..., 0]
    return v[..., :, None] * v[..., None, :]


# ---- torchinterp1d: Interp1d (a backward through a graph kept from forward) ----------------

def ref_interp1d(x: torch.Tensor, y: torch.Tensor, xnew: torch.Tensor) -> torch.Tensor:
    """Linear interpolation, the end segments extrapolated; a 1-D x or y is shared by every row
    (the segment index is chosen without gradient)."""
    x2, y2, xn = (v if v.dim() == 2 else v[None] for v in (x, y, xnew))
    d = max(x2.shape[0], y2.shape[0], xn.shape[0])
    x2, y2, xn = (v.expand(d, -1) for v in (x2, y2, xn))
    i = torch.searchsorted(x2.detach().contiguous(), xn.detach().contiguous()) - 1
    i = i.clamp(0, x2.shape[1] - 2)
    x0, x1 = x2.gather(1, i), x2.gather(1, i + 1)
    y0, y1 = y2.gather(1, i), y2.gather(1, i + 1)
    return y0 + (y1 - y0) / (x1 - x0) * (xn - x0)


def _knots(d: int, n: int, seed: int) -> torch.Tensor:
    return (0.2 + torch.rand(d, n, dtype=F64, generator=_gen(seed))).cumsum(1) - 1.0


def _interp_values() -> Made:
    from torchinterp1d import interp1d

    xnew = torch.rand(3, 8, dtype=F64, generator=_gen(15)) * 5.0 - 1.5
    return interp1d, [_knots(3, 6, seed=14), _randn(3, 6, seed=16), xnew], {}


# ---- kornia: _TargetLogSoftmax (focal loss's CPU path) and _NullSpaceBasis (5-point) -------

def _kornia_target_log_softmax() -> Made:
    from kornia.losses.focal import _TargetLogSoftmax

    target = torch.randint(0, 5, (2, 1, 3, 4), generator=_gen(20))
    return _TargetLogSoftmax, [_randn(2, 5, 3, 4, seed=21), target, None], {}


def ref_target_log_softmax(pred: torch.Tensor, t: torch.Tensor,
                           valid: torch.Tensor | None) -> torch.Tensor:
    """log_softmax over the classes (dim 1) at the target class; ignored pixels' logits 0."""
    x = pred if valid is None else torch.where(valid, pred, 0.0)
    return x.log_softmax(1).gather(1, t)


def _kornia_target_log_softmax_masked() -> Made:
    from kornia.losses.focal import _TargetLogSoftmax

    target = torch.randint(0, 4, (3, 1, 1, 5), generator=_gen(22))
    valid = torch.rand(3, 1, 1, 5, generator=_gen(23)) > 0.3
    return _TargetLogSoftmax, [_randn(3, 4, 1, 5, seed=24), target, valid], {}


def _kornia_null_space() -> Made:
    from kornia.geometry.epipolar.essential import _NullSpaceBasis

    def fn(x: torch.Tensor) -> torch.Tensor:
        v = _NullSpaceBasis.apply(x)[0]
        return v @ v.mT

    return fn, [_randn(2, 5, 9, seed=25)], {}


def ref_null_space_projector(x: torch.Tensor) -> torch.Tensor:
    """The projector onto the 4 smallest right singular vectors of X (B, N, 9), N >= 5:
    I - V5 V5^T with V5 the 5 largest, from the reduced SVD (which has them all)."""
    if x.shape[-1] != 9 or x.shape[-2] < 5:
        raise ValueError("the subspace is unique for (B, N>=5, 9) only")
    v5 = torch.linalg.svd(x, full_matrices=False)[2][..., :5, :]
    return torch.eye(9, dtype=x.dtype) - v5.mT @ v5


CONFIGS: list[Config] = [
    Config("torchdiffeq:odeint_adjoint:linear,dopri5,2x3", TORCHDIFFEQ, _ode_linear,
           ref_ode_linear, "adjoint ODE solve of y' = y A^T at 3 times, grads for A (adjoint_"
           "params) and a batch of y0; reference: matrix_exp"),
    Config("torchdiffeq:odeint_adjoint:logistic,rk4,r(1)", TORCHDIFFEQ, _ode_logistic_rk4,
           ref_ode_logistic, "fixed-grid rk4 adjoint of the logistic ODE, size-1 rate r; "
           "reference: the same RK4 scheme written out"),
    Config("torchdiffeq:odeint_adjoint:rotation,final,sum", TORCHDIFFEQ, _ode_rotation_final,
           ref_ode_rotation, "final state only of a rotation ODE, (1,1) parameter, reduced over "
           "the batch; reference: closed form"),
    Config("torchsde:sdeint_adjoint:revheun,sin-noise,3x2", TORCHSDE,
           lambda: _sde(True, SDE_STEPS[True]), _reversible_heun(True, SDE_STEPS[True]),
           "adjoint SDE (reversible Heun, exact for its discretisation), state-dependent "
           "diagonal noise, per-channel parameters, fixed Brownian path"),
    Config("torchsde:sdeint_adjoint:revheun,additive,4x1", TORCHSDE,
           lambda: _sde(False, SDE_STEPS[False]), _reversible_heun(False, SDE_STEPS[False]),
           "adjoint SDE (reversible Heun) of an Ornstein-Uhlenbeck process, size-1 parameters"),
    Config("POT:MatrixSqrtFunction:2x4x4", POT, _pot_sqrtm_function, ref_sqrtm,
           "SPD matrix square root with a closed-form (Sylvester) VJP, once_differentiable"),
    Config("POT:TorchBackend.sqrtm:1x3x3", POT, _pot_sqrtm_method, ref_sqrtm,
           "the same through the backend method, size-1 batch dim"),
    Config("POT:bures_distance:2x3x3,3x3x3", POT, _pot_bures, ref_bures,
           "Bures distances of every pair (2, 3): MatrixSqrtFunction twice, on 3-D and 4-D "
           "batches, inside a composite; reference: eigh square roots"),
    Config("roma:special_procrustes:horn,2x3x3", ROMA, _roma_special_procrustes, ref_rotation,
           "nearest rotation by Horn's closed-form eigenvector Function (damped derivative), "
           "method='horn' a non-tensor argument; reference: SVD"),
    Config("roma:special_procrustes_unitquat:qq^T,3x3", ROMA, _roma_unitquat_outer,
           ref_unitquat_outer, "Horn quaternion (arbitrary sign) seen through q q^T, no batch "
           "dim"),
    Config("roma:symmatrixvec_to_unitquat:qq^T,2x3x10", ROMA, _roma_symmatrixvec,
           ref_symmatrixvec_outer, "bottom eigenvector of a symmetric 4x4 from its 10 entries "
           "(Horn's closed form, damped derivative), seen through q q^T, two batch dims; "
           "reference: eigh"),
    Config("kornia:_TargetLogSoftmax:2x5x3x4", KORNIA, _kornia_target_log_softmax,
           ref_target_log_softmax, "focal loss's chunked in-place CPU log-softmax at the "
           "target; claims double backward; int64 target and None as args"),
    Config("kornia:_TargetLogSoftmax:masked,3x4x1x5", KORNIA, _kornia_target_log_softmax_masked,
           ref_target_log_softmax, "the same with an ignore mask (zero gradient there), a "
           "size-1 spatial dim"),
]

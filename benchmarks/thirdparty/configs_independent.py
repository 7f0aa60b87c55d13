"""Third-party custom autograd.Functions, picked and referenced independently of gradlab.

Each entry of CONFIGS has:
  name      package:function:shape
  package   pip name==version (installed by benchmarks/thirdparty/install.sh)
  make()    -> (fn, args, kwargs_for_gradlab_check); fn calls the package's Function (its .apply
            or the public wrapper that calls it), args are float64 example inputs (floating
            tensors require grad; integer targets stay int64 without), kwargs are extra
            keyword args for gradlab.check (only second_order=False, where noted; no tolerances)
  reference plain-autograd function with fn's signature, written here from the math (not from
            the package's code), differentiable with ordinary torch ops
  why       one line: what the Function computes (why the math is right)
  measured  errors measured without gradlab (torch.autograd.gradcheck in float64, and the max abs
            difference between the Function's and the reference's gradients for a random
            grad_output, in float64 and float32); see check_independent() at the bottom, which
            `python3 benchmarks/thirdparty/configs_independent.py` runs.

The third-party code is imported from $GRADLAB_THIRDPARTY (default ~/.cache/gradlab-thirdparty).
Two import-time shims, only when the module is missing (neither is used by the code paths here):
  * qpth 0.0.18 does `import cvxpy` at import time for its optional CVXPY solver; the batched
    PDIPM solver used here is pure torch, so an empty stand-in module is registered.
  * pytorch_wavelets 1.3.0 does `from pkg_resources import resource_stream` (DTCWT coefficient
    files), and setuptools >= 81 no longer ships pkg_resources; a small stand-in based on
    importlib.resources is registered.

Left out as buggy (standalone demonstrations without gradlab in demos/):
  * qpth QPFunction with a parameter shared across the batch (2-d Q/G/A or 1-d h/b next to batched
    ones): its gradient is the batch MEAN instead of the sum (factor nBatch): the configs here
    pass every parameter with the same batching (demos/qpth_shared_parameter_grad_is_mean.py).
  * pytorch_wavelets AFB1D/AFB2D in modes symmetric/reflect/periodic (and periodization on odd
    lengths): backward is the inverse transform, not the adjoint; SFB1D/SFB2D (the inverse DWT)
    return no high-pass gradient when the low-pass input does not require grad
    (demos/pytorch_wavelets_backward_bugs.py). Only zero mode and even periodization are here.
  * torch_struct _SimplexProject (SparseMaxSemiring): forward returns <x,w*> - ||w*|| while
    backward is the gradient of <x,w*> - 1/2||w*||^2 (demos/torch_struct_simplex_project_forward.py).
  * entmax second order: entmax15 / entmax_bisect double backward is NaN wherever an output is 0,
    the losses' backward is not differentiable (demos/entmax_second_order.py); those configs are
    kept for first order with second_order=False.
Not used: pypose 0.9.5 Lie-group Functions (SO3_Log, so3_Exp, SO3_Mul, SE3_Act, ...) return
gradients in the tangent space of the group (left-Jacobian convention, a zero for the quaternion's
w entry), by design not the Euclidean gradient of the raw tensor that finite differences measure.

Values are drawn away from kinks and ties: the sparse maps (sparsemax / entmax) get well
separated logits (distinct, gaps >= 0.1 between sorted entries, support boundaries away from the
threshold), the QPs have strictly complementary active sets (active multipliers well above 0,
inactive slacks well above 0).
"""
from __future__ import annotations

import dataclasses
import importlib
import itertools
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

_TP = os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty"))


def _setup_path() -> None:
    if _TP not in sys.path:
        sys.path.insert(0, _TP)
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        shim = types.ModuleType("pkg_resources")

        def resource_stream(pkg, name):
            import importlib.resources as r
            return r.files(pkg).joinpath(name).open("rb")

        shim.resource_stream = resource_stream
        sys.modules["pkg_resources"] = shim
    try:
        import cvxpy  # noqa: F401
    except ImportError:
        sys.modules["cvxpy"] = types.ModuleType("cvxpy")


def _imp(name):
    _setup_path()
    return importlib.import_module(name)


@dataclasses.dataclass
class Config:
    name: str
    package: str
    make: Callable[[], tuple[Callable, tuple, dict[str, Any]]]
    reference: Callable
    why: str
    measured: str = ""
    # importing this file imports torch only; make() and the references import the packages


F64 = torch.float64


def _separated(shape, seed, spread=0.35, dim=-1):
    """Random logits whose entries along `dim` are distinct with gaps >= 0.1 (no ties)."""
    g = torch.Generator().manual_seed(seed)
    d = shape[dim]
    base = torch.arange(d, dtype=F64) * spread
    other = list(shape)
    other[dim] = 1
    # a random permutation of evenly spaced values along dim, plus jitter < gap/4, plus an offset
    n_other = 1
    for s in other:
        n_other *= s
    rows = []
    for _ in range(n_other):
        perm = torch.randperm(d, generator=g)
        rows.append(base[perm] + (torch.rand(d, generator=g, dtype=F64) - 0.5) * spread * 0.4)
    x = torch.stack(rows)  # (n_other, d)
    x = x + torch.randn(n_other, 1, generator=g, dtype=F64)
    moved = list(other)
    moved.pop(dim if dim >= 0 else len(shape) + dim)
    x = x.reshape(*moved, d)
    return x.movedim(-1, dim).contiguous()


# ----------------------------------------------------------------------------------------------
# references: sparse maps onto the simplex
# ----------------------------------------------------------------------------------------------

def ref_sparsemax(x, dim=-1):
    """Euclidean projection of x onto the probability simplex along dim.

    p = max(x - tau, 0) with tau = (sum of the k largest - 1) / k, k = #{j : 1 + j*z_(j) > sum_{i<=j} z_(i)}
    (Martins & Astudillo 2016, Prop. 1). The support size k is piecewise constant (chosen
    without gradient); tau is then an ordinary differentiable expression of the sorted values.
    """
    z = x.movedim(dim, -1)
    zs, _ = torch.sort(z, dim=-1, descending=True)
    css = zs.cumsum(-1)
    j = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    with torch.no_grad():
        k = ((1 + j * zs) > css).sum(-1, keepdim=True)
    tau = (css.gather(-1, k - 1) - 1) / k.to(z.dtype)
    return torch.clamp(z - tau, min=0).movedim(-1, dim)


def ref_entmax15(x, dim=-1):
    """1.5-entmax: p_i = max(x_i/2 - tau, 0)^2 with sum p = 1 (Peters et al. 2019).

    With z = x/2 and support S of size k: sum_S (z_i - tau)^2 = 1 gives the root
    tau = m - sqrt((1 - (s2 - k m^2)) / k), m = mean_S z, s2 = sum_S z^2. S is the largest prefix
    of sorted z with tau_k <= z_(k); chosen without gradient, tau is then differentiable.
    """
    z = x.movedim(dim, -1) / 2
    zs, _ = torch.sort(z, dim=-1, descending=True)
    d = z.shape[-1]
    j = torch.arange(1, d + 1, dtype=z.dtype)
    with torch.no_grad():
        m = zs.cumsum(-1) / j
        s2 = (zs ** 2).cumsum(-1)
        tau_all = m - torch.sqrt(torch.clamp((1 - (s2 - j * m ** 2)) / j, min=0))
        k = (tau_all <= zs).sum(-1, keepdim=True)
    kf = k.to(z.dtype)
    S1 = zs.cumsum(-1).gather(-1, k - 1)
    S2 = (zs ** 2).cumsum(-1).gather(-1, k - 1)
    mean = S1 / kf
    tau = mean - torch.sqrt((1 - (S2 - kf * mean ** 2)) / kf)
    return (torch.clamp(z - tau, min=0) ** 2).movedim(-1, dim)


def _entmax_tau_bisect(xs, alpha, iters=200):
    """Threshold tau with sum_i max(xs_i - tau, 0)^(1/(alpha-1)) = 1, xs = (alpha-1) x (no grad)."""
    with torch.no_grad():
        mx = xs.max(-1, keepdim=True).values
        lo, hi = mx - 1.0, mx  # f(lo) >= 1 (the max alone gives 1), f(hi) = 0
        for _ in range(iters):
            mid = (lo + hi) / 2
            f = torch.clamp(xs - mid, min=0).pow(1 / (alpha - 1)).sum(-1, keepdim=True)
            lo = torch.where(f >= 1, mid, lo)
            hi = torch.where(f >= 1, hi, mid)
        return (lo + hi) / 2


def ref_entmax_bisect(x, alpha):
    """alpha-entmax along the last dim, alpha a tensor broadcastable to x[..., :1].

    p_i = max((alpha-1) x_i - tau, 0)^(1/(alpha-1)), tau such that sum p = 1 (Peters et al.).
    tau* is found by bisection without gradient; one Newton step tau = tau* - F/dF_dtau with
    F(tau, x, alpha) = sum p - 1 evaluated differentiably at tau* and dF_dtau detached gives
    exactly the implicit-function derivative dtau = -(dF/dx dx + dF/dalpha dalpha)/dF_dtau
    (first order only: the reference's second derivatives are not those of the map).
    """
    alpha = alpha.expand(*x.shape[:-1], 1)
    xs = (alpha - 1) * x
    tau0 = _entmax_tau_bisect(xs.detach(), alpha.detach())
    supp = (xs.detach() - tau0) > 0

    def F(tau):
        u = torch.where(supp, xs - tau, torch.ones_like(xs))
        return torch.where(supp, u.pow(1 / (alpha - 1)), torch.zeros_like(xs)).sum(-1, keepdim=True) - 1

    with torch.no_grad():
        u = torch.where(supp, xs - tau0, torch.ones_like(xs))
        dF = -(torch.where(supp, u.pow(1 / (alpha - 1) - 1), torch.zeros_like(xs)) / (alpha - 1)).sum(-1, keepdim=True)
    tau = tau0 - F(tau0) / dF
    u = torch.where(supp, xs - tau, torch.ones_like(xs))
    return torch.where(supp, u.pow(1 / (alpha - 1)), torch.zeros_like(xs))


def ref_sparsemax_loss(x, target):
    """Sparsemax loss (Martins & Astudillo 2016): L = <p, x> - x_y + (1 - ||p||^2)/2, p = sparsemax(x)."""
    p = ref_sparsemax(x, -1)
    xy = x.gather(1, target.unsqueeze(1)).squeeze(1)
    return (p * x).sum(1) - xy + (1 - (p ** 2).sum(1)) / 2


def ref_entmax15_loss(x, target):
    """1.5-entmax loss (Fenchel-Young): L = <p, x> - x_y + (1 - sum p^1.5)/0.75, p = entmax15(x)."""
    p = ref_entmax15(x, -1)
    xy = x.gather(1, target.unsqueeze(1)).squeeze(1)
    return (p * x).sum(1) - xy + (1 - (p * torch.sqrt(p)).sum(1)) / 0.75


# ----------------------------------------------------------------------------------------------
# entmax==1.3
# ----------------------------------------------------------------------------------------------

ENTMAX = "entmax==1.3"


def _mk_entmax_sparsemax_4x6():
    em = _imp("entmax")
    x = _separated((4, 6), 61, spread=0.25)  # margin to the support boundary 0.11
    return (lambda x: em.sparsemax(x, -1)), (x,), {}


def _mk_entmax_sparsemax_k():
    em = _imp("entmax")
    # dim=1 of a (2, 9, 3) tensor, k=2 partial sort: supports larger than 2 force the 2k re-solve
    x = _separated((2, 9, 3), 34, spread=0.2, dim=1)  # supports of 3 > k=2, margin 0.087
    return (lambda x: em.sparsemax(x, 1, 2)), (x,), {}


def _mk_entmax15_dim1():
    em = _imp("entmax")
    x = _separated((2, 5, 3), 43, spread=0.5, dim=1)  # supports of 4, margin 0.073
    # second order off: the Function's double backward is NaN wherever an output is 0
    # (d sqrt(Y)/dY at Y = 0; demos/entmax_second_order.py); first order is right
    return (lambda x: em.entmax15(x, 1)), (x,), {"second_order": False}


def _mk_entmax15_size1():
    em = _imp("entmax")
    # size-1 leading dim, dim=-1, k=3 (partial sort, re-solve when the support exceeds 3)
    x = _separated((1, 8), 37, spread=0.2)  # support 7 > k=3, margin 0.081
    # second order off: NaN double backward (one output is 0), see demos/entmax_second_order.py
    return (lambda x: em.entmax15(x, -1, 3)), (x,), {"second_order": False}


def _mk_entmax_bisect_alpha():
    em = _imp("entmax")
    x = _separated((3, 5), 54, spread=0.4)  # supports 5, 4, 2; margin 0.128
    alpha = torch.tensor([[1.3], [1.6], [2.2]], dtype=F64)
    # alpha varies per row and is differentiated too (Correia et al. 2019 alpha gradient);
    # second order off: the reference's tau is first-order exact only, and the Function's double
    # backward is NaN where an output is 0 (demos/entmax_second_order.py); alpha is kept on ctx
    return (lambda x, a: em.entmax_bisect(x, a, -1, 60, True)), (x, alpha), {"second_order": False}


def _mk_sparsemax_loss():
    em = _imp("entmax")
    x = _separated((4, 5), 26, spread=0.25)  # supports of 3, margin 0.094
    t = torch.tensor([0, 3, 4, 1])
    # second order off: the Function's backward returns grad * p_star with p_star an intermediate
    # saved without a graph, so it is not twice differentiable (the loss's Hessian dp/dx is
    # dropped; demos/entmax_second_order.py)
    return (lambda x, t: em.sparsemax_loss(x, t)), (x, t), {"second_order": False}


def _mk_entmax15_loss():
    em = _imp("entmax")
    x = _separated((3, 6), 59, spread=0.5)  # supports of 4, margin 0.138
    t = torch.tensor([5, 0, 2])
    return (lambda x, t: em.entmax15_loss(x, t)), (x, t), {"second_order": False}


# ----------------------------------------------------------------------------------------------
# sparsemax==0.1.9
# ----------------------------------------------------------------------------------------------

SPARSEMAX = "sparsemax==0.1.9"


def _mk_sparsemax_pkg_3d():
    sm = _imp("sparsemax")
    x = _separated((2, 3, 5), 5, spread=0.25, dim=1)  # supports of 3, margin 0.072
    # dim=1 of a 3-d input: the package flattens all but dim, then unflattens
    return (lambda x: sm.sparsemax.SparsemaxFunction.apply(x, 1)), (x,), {}


def _mk_sparsemax_pkg_2d():
    sm = _imp("sparsemax")
    x = _separated((6, 4), 3, spread=0.25)  # supports of 3, margin 0.101
    return (lambda x: sm.sparsemax.SparsemaxFunction.apply(x, -1)), (x,), {}


# ----------------------------------------------------------------------------------------------
# qpth==0.0.18 : z* = argmin 1/2 z'Qz + p'z  s.t. Gz <= h, Az = b  (batched primal-dual IPM)
# ----------------------------------------------------------------------------------------------

QPTH = "qpth==0.0.18"


def _spd(L):
    n = L.shape[-1]
    return L @ L.mT + 0.5 * torch.eye(n, dtype=L.dtype)


def ref_qp(L, p, G, h, A, b):
    """Exact QP solution by active-set enumeration, then a differentiable KKT solve.

    Q = L L^T + I/2 (symmetric: a free L keeps the finite differences inside the symmetric
    matrices the solver assumes). For each subset S of the inequalities (chosen without
    gradient) solve [[Q, G_S^T, A^T], [G_S, 0, 0], [A, 0, 0]] [z; lam_S; nu] = [-p; h_S; b] and
    keep the one with G z <= h and lam_S >= 0; the KKT solve is then plain differentiable
    torch.linalg.solve, so the gradient is the implicit derivative on that active set.
    """
    Q = _spd(L)
    batched = Q.dim() == 3
    if not batched:
        Q, p, G, h, A, b = (t.unsqueeze(0) for t in (Q, p, G, h, A, b))
    nB, nz = p.shape
    nineq, neq = G.shape[-2], A.shape[-2]
    G, h, A, b = (t.expand(nB, *t.shape[1:]) for t in (G, h, A, b))
    Q = Q.expand(nB, nz, nz)
    out = []
    for i in range(nB):
        chosen = None
        for r in range(nineq + 1):
            for S in itertools.combinations(range(nineq), r):
                z, lam = _kkt(Q[i].detach(), p[i].detach(), G[i].detach(), h[i].detach(),
                              A[i].detach(), b[i].detach(), list(S))
                if (G[i].detach() @ z <= h[i].detach() + 1e-5).all() and (lam >= -1e-5).all():
                    chosen = list(S)
                    break
            if chosen is not None:
                break
        assert chosen is not None
        z, _ = _kkt(Q[i], p[i], G[i], h[i], A[i], b[i], chosen)
        out.append(z)
    z = torch.stack(out)
    return z if batched else z  # qpth returns (nBatch, nz) even for unbatched inputs


def _kkt(Q, p, G, h, A, b, S):
    nz = p.shape[0]
    GS, hS = G[S], h[S]
    C = torch.cat([GS, A], 0)
    d = torch.cat([hS, b], 0)
    m = C.shape[0]
    K = torch.cat([torch.cat([Q, C.T], 1), torch.cat([C, torch.zeros(m, m, dtype=Q.dtype)], 1)], 0)
    rhs = torch.cat([-p, d])
    sol = torch.linalg.solve(K, rhs)
    return sol[:nz], sol[nz:nz + len(S)]


def _qp_problem(nB, nz, nineq, neq, seed):
    g = torch.Generator().manual_seed(seed)
    shp = (nB,) if nB else ()
    L = torch.randn(*shp, nz, nz, generator=g, dtype=F64) * 0.5
    p = torch.randn(*shp, nz, generator=g, dtype=F64)
    G = torch.randn(*shp, nineq, nz, generator=g, dtype=F64)
    h = torch.rand(*shp, nineq, generator=g, dtype=F64) * 0.5 + 0.1
    A = torch.randn(*shp, neq, nz, generator=g, dtype=F64)
    b = torch.randn(*shp, neq, generator=g, dtype=F64) * 0.3
    return L, p, G, h, A, b


def _qp_fn():
    qp = _imp("qpth.qp")
    f = qp.QPFunction(verbose=-1, maxIter=40)

    def fn(L, p, G, h, A, b):
        return f(_spd(L), p, G, h, A, b)

    return fn


# second order off for both qpth configs: the backward is not twice differentiable (double
# backward raises "modified by an inplace operation" inside pdipm's KKT factorization)
def _mk_qpth_batched():
    # every parameter batched (nBatch=2, nz=4, 3 inequalities, 1 equality); seed 13: active sets
    # {0, 2} and {0}, active multipliers >= 0.25, inactive slacks >= 0.98 (strictly complementary)
    args = _qp_problem(2, 4, 3, 1, 13)
    return _qp_fn(), args, {"second_order": False}


def _mk_qpth_single():
    # unbatched 2-d/1-d parameters (nBatch inferred as 1), nz=3, 4 inequalities, 1 equality
    # seed 4: active set {0, 3}, multipliers >= 2.7, inactive slacks >= 0.31
    args = _qp_problem(0, 3, 4, 1, 4)
    return _qp_fn(), args, {"second_order": False}


# ----------------------------------------------------------------------------------------------
# pytorch-wavelets==1.3.0 (with PyWavelets==1.8.0): DWT analysis filter banks AFB1D / AFB2D
# ----------------------------------------------------------------------------------------------

WAVELETS = "pytorch-wavelets==1.3.0"


class _PerDtype:
    """Calls a pytorch_wavelets module whose filter buffers match the input's dtype."""

    def __init__(self, build):
        self.build, self.cache = build, {}

    def module(self, dtype):
        if dtype not in self.cache:
            # the modules build their filter buffers in torch's default dtype (float32): built
            # that way, a float64 run would use float32-rounded filters (forward ~1e-7 off the
            # exact DWT), so build them in float64 and cast down
            old = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                mod = self.build()
            finally:
                torch.set_default_dtype(old)
            self.cache[dtype] = mod.to(dtype)
        return self.cache[dtype]


def _dwt_matrix(n, wave, mode):
    """The single-level DWT of length-n signals as matrices (lo, hi), columns = pywt.dwt of e_j.

    PyWavelets is an independent C implementation; the DWT is linear, so x -> x @ M^T is the
    same map in plain autograd.
    """
    pywt = _imp("pywt")
    cols_lo, cols_hi = [], []
    for j in range(n):
        e = [0.0] * n
        e[j] = 1.0
        a, d = pywt.dwt(e, wave, mode=mode)
        cols_lo.append(torch.tensor(a, dtype=F64))
        cols_hi.append(torch.tensor(d, dtype=F64))
    return torch.stack(cols_lo, 1), torch.stack(cols_hi, 1)


def _make_ref_dwt1d(n, J, wave, mode):
    mats = []  # built on first call: importing this file must not import pywt

    def build():
        m = n
        for _ in range(J):
            lo, hi = _dwt_matrix(m, wave, mode)
            mats.append((lo, hi))
            m = lo.shape[0]

    def ref(x):
        if not mats:
            build()
        highs = []
        for lo, hi in mats:
            lo_, hi_ = lo.to(x.dtype), hi.to(x.dtype)
            highs.append(x @ hi_.T)
            x = x @ lo_.T
        return (x, *highs)

    return ref


def _make_ref_dwt2d(H, W, J, wave, mode):
    mats = []  # built on first call: importing this file must not import pywt

    def build():
        h, w = H, W
        for _ in range(J):
            rlo, rhi = _dwt_matrix(h, wave, mode)  # along rows index (dim -2)
            clo, chi = _dwt_matrix(w, wave, mode)  # along columns index (dim -1)
            mats.append((rlo, rhi, clo, chi))
            h, w = rlo.shape[0], clo.shape[0]

    def ref(x):
        if not mats:
            build()
        highs = []
        for rlo, rhi, clo, chi in mats:
            rlo, rhi, clo, chi = (t.to(x.dtype) for t in (rlo, rhi, clo, chi))
            ll = rlo @ x @ clo.T
            lh = rhi @ x @ clo.T  # pywt cH: high-pass along rows (vertical detail)
            hl = rlo @ x @ chi.T  # pywt cV
            hh = rhi @ x @ chi.T  # pywt cD
            highs.append(torch.stack([lh, hl, hh], 2))
            x = ll
        return (x, *highs)

    return ref


def _mk_dwt1d(n, J, wave, mode, shape, seed):
    def make():
        tr = _imp("pytorch_wavelets")
        mods = _PerDtype(lambda: tr.DWT1DForward(J=J, wave=wave, mode=mode))

        def fn(x):
            yl, yh = mods.module(x.dtype)(x)
            return (yl, *yh)

        g = torch.Generator().manual_seed(seed)
        return fn, (torch.randn(*shape, generator=g, dtype=F64),), {}
    return make


def _mk_dwt2d(J, wave, mode, shape, seed):
    def make():
        tr = _imp("pytorch_wavelets")
        mods = _PerDtype(lambda: tr.DWTForward(J=J, wave=wave, mode=mode))

        def fn(x):
            yl, yh = mods.module(x.dtype)(x)
            return (yl, *yh)

        g = torch.Generator().manual_seed(seed)
        return fn, (torch.randn(*shape, generator=g, dtype=F64),), {}
    return make


# ----------------------------------------------------------------------------------------------

def _rg(make):
    """make() with its floating-point tensor args requiring grad (integer targets stay as they are)."""
    def wrapped():
        fn, args, kw = make()
        args = tuple(a.detach().clone().requires_grad_(True) if torch.is_tensor(a) and a.is_floating_point() else a
                     for a in args)
        return fn, args, kw
    wrapped.__name__ = getattr(make, "__name__", "make")
    return wrapped


CONFIGS = [
    Config("entmax:sparsemax:4x6", ENTMAX, _rg(_mk_entmax_sparsemax_4x6), lambda x: ref_sparsemax(x, -1),
           "sparsemax = Euclidean projection onto the simplex along the last dim; Jacobian diag(s) - s s^T/|S| on the support s"),
    Config("entmax:sparsemax:2x9x3,dim=1,k=2", ENTMAX, _rg(_mk_entmax_sparsemax_k), lambda x: ref_sparsemax(x, 1),
           "sparsemax along a middle dim with partial top-k sorting (k=2 < support, forcing the 2k re-solve); same projection"),
    Config("entmax:entmax15:2x5x3,dim=1", ENTMAX, _rg(_mk_entmax15_dim1), lambda x: ref_entmax15(x, 1),
           "1.5-entmax along a middle dim: argmax_p <x,p> + Tsallis-1.5 entropy on the simplex; closed-form threshold on the sorted prefix"),
    Config("entmax:entmax15:1x8,k=3", ENTMAX, _rg(_mk_entmax15_size1), lambda x: ref_entmax15(x, -1),
           "1.5-entmax with a size-1 batch dim and partial sorting k=3; same map"),
    Config("entmax:entmax_bisect:3x5+alpha3x1", ENTMAX, _rg(_mk_entmax_bisect_alpha), ref_entmax_bisect,
           "alpha-entmax by 60 bisection steps, per-row alpha in {1.3, 1.6, 2.2}, gradient in x and alpha (implicit function)"),
    Config("entmax:sparsemax_loss:4x5", ENTMAX, _rg(_mk_sparsemax_loss), ref_sparsemax_loss,
           "sparsemax Fenchel-Young loss per row; gradient in x is sparsemax(x) - onehot(y) (Danskin)"),
    Config("entmax:entmax15_loss:3x6", ENTMAX, _rg(_mk_entmax15_loss), ref_entmax15_loss,
           "1.5-entmax Fenchel-Young loss per row; gradient in x is entmax15(x) - onehot(y)"),
    Config("sparsemax:SparsemaxFunction:2x3x5,dim=1", SPARSEMAX, _rg(_mk_sparsemax_pkg_3d), lambda x: ref_sparsemax(x, 1),
           "sparsemax (other package) along dim 1 of a 3-d tensor: simplex projection, reshaping path"),
    Config("sparsemax:SparsemaxFunction:6x4", SPARSEMAX, _rg(_mk_sparsemax_pkg_2d), lambda x: ref_sparsemax(x, -1),
           "sparsemax (other package) on the last dim of a 2-d tensor"),
    # qpth's two configs moved to configs_bugs.BUGS: its backward clamps the KKT system, so
    # its float64 gradients are ~1e-6 accurate (demos/qpth_backward_clamp.py)
    Config("pytorch_wavelets:DWT1DForward(AFB1D):2x3x16,J=2,db2,zero", WAVELETS,
           _rg(_mk_dwt1d(16, 2, "db2", "zero", (2, 3, 16), 21)), _make_ref_dwt1d(16, 2, "db2", "zero"),
           "2-level 1-d DWT, zero padding: a linear map; backward = its adjoint (transposed filter bank)"),
    Config("pytorch_wavelets:DWT1DForward(AFB1D):1x2x11,J=1,db3,zero", WAVELETS,
           _rg(_mk_dwt1d(11, 1, "db3", "zero", (1, 2, 11), 22)), _make_ref_dwt1d(11, 1, "db3", "zero"),
           "1-level 1-d DWT of an odd-length signal (zero mode pads one sample), db3 filters"),
    Config("pytorch_wavelets:DWTForward(AFB2D):1x2x12x9,J=1,db3,zero", WAVELETS,
           _rg(_mk_dwt2d(1, "db3", "zero", (1, 2, 12, 9), 23)), _make_ref_dwt2d(12, 9, 1, "db3", "zero"),
           "1-level separable 2-d DWT of a non-square odd-width image; outputs LL and the stacked (LH, HL, HH)"),
    Config("pytorch_wavelets:DWTForward(AFB2D):2x1x8x8,J=2,haar,periodization", WAVELETS,
           _rg(_mk_dwt2d(2, "haar", "periodization", (2, 1, 8, 8), 24)), _make_ref_dwt2d(8, 8, 2, "haar", "periodization"),
           "2-level 2-d Haar DWT, periodization (orthogonal: inverse = adjoint), one channel"),
]


# Measured without gradlab (python3 benchmarks/thirdparty/configs_independent.py, 2-core CPU,
# torch 2.13.0+cpu): torch.autograd.gradcheck in float64 (eps 1e-6, tried at atol 1e-5 first,
# rtol 1e-3); max |vJp - central differences| in float64 for one random grad_output; max abs
# difference Function vs reference, forward values and gradients (same random grad_output), in
# float64 and float32. qpth is an interior-point solve (maxIter 40, eps 1e-12) whose backward
# clamps the slacks at 1e-8, so its float64 gradients are only ~1e-7 accurate (relative to
# |grad| <= 3.5), and its float32 gradients ~3e-5 relative on the unbatched problem (multipliers
# up to 2.7 make the KKT system stiffer).
MEASURED = {
    'entmax:sparsemax:4x6': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 2.0e-10; |Function - reference| fwd f64 2.2e-16, grad f64 0.0e+00, fwd f32 6.0e-08, grad f32 0.0e+00",
    'entmax:sparsemax:2x9x3,dim=1,k=2': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 2.5e-10; |Function - reference| fwd f64 3.3e-16, grad f64 0.0e+00, fwd f32 6.0e-08, grad f32 0.0e+00",
    'entmax:entmax15:2x5x3,dim=1': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 5.8e-10; |Function - reference| fwd f64 2.2e-16, grad f64 1.7e-16, fwd f32 1.2e-07, grad f32 1.2e-07",
    'entmax:entmax15:1x8,k=3': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 1.4e-10; |Function - reference| fwd f64 2.2e-18, grad f64 2.8e-17, fwd f32 2.2e-08, grad f32 6.0e-08",
    'entmax:entmax_bisect:3x5+alpha3x1': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 1.9e-10; |Function - reference| fwd f64 1.1e-16, grad f64 4.4e-16, fwd f32 1.2e-07, grad f32 9.5e-07",
    'entmax:sparsemax_loss:4x5': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 3.4e-10; |Function - reference| fwd f64 5.6e-16, grad f64 6.7e-16, fwd f32 3.0e-07, grad f32 2.1e-07",
    'entmax:entmax15_loss:3x6': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 9.9e-10; |Function - reference| fwd f64 2.2e-16, grad f64 4.4e-16, fwd f32 4.8e-07, grad f32 2.4e-07",
    'sparsemax:SparsemaxFunction:2x3x5,dim=1': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 4.3e-10; |Function - reference| fwd f64 1.1e-16, grad f64 0.0e+00, fwd f32 6.0e-08, grad f32 0.0e+00",
    'sparsemax:SparsemaxFunction:6x4': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 4.2e-10; |Function - reference| fwd f64 1.1e-16, grad f64 0.0e+00, fwd f32 6.0e-08, grad f32 0.0e+00",
    'qpth:QPFunction:b2,nz4,ineq3,eq1': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 8.6e-08; |Function - reference| fwd f64 7.9e-15, grad f64 8.5e-08, fwd f32 2.4e-07, grad f32 8.3e-07",
    'qpth:QPFunction:nz3,ineq4,eq1,unbatched': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 4.7e-07; |Function - reference| fwd f64 9.8e-15, grad f64 4.7e-07, fwd f32 3.7e-06, grad f32 8.7e-05",
    'pytorch_wavelets:DWT1DForward(AFB1D):2x3x16,J=2,db2,zero': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 1.8e-09; |Function - reference| fwd f64 2.2e-16, grad f64 4.4e-16, fwd f32 2.4e-07, grad f32 2.4e-07",
    'pytorch_wavelets:DWT1DForward(AFB1D):1x2x11,J=1,db3,zero': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 1.1e-09; |Function - reference| fwd f64 4.4e-16, grad f64 2.2e-16, fwd f32 2.4e-07, grad f32 1.2e-07",
    'pytorch_wavelets:DWTForward(AFB2D):1x2x12x9,J=1,db3,zero': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 5.3e-09; |Function - reference| fwd f64 8.9e-16, grad f64 6.7e-16, fwd f32 2.4e-07, grad f32 2.8e-07",
    'pytorch_wavelets:DWTForward(AFB2D):2x1x8x8,J=2,haar,periodization': "gradcheck(f64) pass@atol=1e-05; |vJp - central fd| f64 1.3e-09; |Function - reference| fwd f64 4.4e-16, grad f64 4.4e-16, fwd f32 2.4e-07, grad f32 2.4e-07",
}
for _c in CONFIGS:
    _c.measured = MEASURED.get(_c.name, "")


# ----------------------------------------------------------------------------------------------
# sanity checks without gradlab
# ----------------------------------------------------------------------------------------------

def _outs(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def _grads(f, args, seed=0):
    args = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    outs = _outs(f(*args))
    g = torch.Generator().manual_seed(seed)
    gos = [torch.randn(o.shape, generator=g, dtype=F64).to(o.dtype) for o in outs]
    diff = [a for a in args if a.requires_grad]
    gr = torch.autograd.grad(outs, diff, gos, allow_unused=True)
    return [o.detach() for o in outs], [torch.zeros_like(a) if x is None else x for a, x in zip(diff, gr)]


def _fd_vjp_error(fn, args, eps=1e-6):
    """max |vJp(Function) - central differences of <grad_output, fn(x)>|, float64."""
    _, gfun = _grads(fn, args)
    outs = _outs(fn(*args))
    g = torch.Generator().manual_seed(0)
    gos = [torch.randn(o.shape, generator=g, dtype=F64) for o in outs]

    def scal(a):
        return sum(float((go * o.detach()).sum()) for go, o in zip(gos, _outs(fn(*a))))

    err, k = 0.0, 0
    for i, x in enumerate(args):
        if not x.is_floating_point():
            continue
        flat = x.detach().reshape(-1)
        num = torch.empty_like(flat)
        for j in range(flat.numel()):
            xp, xm = flat.clone(), flat.clone()
            xp[j] += eps
            xm[j] -= eps
            ap, am = list(args), list(args)
            ap[i], am[i] = xp.reshape(x.shape), xm.reshape(x.shape)
            num[j] = (scal(ap) - scal(am)) / (2 * eps)
        err = max(err, float((num - gfun[k].reshape(-1)).abs().max()))
        k += 1
    return err


def check_independent(configs=CONFIGS, verbose=True):
    rows = []
    for c in configs:
        fn, args, kw = c.make()
        row = {"name": c.name}
        # gradcheck on the Function (float64), at the tolerances torch uses by default first
        diff_idx = [i for i, a in enumerate(args) if a.is_floating_point()]

        def fd(*dargs, _args=args):
            full = list(_args)
            for i, a in zip(diff_idx, dargs):
                full[i] = a
            return fn(*full)

        dargs = tuple(args[i].detach().clone().requires_grad_(True) for i in diff_idx)
        for atol in (1e-5, 1e-4, 1e-3):
            try:
                ok = torch.autograd.gradcheck(fd, dargs, atol=atol, rtol=1e-3, raise_exception=False)
            except Exception as e:  # pragma: no cover
                ok = repr(e)
            if ok is True:
                break
        row["gradcheck"] = ok if ok is not True else f"pass@atol={atol}"
        row["fd64"] = _fd_vjp_error(fn, args)
        for dt in (torch.float64, torch.float32):
            a = tuple(x.to(dt) if x.is_floating_point() else x for x in args)
            yo, go = _grads(fn, a)
            yr, gr = _grads(c.reference, a)
            row[f"fwd_{dt}"] = max(float((u - v).abs().max()) for u, v in zip(yo, yr))
            row[f"grad_{dt}"] = max(float((u - v).abs().max()) for u, v in zip(go, gr))
        rows.append(row)
        if verbose:
            print(f"{c.name:62s} gradcheck {row['gradcheck']:16s} fd64 {row['fd64']:.1e} fwd64 {row['fwd_torch.float64']:.1e} "
                  f"grad64 {row['grad_torch.float64']:.1e} fwd32 {row['fwd_torch.float32']:.1e} "
                  f"grad32 {row['grad_torch.float32']:.1e}", flush=True)
    return rows


if __name__ == "__main__":
    torch.set_num_threads(1)
    only = sys.argv[1:]
    check_independent([c for c in CONFIGS if not only or any(o in c.name for o in only)])

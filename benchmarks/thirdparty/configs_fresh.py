"""Fresh third-party custom autograd.Functions (session s43), never run through gradlab before.

Format: benchmarks/thirdparty/corpus.py (name, package, make, reference, why).  Each make()
imports its package from $GRADLAB_THIRDPARTY (install.sh's, default
~/.cache/gradlab-thirdparty); the references are written here from the math, in plain autograd.
Picked and triaged by a helper who had not read gradlab's checks; the BUGS are shown without
gradlab in demos/fresh/.  Not among run_corpus.py's default files: the helper's CONFIGS are the
Functions it judged correct as called, yet gradlab finds real bugs in some of them (zuko's and
xitorch's backwards crash for a frozen parameter, xitorch's solve_ivp keeps its output on ctx,
its rootfinder does not converge in float32: issue 39's closing note), and three float32 rows
are false alarms of the `small` variant (pyro's safe_log, xitorch's symeig x2).  Run it with
`python benchmarks/thirdparty/run_corpus.py --configs benchmarks/thirdparty/configs_fresh.py`.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_TP = os.environ.get("GRADLAB_THIRDPARTY",
                     str(Path.home() / ".cache" / "gradlab-thirdparty"))
F64 = torch.float64


def _imp(name):
    if _TP not in sys.path:
        sys.path.insert(0, _TP)
    return importlib.import_module(name)


@dataclasses.dataclass
class Config:
    name: str
    package: str
    make: Callable[[], tuple[Callable, tuple, dict[str, Any]]]
    reference: Callable
    why: str
    measured: str = ""
    seen_by: tuple[str, ...] = ()


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _rg(t):
    return t.to(F64).requires_grad_()


def _tol(x):
    """ODE solver tolerance for x's dtype: 1e-12 in float64, 1e-6 in lower precisions."""
    return 1e-12 if x.dtype == torch.float64 else 1e-6


def _rtol(x):
    """root-finder tolerance for x's dtype: 1e-14 in float64, 1e-6 in lower precisions."""
    return 1e-14 if x.dtype == torch.float64 else 1e-6


def _away(x, kinks, gap=0.08):
    """Move values within `gap` of a kink by 2*gap (so FD never straddles one)."""
    x = x.clone()
    for k in kinks:
        x = torch.where((x - k).abs() < gap, x + 2 * gap, x)
    return x


# ---------------------------------------------------------------------------------------------
# timm 1.0.31: memory-efficient activations (timm/layers/activations_me.py).  The module imports
# torch only, but timm/__init__ pulls torchvision in: load the file by path as its own module.
# ---------------------------------------------------------------------------------------------

def _timm_me():
    name = "timm_layers_activations_me"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(_TP) / "timm" / "layers" / "activations_me.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _timm_make(cls, kinks=()):
    def make():
        fn = getattr(_timm_me(), cls)
        x = torch.randn(8, 16, generator=_g(1), dtype=F64) * 3
        x = _away(x, kinks)
        return fn, (x.requires_grad_(),), {}
    return make


def ref_swish(x):
    return x * torch.sigmoid(x)


def ref_mish(x):
    return x * torch.tanh(torch.log1p(torch.exp(x)))


def ref_hard_sigmoid(x):
    return torch.clamp(x + 3, 0, 6) / 6


def ref_hard_swish(x):
    return x * torch.clamp(x + 3, 0, 6) / 6


def ref_hard_mish(x):
    return 0.5 * x * torch.clamp(x + 2, 0, 2)


# ---------------------------------------------------------------------------------------------
# pyro-ppl 1.9.2
# ---------------------------------------------------------------------------------------------

def _pyro_safe_log_make():
    special = _imp("pyro.ops.special")
    x = torch.rand(6, 7, generator=_g(2), dtype=F64) * 3 + 0.05
    return special.safe_log, (x.requires_grad_(),), {}


def ref_log(x):
    return torch.log(x)


def _pyro_ewma_make():
    eig = _imp("pyro.contrib.oed.eig")

    def ewma_log_first_call(x, s):
        # the first call of a fresh EwmaLog: the moving average is the input itself
        return eig.EwmaLog(alpha=0.9)(x, s)

    x = torch.rand(5, 4, generator=_g(3), dtype=F64) * 2 + 0.1
    s = torch.tensor(0.3, dtype=F64)
    return ewma_log_first_call, (x.requires_grad_(), s), {}


def ref_ewma_log(x, s):
    return torch.log(x)


# ---------------------------------------------------------------------------------------------
# zuko 1.6.0: Bisection, GaussLegendre, AdaptiveCheckpointAdjoint (zuko/utils.py)
# ---------------------------------------------------------------------------------------------

def _cbrt(u):
    return torch.sign(u) * u.abs().pow(1.0 / 3.0)


def _cubic_root(y, c):
    """The real root of x^3 + c x - y = 0 for c > 0 (Cardano; one real root)."""
    d = torch.sqrt(y * y / 4 + c ** 3 / 27)
    return _cbrt(y / 2 + d) + _cbrt(y / 2 - d)


def _zuko_bisection_make():
    utils = _imp("zuko.utils")

    def solve(y, w):
        return utils.bisection(lambda x: x ** 3 + torch.exp(w) * x, y, -10.0, 10.0, n=100, phi=(w,))

    y = torch.randn(6, generator=_g(4), dtype=F64) * 4
    w = torch.randn(6, generator=_g(5), dtype=F64) * 0.5
    return solve, (y.requires_grad_(), w.requires_grad_()), {}


def _cubic_root_implicit(y, c):
    """The real root of x^3 + c x = y (c > 0), robust at any scale: the root x0 found without
    gradient (float64 bisection on |x| <= |y|^(1/3) + 1, 300 steps), then one Newton step whose
    derivative is the implicit-function one: dx/dy = 1/(3x^2+c), dx/dc = -x/(3x^2+c) (first order)."""
    with torch.no_grad():
        yd, cd = y.detach().double(), c.detach().double()
        hi = yd.abs().pow(1.0 / 3.0) + 1
        lo = -hi
        for _ in range(300):
            mid = (lo + hi) / 2
            below = mid ** 3 + cd * mid < yd
            lo = torch.where(below, mid, lo)
            hi = torch.where(below, hi, mid)
        x0 = ((lo + hi) / 2).to(y.dtype)
    den = (3 * x0 ** 2 + c).detach()
    return x0 + (y - (x0 ** 3 + c * x0)) / den


def ref_bisection(y, w):
    return _cubic_root_implicit(y, torch.exp(w))


def _zuko_gl_poly_make():
    utils = _imp("zuko.utils")

    def integral(a, b, w):
        f = lambda x: w[0] + w[1] * x + w[2] * x ** 2 + w[3] * x ** 3
        return utils.gauss_legendre(f, a, b, n=3, phi=(w,))

    a = torch.randn(5, generator=_g(6), dtype=F64)
    b = a + torch.rand(5, generator=_g(7), dtype=F64) * 2 + 0.2
    w = torch.randn(4, generator=_g(8), dtype=F64)
    return integral, (a.requires_grad_(), b.requires_grad_(), w.requires_grad_()), {}


def ref_gl_poly(a, b, w):
    F = lambda x: w[0] * x + w[1] * x ** 2 / 2 + w[2] * x ** 3 / 3 + w[3] * x ** 4 / 4
    return F(b) - F(a)


def _zuko_gl_gauss_make():
    utils = _imp("zuko.utils")

    def integral(a, b, w):
        return utils.gauss_legendre(lambda x: torch.exp(-(w * x) ** 2), a, b, n=32, phi=(w,))

    a = torch.tensor([-0.69, 0.1, -1.5], dtype=F64)
    b = torch.tensor([1.2, 0.8, 0.3], dtype=F64)
    w = torch.tensor([0.7, 1.3, 1.0], dtype=F64)
    return integral, (a.requires_grad_(), b.requires_grad_(), w.requires_grad_()), {}


def ref_gl_gauss(a, b, w):
    return math.sqrt(math.pi) / (2 * w) * (torch.erf(w * b) - torch.erf(w * a))


def _zuko_odeint_linear_make():
    utils = _imp("zuko.utils")

    def flow(x0, A):
        return utils.odeint(lambda t, x: x @ A, x0, 0.0, 1.0, phi=(A,), atol=_tol(x0), rtol=_tol(x0))

    x0 = torch.randn(4, 3, generator=_g(9), dtype=F64)
    A = torch.randn(3, 3, generator=_g(10), dtype=F64) * 0.5
    return flow, (x0.requires_grad_(), A.requires_grad_()), {}


def ref_odeint_linear(x0, A):
    return x0 @ torch.linalg.matrix_exp(A)


def _zuko_odeint_times_make():
    utils = _imp("zuko.utils")

    def flow(x0, t0, t1):
        return utils.odeint(lambda t, x: -(1 + t) * x, x0, t0, t1, atol=_tol(x0), rtol=_tol(x0))

    x0 = torch.randn(5, generator=_g(11), dtype=F64)
    t0 = torch.tensor(0.2, dtype=F64)
    t1 = torch.tensor(1.1, dtype=F64)
    return flow, (x0.requires_grad_(), t0.requires_grad_(), t1.requires_grad_()), {}


def ref_odeint_times(x0, t0, t1):
    return x0 * torch.exp(-((t1 - t0) + (t1 ** 2 - t0 ** 2) / 2))


# ---------------------------------------------------------------------------------------------
# xitorch 0.5.1: solve_torchfcn, symeig_torchfcn, _Quadrature, _RootFinder, _SolveIVP
# ---------------------------------------------------------------------------------------------

def _xt_solve_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def solve(A, B):
        return lin.solve(xt.LinearOperator.m(A), B, method="custom_exactsolve")

    A = torch.randn(5, 5, generator=_g(12), dtype=F64) + 5 * torch.eye(5, dtype=F64)
    B = torch.randn(5, 3, generator=_g(13), dtype=F64)
    return solve, (A.requires_grad_(), B.requires_grad_()), {}


def ref_solve(A, B):
    return torch.linalg.solve(A, B)


def _xt_solve_bias_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def solve(A, B, E):
        return lin.solve(xt.LinearOperator.m(A), B, E=E, method="custom_exactsolve")

    A = torch.randn(5, 5, generator=_g(14), dtype=F64) + 5 * torch.eye(5, dtype=F64)
    B = torch.randn(5, 3, generator=_g(15), dtype=F64)
    E = torch.rand(3, generator=_g(16), dtype=F64) * 0.5
    return solve, (A.requires_grad_(), B.requires_grad_(), E.requires_grad_()), {}


def ref_solve_bias(A, B, E):
    # (A - E_c I) x_c = B_c for each column c
    eye = torch.eye(A.shape[-1], dtype=A.dtype)
    cols = [torch.linalg.solve(A - E[c] * eye, B[:, c]) for c in range(B.shape[1])]
    return torch.stack(cols, dim=1)


def _xt_solve_cg_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def solve(L, B):
        A = L @ L.T + 4 * torch.eye(L.shape[0], dtype=L.dtype)
        return lin.solve(xt.LinearOperator.m(A, is_hermitian=True), B, method="cg",
                         rtol=1e-13, atol=1e-14)

    L = torch.randn(6, 6, generator=_g(17), dtype=F64) * 0.5
    B = torch.randn(6, 2, generator=_g(18), dtype=F64)
    return solve, (L.requires_grad_(), B.requires_grad_()), {}


def ref_solve_cg(L, B):
    A = L @ L.T + 4 * torch.eye(L.shape[0], dtype=L.dtype)
    return torch.linalg.solve(A, B)


def _fix_sign(V):
    # eigenvectors up to sign: make each column's largest-magnitude entry positive
    idx = V.abs().argmax(dim=-2, keepdim=True)
    s = torch.sign(torch.gather(V, -2, idx))
    return V * s


def _xt_symeig_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def lowest3(A):
        S = (A + A.T) / 2
        evals, evecs = lin.symeig(xt.LinearOperator.m(S, is_hermitian=True), neig=3,
                                  mode="lowest", method="custom_exacteig")
        return evals, _fix_sign(evecs)

    A = torch.randn(6, 6, generator=_g(19), dtype=F64)
    return lowest3, (A.requires_grad_(),), {}


def ref_symeig(A):
    S = (A + A.T) / 2
    evals, evecs = torch.linalg.eigh(S)
    return evals[:3], _fix_sign(evecs[:, :3])


def _xt_quad_make():
    itg = _imp("xitorch.integrate")

    def integral(xl, xu, w):
        return itg.quad(lambda x, w: torch.exp(-w * x * x), xl, xu, params=[w])

    xl = torch.tensor(-0.4, dtype=F64)
    xu = torch.tensor(1.3, dtype=F64)
    w = torch.tensor([0.5, 1.0, 2.0], dtype=F64)
    return integral, (xl.requires_grad_(), xu.requires_grad_(), w.requires_grad_()), {}


def ref_quad(xl, xu, w):
    r = torch.sqrt(w)
    return math.sqrt(math.pi) / (2 * r) * (torch.erf(r * xu) - torch.erf(r * xl))


def _xt_rootfinder_make():
    opt = _imp("xitorch.optimize")

    def root(c, y):
        return opt.rootfinder(lambda x, c, y: x ** 3 + c * x - y, torch.zeros_like(y), params=(c, y),
                              f_tol=_rtol(y), x_tol=_rtol(y))

    c = torch.rand(4, generator=_g(20), dtype=F64) + 0.5
    y = torch.randn(4, generator=_g(21), dtype=F64) * 2
    return root, (c.requires_grad_(), y.requires_grad_()), {}


def ref_rootfinder(c, y):
    return _cubic_root_implicit(y, c)


def _xt_solve_ivp_make():
    itg = _imp("xitorch.integrate")
    def trajectory(y0, k):
        ts = torch.linspace(0, 1.5, 6, dtype=y0.dtype)   # the time grid in the state's dtype
        return itg.solve_ivp(lambda t, y, k: -k * y + torch.sin(t), ts, y0, params=(k,),
                             method="rk45", atol=_tol(y0), rtol=_tol(y0))

    y0 = torch.randn(3, generator=_g(22), dtype=F64)
    k = torch.rand(3, generator=_g(23), dtype=F64) + 0.5
    return trajectory, (y0.requires_grad_(), k.requires_grad_()), {}


def ref_solve_ivp(y0, k):
    # y' = -k y + sin t: y(t) = e^{-kt} y0 + (k sin t - cos t + e^{-kt}) / (1 + k^2)
    t = torch.linspace(0, 1.5, 6, dtype=y0.dtype)[:, None]
    e = torch.exp(-k * t)
    return e * y0 + (k * torch.sin(t) - torch.cos(t) + e) / (1 + k * k)


def _zuko_bisection_cos_make():
    utils = _imp("zuko.utils")

    def arccos(y):
        # cos is decreasing on [0, pi]: a = pi gives f(a) <= y, b = 0 gives y <= f(b)
        return utils.bisection(torch.cos, y, math.pi, 0.0, n=100)

    y = torch.rand(7, generator=_g(31), dtype=F64) * 1.6 - 0.8
    return arccos, (y.requires_grad_(),), {}


def ref_arccos(y):
    return torch.acos(y)


def _xt_solve_batched_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def solve(A, B):
        return lin.solve(xt.LinearOperator.m(A), B, method="custom_exactsolve")

    A = torch.randn(3, 4, 4, generator=_g(32), dtype=F64) + 4 * torch.eye(4, dtype=F64)
    B = torch.randn(3, 4, 2, generator=_g(33), dtype=F64)
    return solve, (A.requires_grad_(), B.requires_grad_()), {}


def _xt_symeig_upper_make():
    xt = _imp("xitorch")
    lin = _imp("xitorch.linalg")

    def upper2(A):
        S = (A + A.T) / 2
        evals, evecs = lin.symeig(xt.LinearOperator.m(S, is_hermitian=True), neig=2,
                                  mode="uppest", method="custom_exacteig")
        return evals, _fix_sign(evecs)

    A = torch.randn(5, 5, generator=_g(34), dtype=F64)
    return upper2, (A.requires_grad_(),), {}


def ref_symeig_upper(A):
    S = (A + A.T) / 2
    evals, evecs = torch.linalg.eigh(S)
    return evals[-2:], _fix_sign(evecs[:, -2:])


# ---------------------------------------------------------------------------------------------
# diffsort 0.2.0: NormalCDF (diffsort/functional.py), the 'gaussian' swap relaxation
# ---------------------------------------------------------------------------------------------

def _diffsort_make(sigma):
    def make():
        fnl = _imp("diffsort.functional")

        def normal_cdf(x):
            return fnl.NormalCDF.apply(x, sigma)

        x = torch.randn(6, 5, generator=_g(24), dtype=F64) * 0.3
        return normal_cdf, (x.requires_grad_(),), {}
    return make


def _ref_normal_cdf(sigma):
    def ref(x):
        return 0.5 + 0.5 * torch.erf(x / (sigma * math.sqrt(2)))
    return ref


# ---------------------------------------------------------------------------------------------
# memory-efficient-attention-pytorch 0.1.6: FlashAttentionFunction (plain and cosine-sim)
# ---------------------------------------------------------------------------------------------

def _fa_make(causal, with_mask, nq=10, nk=10, qb=4, kb=3):
    def make():
        fa = _imp("memory_efficient_attention_pytorch.flash_attention")
        mask = None
        if with_mask:
            mask = torch.ones(2, nk, dtype=torch.bool)
            mask[0, -3:] = False
            mask[1, :2] = False

        def attend(q, k, v):
            return fa.FlashAttentionFunction.apply(q, k, v, mask, causal, qb, kb)

        q = torch.randn(2, 2, nq, 8, generator=_g(25), dtype=F64)
        k = torch.randn(2, 2, nk, 8, generator=_g(26), dtype=F64)
        v = torch.randn(2, 2, nk, 8, generator=_g(27), dtype=F64)
        return attend, (q.requires_grad_(), k.requires_grad_(), v.requires_grad_()), {}
    return make


def _ref_attention(causal, with_mask, nk=10):
    def ref(q, k, v):
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        nq = q.shape[-2]
        if causal:
            # query i sees keys j <= i + (nk - nq) (aligned at the end)
            i = torch.arange(nq)[:, None]
            j = torch.arange(k.shape[-2])[None, :]
            s = s.masked_fill(j > i + max(k.shape[-2] - nq, 0), float("-inf"))
        if with_mask:
            mask = torch.ones(2, nk, dtype=torch.bool)
            mask[0, -3:] = False
            mask[1, :2] = False
            s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
        return torch.softmax(s, dim=-1) @ v
    return ref


def _cos_fa_make(with_mask, qb=4, kb=3):
    def make():
        fa = _imp("memory_efficient_attention_pytorch.cosine_sim_flash_attention")
        mask = None
        if with_mask:
            mask = torch.ones(2, 10, dtype=torch.bool)
            mask[0, -3:] = False
            mask[1, :2] = False

        def attend(q, k, v):
            qn = torch.nn.functional.normalize(q, dim=-1)
            kn = torch.nn.functional.normalize(k, dim=-1)
            return fa.FlashAttentionFunction.apply(qn, kn, v, mask, 4.0, False, qb, kb)

        q = torch.randn(2, 2, 10, 8, generator=_g(28), dtype=F64)
        k = torch.randn(2, 2, 10, 8, generator=_g(29), dtype=F64)
        v = torch.randn(2, 2, 10, 8, generator=_g(30), dtype=F64)
        return attend, (q.requires_grad_(), k.requires_grad_(), v.requires_grad_()), {}
    return make


def _ref_cos_attention(with_mask):
    def ref(q, k, v):
        qn = torch.nn.functional.normalize(q, dim=-1)
        kn = torch.nn.functional.normalize(k, dim=-1)
        s = qn @ kn.transpose(-1, -2) * 4.0
        if with_mask:
            mask = torch.ones(2, 10, dtype=torch.bool)
            mask[0, -3:] = False
            mask[1, :2] = False
            s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
        return torch.softmax(s, dim=-1) @ v
    return ref


# ---------------------------------------------------------------------------------------------
# torchlie 0.1.0 (torchlie/functional/so3_impl.py, se3_impl.py): Exp, Hat, Vee, TransformFrom,
# Compose.  Their backward returns the Euclidean gradient of the raw tensor (checked below); Log
# (a tangent-space gradient by design) is left out.
# ---------------------------------------------------------------------------------------------

def _hat_plain(w):
    z = torch.zeros_like(w[..., 0])
    return torch.stack((torch.stack((z, -w[..., 2], w[..., 1]), -1),
                        torch.stack((w[..., 2], z, -w[..., 0]), -1),
                        torch.stack((-w[..., 1], w[..., 0], z), -1)), -2)


def _so3_exp_plain(w):
    """Rodrigues: R = I + sinc(t) K + (1 - cos t)/t^2 K^2, t = |w|, written without cancellation."""
    t = torch.linalg.vector_norm(w, dim=-1)[..., None, None]
    K = _hat_plain(w)
    A = torch.sinc(t / math.pi)
    B = 0.5 * torch.sinc(t / (2 * math.pi)) ** 2
    eye = torch.eye(3, dtype=w.dtype).expand(K.shape)
    return eye + A * K + B * (K @ K)


def _se3_exp_plain(xi):
    """[R | V v] with xi = (v, w), V = I + (1 - cos t)/t^2 K + (t - sin t)/t^3 K^2."""
    v, w = xi[..., :3], xi[..., 3:]
    t = torch.linalg.vector_norm(w, dim=-1)[..., None, None]
    K = _hat_plain(w)
    B = 0.5 * torch.sinc(t / (2 * math.pi)) ** 2
    small = t < 1e-2
    ts = torch.where(small, torch.ones_like(t), t)
    C = torch.where(small, 1 / 6 - t ** 2 / 120 + t ** 4 / 5040, (ts - torch.sin(ts)) / ts ** 3)
    eye = torch.eye(3, dtype=xi.dtype).expand(K.shape)
    R = _so3_exp_plain(w)
    V = eye + B * K + C * (K @ K)
    return torch.cat((R, (V @ v[..., None])), dim=-1)


def _lie():
    return _imp("torchlie.functional")


def _tl_so3_exp_make():
    w = torch.randn(5, 3, generator=_g(40), dtype=F64)
    return _lie().SO3.exp, (w.requires_grad_(),), {}


def _tl_se3_exp_make():
    xi = torch.randn(4, 6, generator=_g(41), dtype=F64)
    return _lie().SE3.exp, (xi.requires_grad_(),), {}


def _tl_hat_make():
    w = torch.randn(5, 3, generator=_g(42), dtype=F64)
    return _lie().SO3.hat, (w.requires_grad_(),), {}


def _tl_vee_make():
    K = _hat_plain(torch.randn(5, 3, generator=_g(43), dtype=F64))
    return _lie().SO3.vee, (K.requires_grad_(),), {}


def ref_vee(T):
    return 0.5 * torch.stack((T[..., 2, 1] - T[..., 1, 2], T[..., 0, 2] - T[..., 2, 0],
                              T[..., 1, 0] - T[..., 0, 1]), -1)


def _tl_so3_transform_make():
    R = _so3_exp_plain(torch.randn(5, 3, generator=_g(44), dtype=F64))
    p = torch.randn(5, 3, generator=_g(45), dtype=F64)
    return _lie().SO3.transform, (R.requires_grad_(), p.requires_grad_()), {}


def ref_so3_transform(R, p):
    return (R @ p[..., None])[..., 0]


def _tl_se3_transform_make():
    G = _se3_exp_plain(torch.randn(4, 6, generator=_g(46), dtype=F64))
    p = torch.randn(4, 3, generator=_g(47), dtype=F64)
    return _lie().SE3.transform, (G.requires_grad_(), p.requires_grad_()), {}


def ref_se3_transform(G, p):
    return (G[..., :3] @ p[..., None])[..., 0] + G[..., 3]


def _tl_so3_compose_make():
    R0 = _so3_exp_plain(torch.randn(5, 3, generator=_g(48), dtype=F64))
    R1 = _so3_exp_plain(torch.randn(5, 3, generator=_g(49), dtype=F64))
    return _lie().SO3.compose, (R0.requires_grad_(), R1.requires_grad_()), {}


def ref_compose(R0, R1):
    return R0 @ R1



TIMM = "timm==1.0.31"
PYRO = "pyro-ppl==1.9.2"
ZUKO = "zuko==1.6.0"
XT = "xitorch==0.5.1"
DS = "diffsort==0.2.0"
MEA = "memory-efficient-attention-pytorch==0.1.6"
TL = "torchlie==0.1.0"

CONFIGS = [
    Config("timm:SwishAutoFn:8x16", TIMM, _timm_make("SwishAutoFn"), ref_swish,
           "swish x*sigmoid(x), backward sigmoid(x)(1+x(1-sigmoid(x)))"),
    Config("timm:MishAutoFn:8x16", TIMM, _timm_make("MishAutoFn"), ref_mish,
           "mish x*tanh(softplus x), backward tanh(sp)+x*sigmoid*sech^2(sp)"),
    Config("timm:HardSigmoidAutoFn:8x16", TIMM, _timm_make("HardSigmoidAutoFn", (-3.0, 3.0)),
           ref_hard_sigmoid, "hard sigmoid clamp(x+3,0,6)/6, values away from the kinks +-3"),
    Config("timm:HardSwishAutoFn:8x16", TIMM, _timm_make("HardSwishAutoFn", (-3.0, 3.0)),
           ref_hard_swish, "hard swish x*clamp(x+3,0,6)/6, values away from the kinks +-3"),
    Config("timm:HardMishAutoFn:8x16", TIMM, _timm_make("HardMishAutoFn", (-2.0, 0.0)),
           ref_hard_mish, "hard mish x/2*clamp(x+2,0,2), values away from the kinks -2, 0"),
    Config("pyro-ppl:safe_log:6x7", PYRO, _pyro_safe_log_make, ref_log,
           "log with the gradient 1/x clamped at 1/eps: exact 1/x for x >= eps"),
    Config("pyro-ppl:EwmaLog:first_call", PYRO, _pyro_ewma_make, ref_ewma_log,
           "log whose gradient uses a moving average of the inputs; on a fresh EwmaLog it is the input: 1/x"),
    Config("zuko:bisection:cubic", ZUKO, _zuko_bisection_make, ref_bisection,
           "root of x^3+e^w x = y by 100 bisection steps, implicit gradients to y and w"),
    Config("zuko:bisection:arccos", ZUKO, _zuko_bisection_cos_make, ref_arccos,
           "x in [0, pi] with cos x = y by 100 bisection steps (no parameters): arccos, gradient -1/sqrt(1-y^2)"),
    Config("zuko:gauss_legendre:cubic_poly", ZUKO, _zuko_gl_poly_make, ref_gl_poly,
           "3-point Gauss-Legendre of a cubic (exact), gradients to the limits and the coefficients"),
    Config("zuko:gauss_legendre:gaussian", ZUKO, _zuko_gl_gauss_make, ref_gl_gauss,
           "32-point Gauss-Legendre of exp(-(wx)^2) (converged), gradients to limits and w"),
    Config("zuko:odeint:linear", ZUKO, _zuko_odeint_linear_make, ref_odeint_linear,
           "dopri45 x' = xA from 0 to 1 (tol 1e-12 in float64, 1e-6 below) = x0 expm(A); adjoint gradients to x0 and A"),
    Config("xitorch:solve:custom_exactsolve", XT, _xt_solve_make, ref_solve,
           "A X = B via solve_torchfcn; gradients A^-T G and -A^-T G X^T"),
    Config("xitorch:solve:custom_exactsolve_bias", XT, _xt_solve_bias_make, ref_solve_bias,
           "(A - E_c I) x_c = B_c via solve_torchfcn, gradients to A, B, E"),
    Config("xitorch:solve:cg_spd", XT, _xt_solve_cg_make, ref_solve_cg,
           "SPD solve by conjugate gradients (tol 1e-13), implicit backward"),
    Config("xitorch:solve:custom_exactsolve_batched", XT, _xt_solve_batched_make, ref_solve,
           "batched (3) 4x4 solves via solve_torchfcn"),
    Config("xitorch:symeig:uppest2", XT, _xt_symeig_upper_make, ref_symeig_upper,
           "2 uppermost eigenpairs of a symmetrized 5x5 via symeig_torchfcn"),
    Config("xitorch:symeig:lowest3", XT, _xt_symeig_make, ref_symeig,
           "3 lowest eigenpairs of a symmetrized 6x6 via symeig_torchfcn (distinct eigenvalues)"),
    Config("xitorch:quad:gaussian", XT, _xt_quad_make, ref_quad,
           "leggauss quadrature of exp(-w x^2), gradients to both limits and w"),
    Config("xitorch:rootfinder:cubic", XT, _xt_rootfinder_make, ref_rootfinder,
           "root of x^3 + c x - y (broyden1, f_tol=x_tol=1e-14 in float64, 1e-6 below), implicit gradients to c, y"),
    Config("xitorch:solve_ivp:rk45", XT, _xt_solve_ivp_make, ref_solve_ivp,
           "y' = -k y + sin t on 6 times (rk45, tol 1e-12 in float64, 1e-6 below), adjoint gradients to y0 and k"),
    Config("diffsort:NormalCDF:sigma0.5", DS, _diffsort_make(0.5), _ref_normal_cdf(0.5),
           "Phi(x/sigma), sigma 0.5 (exact in float32)"),
    Config("torchlie:SO3.exp:5", TL, _tl_so3_exp_make, _so3_exp_plain,
           "SO(3) exponential (Rodrigues) of 5 tangent vectors; backward J_r^T vee(R^T G - G^T R)"),
    Config("torchlie:SE3.exp:4", TL, _tl_se3_exp_make, _se3_exp_plain,
           "SE(3) exponential [R | V v] of 4 twists (v, w)"),
    Config("torchlie:SO3.hat:5", TL, _tl_hat_make, _hat_plain,
           "hat map R^3 -> skew 3x3 (linear)"),
    Config("torchlie:SO3.vee:5", TL, _tl_vee_make, ref_vee,
           "vee map 3x3 -> R^3, 0.5 (T21 - T12, ...), on skew inputs (linear)"),
    Config("torchlie:SO3.transform:5", TL, _tl_so3_transform_make, ref_so3_transform,
           "rotate 5 points: R p, gradients g p^T and R^T g"),
    Config("torchlie:SE3.transform:4", TL, _tl_se3_transform_make, ref_se3_transform,
           "rigid transform of 4 points: R p + t"),
    Config("torchlie:SO3.compose:5", TL, _tl_so3_compose_make, ref_compose,
           "compose 5 rotation pairs: R0 R1"),
]

# memory-efficient-attention-pytorch cannot run float64 at all (see BUGS): these correct-in-float32
# configs are run with --dtype float32 only, through configs_fresh_f32.py
CONFIGS_F32 = [
    Config("memory-efficient-attention-pytorch:FlashAttentionFunction:plain", MEA,
           _fa_make(False, False), _ref_attention(False, False),
           "tiled softmax attention (q tile 4, k tile 3, 10x10), Algorithm 2/4 of FlashAttention"),
    Config("memory-efficient-attention-pytorch:FlashAttentionFunction:causal", MEA,
           _fa_make(True, False), _ref_attention(True, False),
           "tiled causal softmax attention (q tile 4, k tile 3)"),
    Config("memory-efficient-attention-pytorch:FlashAttentionFunction:key_mask", MEA,
           _fa_make(False, True), _ref_attention(False, True),
           "tiled attention with a key padding mask (b, n)"),
    Config("memory-efficient-attention-pytorch:CosineSimFlashAttention:plain", MEA,
           _cos_fa_make(False), _ref_cos_attention(False),
           "cosine-sim attention softmax(4 qn.kn) v, tiled, fixed max (scale)"),
]

BUGS = [
    Config("zuko:odeint:times", ZUKO, _zuko_odeint_times_make, ref_odeint_times,
           "x' = -(1+t)x from t0 to t1; gradients to x0, t0, t1",
           measured="grad t0 has the wrong sign (demos/fresh/zuko_odeint_t0_gradient_sign.py)", seen_by=("gradient", "jacobian")),
    Config("diffsort:NormalCDF:sigma0.1", DS, _diffsort_make(0.1), _ref_normal_cdf(0.1),
           "Phi(x/sigma) with sigma = 1/steepness = 0.1 (steepness 10, the package default)",
           measured="backward uses sigma rounded to float32: grad off by up to 6e-8 abs (demos/fresh/diffsort_normalcdf_float32_sigma.py)"),
    Config("memory-efficient-attention-pytorch:FlashAttentionFunction:float64", MEA,
           _fa_make(False, False), _ref_attention(False, False),
           "float64 inputs: torch.full(-finfo(float64).max) in float32 overflows, forward raises",
           measured="demos/fresh/mea_flash_attention_bugs.py (1)"),
    Config("memory-efficient-attention-pytorch:CosineSimFlashAttention:float64", MEA,
           _cos_fa_make(False), _ref_cos_attention(False),
           "float64 inputs: row sums accumulated in a float32 tensor, ~5e-8 errors",
           measured="demos/fresh/mea_flash_attention_bugs.py (4)"),
]

# float32-only bugs (run through configs_fresh_f32.py)
BUGS_F32 = [
    Config("memory-efficient-attention-pytorch:FlashAttentionFunction:causal_longer_k", MEA,
           _fa_make(True, False, nq=6, nk=10), _ref_attention(True, False),
           "tiled causal attention, 6 queries against 10 keys (aligned at the end)",
           measured="causal offset has the wrong sign: demos/fresh/mea_flash_attention_bugs.py (2)", seen_by=("forward",)),
    Config("memory-efficient-attention-pytorch:CosineSimFlashAttention:key_mask", MEA,
           _cos_fa_make(True), _ref_cos_attention(True),
           "cosine-sim flash attention with a key mask, q tile 4, k tile 3: forward raises",
           measured="demos/fresh/mea_flash_attention_bugs.py (3)"),
]

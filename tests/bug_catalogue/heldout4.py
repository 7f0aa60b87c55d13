"""A fourth held-out batch: 16 real gradient bugs from 10 projects' trackers, chosen and
reproduced by a helper who had not read gradlab's checking code, and measured before any change
to gradlab (HELDOUT4.md at the repository root has the figures at the time).  Each follows
base.py's conventions: a broken Function written from the report's description, its correct twin
(same signature), a plain-autograd reference, an ordinary author's input (the trigger not built
in), and the smallest failing input the report implies.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from .base import F64, Entry, rand, vals, vjp

GH = "https://github.com"
PI = math.pi


# --- tensorflow #127690: silu's beta gradient summed to a scalar whatever beta's shape -----

def silu_ref(x: Tensor, beta: Tensor) -> Tensor:
    return x * torch.sigmoid(beta * x)


class SiLUBeta(Function):
    """x * sigmoid(beta * x) with a tensor beta broadcast against x. BROKEN: the gradient of beta
    is reduced over every element (a scalar), then handed to every entry of beta: right only for
    a beta of one element; a per-column beta gets the sum of all columns' derivatives."""

    per_entry = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, beta: Tensor) -> Tensor:
        ctx.save_for_backward(x, beta)
        return silu_ref(x, beta)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        dx = (g * (s + x * beta * s * (1 - s))).sum_to_size(x.shape)
        db_full = g * x * x * s * (1 - s)
        db = db_full.sum_to_size(beta.shape) if cls.per_entry else \
            db_full.sum().expand(beta.shape).clone()
        return dx, db


class SiLUBetaFixed(SiLUBeta):
    per_entry = True


# --- snntorch #427: the sigmoid surrogate's backward overflows exp(-slope * x) -------------

def spike_ref(x: Tensor, slope: float) -> Tensor:
    """A Heaviside spike whose gradient is the sigmoid surrogate's (plain autograd)."""
    s = torch.sigmoid(slope * x)
    return (x > 0).to(x.dtype) + (s - s.detach())


class SigmoidSpike(Function):
    """Heaviside(x) forward, slope * sigmoid'(slope * x) backward (a surrogate gradient).
    BROKEN: backward is written exp(-k x) / (exp(-k x) + 1)^2, which is inf / inf = NaN once
    -k x passes the exponent's overflow (k = 25: x below about -3.5 in float32, -28.4 in
    float64)."""

    stable = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, slope: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.slope = slope
        return (x > 0).to(x.dtype)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        k = ctx.slope
        if cls.stable:
            s = torch.sigmoid(k * x)
            return g * k * s * (1 - s), None
        e = torch.exp(-k * x)
        return g * k * e / (e + 1) ** 2, None


class SigmoidSpikeFixed(SigmoidSpike):
    stable = True


# --- TensorKit.jl #543: scalar(t)'s pullback assigns its tangent instead of adding it -------

def scalar_use_ref(t: Tensor, x: Tensor) -> Tensor:
    """x * scalar(t) + t, t a one-element tensor used twice."""
    if t.numel() != 1:
        raise ValueError("scalar(t) needs a tensor of exactly one element")
    return x * t.reshape(()) + t


class ScalarUse(Function):
    """x * scalar(t) + t. Backward gathers t's gradient from the broadcast add (sum of g), then
    the scalar's pullback stores sum(g * x) into it. BROKEN: the store is an assignment, so the
    add's contribution is lost whenever t is also used elsewhere (here, always)."""

    accumulates = False

    @classmethod
    def forward(cls, ctx: Any, t: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(t, x)
        return scalar_use_ref(t, x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        t, x = ctx.saved_tensors
        dt = g.sum().reshape(t.shape).clone()
        d_scalar = (g * x).sum()
        flat = dt.view(-1)
        if cls.accumulates:
            flat[0] = flat[0] + d_scalar
        else:
            flat[0] = d_scalar
        return dt, g * t.reshape(())


class ScalarUseFixed(ScalarUse):
    accumulates = True


# --- elixir-nx/nx PR 1643: sort's gradient sent to the sorted positions, not the original ---

def sort_ref(x: Tensor) -> Tensor:
    return x.sort(-1).values


class Sort(Function):
    """Sort along the last dim. Backward must scatter g back to where each value came from
    (perm's inverse). BROKEN: it gathers g with perm (the target positions), right only where the
    sorting permutation is its own inverse (already sorted, or pairs swapped)."""

    scatters = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y, perm = x.sort(-1)
        ctx.save_for_backward(perm)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (perm,) = ctx.saved_tensors
        if cls.scatters:
            return torch.zeros_like(g).scatter(-1, perm, g)
        return g.gather(-1, perm)


class SortFixed(Sort):
    scatters = True


# --- pytorch #28993: mean over an empty dim list divides the gradient by 1 -----------------

def mean_ref(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """mean over `dims`; an empty list means every dim (as torch.mean(x, []) does)."""
    return x.mean(dim=tuple(dims)) if len(dims) else x.mean()


class MeanDims(Function):
    """mean(x, dims). Backward re-inserts the reduced dims and divides by the product of their
    sizes. BROKEN: for dims = [] (which reduces everything) that product is the empty product 1,
    so every element gets g instead of g / numel."""

    empty_means_all = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, dims: tuple[int, ...]) -> Tensor:
        ctx.shape = x.shape
        ctx.dims = tuple(sorted(d % x.dim() for d in dims))
        return mean_ref(x, dims)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        shape, dims = ctx.shape, ctx.dims
        if cls.empty_means_all and not dims:
            dims = tuple(range(len(shape)))
        n = math.prod(shape[d] for d in dims)
        gg = g
        if g.dim():
            for d in dims:
                gg = gg.unsqueeze(d)
        return gg.expand(shape) / n, None


class MeanDimsFixed(MeanDims):
    empty_means_all = True


# --- jax PR 11469: rem's derivative in its divisor uses floor(x / y), not trunc ------------

def rem_ref(x: Tensor, y: Tensor) -> Tensor:
    return torch.fmod(x, y)


class Rem(Function):
    """C-style remainder x - y * trunc(x / y). d/dy = -trunc(x / y). BROKEN: -floor(x / y),
    which differs whenever x and y have opposite signs (and x / y is not an integer)."""

    truncates = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return rem_ref(x, y)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        q = torch.trunc(x / y) if cls.truncates else torch.floor(x / y)
        return g.sum_to_size(x.shape), (-g * q).sum_to_size(y.shape)


class RemFixed(Rem):
    truncates = True


# --- jax #40629 and #5054: sinc's derivative near and at zero -------------------------------

def sinc_series(x: Tensor) -> Tensor:
    """sinc(x) = sin(pi x) / (pi x) by its Taylor series (accurate for |x| < 0.1)."""
    z2 = (PI * x) ** 2
    out = torch.ones_like(x)
    term = torch.ones_like(x)
    for k in range(1, 9):
        term = term * (-z2) / ((2 * k) * (2 * k + 1))
        out = out + term
    return out


def sinc_ref(x: Tensor) -> Tensor:
    """sinc, accurate with its derivatives of every order at and near 0 (plain autograd)."""
    small = x.abs() < 0.1
    xs = torch.where(small, torch.ones_like(x), x)
    return torch.where(small, sinc_series(x), torch.sin(PI * xs) / (PI * xs))


class SincNearZero(Function):
    """sinc(x); backward cos(pi x) / x - sin(pi x) / (pi x^2), 0 at x == 0. BROKEN: near 0 the two
    terms are each about 1/x and cancel, so for |x| around 1e-12 and below the derivative is
    rounding noise (-1.2e-4 at x = 1e-12, where it is -3.3e-12; the report measures -0.44 at
    x = -1.1e-16)."""

    accurate = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return sinc_ref(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if cls.accurate:
            return vjp(sinc_ref, [x], g)[0]
        xs = torch.where(x == 0, torch.ones_like(x), x)
        d = torch.cos(PI * xs) / xs - torch.sin(PI * xs) / (PI * xs * xs)
        return g * torch.where(x == 0, torch.zeros_like(x), d)


class SincNearZeroFixed(SincNearZero):
    accurate = True


class SincAtZero(Function):
    """sinc(x); backward (pi x cos(pi x) - sin(pi x)) / (pi x^2), differentiable, with the limit
    0 put in by a select at x == 0. BROKEN: the selected constant has no derivative, so the
    second derivative at exactly 0 is 0 where it is -pi^2 / 3."""

    smooth = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return sinc_ref(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if cls.smooth:
            return vjp(sinc_ref, [x], g)[0]
        xs = torch.where(x == 0, torch.ones_like(x), x)
        d = (PI * xs * torch.cos(PI * xs) - torch.sin(PI * xs)) / (PI * xs * xs)
        return g * torch.where(x == 0, torch.zeros_like(x), d)


class SincAtZeroFixed(SincAtZero):
    smooth = True


# --- pytorch #27134: d/db a**b is NaN at a == 0 (a**b * log(a) = 0 * -inf) -----------------

def pow_ref(a: Tensor, b: Tensor) -> Tensor:
    return torch.pow(a, b)


class Pow(Function):
    """a ** b elementwise. d/db = a**b * log(a). BROKEN: at a == 0 (b > 0) that is 0 * -inf = NaN
    where the limit is 0."""

    masks_zero = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        y = torch.pow(a, b)
        ctx.save_for_backward(a, b, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b, y = ctx.saved_tensors
        da = g * b * torch.pow(a, b - 1)
        db = g * y * torch.log(a)
        if cls.masks_zero:
            db = torch.where(a == 0, torch.zeros_like(db), db)
        return da, db


class PowFixed(Pow):
    masks_zero = True


# --- mlx PR 3433: prod's vjp misses the conjugate for complex inputs ------------------------

def others_prod(z: Tensor) -> Tensor:
    """[..., n]: entry i is the product of the last dim's entries other than i."""
    n = z.shape[-1]
    if n == 0 or z.numel() == 0:
        return torch.zeros_like(z)
    return torch.stack([torch.cat([z[..., :i], z[..., i + 1:]], -1).prod(-1)
                        for i in range(n)], -1)


def cprod_ref(z: Tensor) -> Tensor:
    return z.prod(-1)


class ComplexProd(Function):
    """Product over the last dim. The vjp is g * conj(product of the others). BROKEN: no
    conjugate, right for real inputs only."""

    conjugates = False

    @classmethod
    def forward(cls, ctx: Any, z: Tensor) -> Tensor:
        ctx.save_for_backward(z)
        return z.prod(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (z,) = ctx.saved_tensors
        o = others_prod(z)
        return g[..., None] * (o.conj() if cls.conjugates else o)


class ComplexProdFixed(ComplexProd):
    conjugates = True


def ctensor(re: list[float], im: list[float]) -> Tensor:
    return torch.complex(torch.tensor(re, dtype=F64), torch.tensor(im, dtype=F64)) \
        .requires_grad_()


def crand(*shape: int, seed: int = 0) -> Tensor:
    return torch.complex(rand(*shape, seed=seed, grad=False),
                         rand(*shape, seed=seed + 1, grad=False)).requires_grad_()


# --- pytensor PR 1911 and tensorflow #119430: cumprod's gradient divides by the input -------

def cumprod_ref(x: Tensor) -> Tensor:
    return x.cumprod(-1)


def rev_cumsum(t: Tensor) -> Tensor:
    return t.flip(-1).cumsum(-1).flip(-1)


class CumprodDiv(Function):
    """cumprod along the last dim; backward reverse_cumsum(g * y) / x. BROKEN: a zero in x gives
    0 / 0 = NaN (and inf past it)."""

    division_free = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(-1)
        ctx.save_for_backward(x, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        if cls.division_free:
            return vjp(cumprod_ref, [x], g)[0]
        return rev_cumsum(g * y) / x


class CumprodDivFixed(CumprodDiv):
    division_free = True


class CumprodDivNoNan(Function):
    """cumprod along the last dim; backward div_no_nan(reverse_cumsum(g * y), x). BROKEN: where x
    is 0 the quotient is replaced by 0, so a zero's own gradient (the product of the others
    times what follows) silently vanishes: [0, 2, 3] gets [0, 0, 0] for ones, not [9, 0, 0]."""

    division_free = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(-1)
        ctx.save_for_backward(x, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        if cls.division_free:
            return vjp(cumprod_ref, [x], g)[0]
        r = rev_cumsum(g * y)
        safe = torch.where(x == 0, torch.ones_like(x), x)
        return torch.where(x == 0, torch.zeros_like(r), r / safe)


class CumprodDivNoNanFixed(CumprodDivNoNan):
    division_free = True


# --- pytorch #106789: prod's gradient for two or more zeros is a constant -------------------

def prod_ref(x: Tensor) -> Tensor:
    return x.prod()


class ProdAll(Function):
    """Product of all entries; backward g * (product of the others), built from differentiable
    ops. BROKEN: with two or more zeros the gradient is all zeros, returned as a fresh constant,
    so double backward sees no dependence on x (the Hessian entry of two zeros is the product of
    the rest, not 0)."""

    keeps_graph = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.prod()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if not cls.keeps_graph and int((x == 0).sum()) >= 2:
            return torch.zeros_like(x)
        return g * others_prod(x.reshape(-1)).reshape(x.shape)


class ProdAllFixed(ProdAll):
    keeps_graph = True


def prod_hessian_demo(fn: Any) -> str | None:
    """The Hessian of prod at x = [0, 0] through fn's backward (create_graph) against the
    reference's; a gradient that does not require grad counts as a zero Hessian."""
    x = vals(0.0, 0.0)
    want = torch.autograd.functional.hessian(prod_ref, x.detach())
    (gx,) = torch.autograd.grad(fn.apply(x), x, create_graph=True)
    if not gx.requires_grad:
        got = torch.zeros(2, 2, dtype=F64)
    else:
        got = torch.stack([torch.autograd.grad(gx[i], x, retain_graph=True,
                                               allow_unused=True)[0] for i in range(2)])
    if not torch.allclose(got, want):
        return f"Hessian {got.tolist()} where the reference's is {want.tolist()}"
    return None


# --- Interpolations.jl #335: the gradient is lost exactly at the grid's lower bound ---------

def interp_ref(x: Tensor, v: Tensor) -> Tensor:
    """Linear interpolation of values v on the grid 0..n-1 at x, extrapolated linearly beyond."""
    n = v.shape[0]
    if n < 2 or v.dim() != 1:
        raise ValueError("values on a grid of at least two points, v [n] with n >= 2")
    i = x.detach().floor().clamp(0, n - 2).long()
    t = x - i.to(x.dtype)
    return v[i] * (1 - t) + v[i + 1] * t


class InterpLine(Function):
    """Linear interpolation with line extrapolation. BROKEN: the bound check is a min/max whose
    tie at the lower bound returns the bound itself, so a query exactly at x = 0 gets no
    derivative in x (0 instead of the first cell's slope); inside, above and below it is
    right."""

    keeps_tie = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, v: Tensor) -> Tensor:
        ctx.save_for_backward(x, v)
        return interp_ref(x, v)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, v = ctx.saved_tensors
        n = v.shape[0]
        i = x.floor().clamp(0, n - 2).long()
        t = x - i.to(x.dtype)
        slope = v[i + 1] - v[i]
        live = torch.ones_like(x) if cls.keeps_tie else (x != 0).to(x.dtype)
        dx = g * slope * live
        dv = torch.zeros_like(v).index_add(0, i, g * (1 - t)).index_add(0, i + 1, g * t)
        return dx, dv


class InterpLineFixed(InterpLine):
    keeps_tie = True


# --- jax #37635: digamma's derivative for negative x drops the reflection term --------------

def digamma_ref(x: Tensor) -> Tensor:
    return torch.digamma(x)


class Digamma(Function):
    """digamma(x); the derivative is trigamma(x), for x < 0 by reflection: pi^2 / sin^2(pi x) -
    trigamma(1 - x). BROKEN: the pi^2 / sin^2 term is dropped, so every negative non-integer x
    gets -trigamma(1 - x) (-0.93 at -0.5 where it is 8.93)."""

    reflects = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.digamma(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if cls.reflects:
            return g * torch.polygamma(1, x)
        neg = -torch.polygamma(1, 1 - x)
        return g * torch.where(x < 0, neg, torch.polygamma(1, x))


class DigammaFixed(Digamma):
    reflects = True


# --- tt-metal PR 56397: softplus's backward is exactly 0 once exp(beta * x) overflows -------

def softplus_ref(x: Tensor, beta: float, threshold: float) -> Tensor:
    """(1/beta) log(1 + exp(beta x)), x itself where beta x > threshold; computed stably."""
    z = beta * x
    pos = z > 0
    zp = torch.where(pos, z, torch.zeros_like(z))
    zn = torch.where(pos, torch.zeros_like(z), z)
    sp = torch.where(pos, zp + torch.log1p(torch.exp(-zp)), torch.log1p(torch.exp(zn)))
    return torch.where(z > threshold, x, sp / beta)


class Softplus(Function):
    """Softplus with beta and threshold. Backward on the non-linear branch is
    g * exp(beta x) * (1 / (exp(beta x) + 1)). BROKEN: once beta x passes exp's overflow the
    reciprocal is 0 and the device's inf * 0 gives 0, so the gradient is exactly 0 where it is g;
    reachable only when threshold is above the overflow point."""

    uses_sigmoid = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, beta: float, threshold: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.args = (beta, threshold)
        return softplus_ref(x, beta, threshold)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        (x,) = ctx.saved_tensors
        beta, threshold = ctx.args
        z = beta * x
        if cls.uses_sigmoid:
            inner = g * torch.sigmoid(z)
        else:
            e = torch.exp(z)
            inner = torch.nan_to_num(g * e * torch.reciprocal(e + 1), nan=0.0)
        return torch.where(z > threshold, g, inner), None, None


class SoftplusFixed(Softplus):
    uses_sigmoid = True


# ------------------------------------------------------------------------------------------

def _interp_inputs() -> list[Any]:
    return [rand(5, low=0.2, high=2.8), rand(4, seed=1)]


ENTRIES = (
    Entry("tf127690-silu-beta-scalar-grad", "tensorflow/tensorflow", "issue 127690",
          f"{GH}/tensorflow/tensorflow/issues/127690", "param_over_reduced",
          "a beta of more than one element (per-column): beta's gradient is summed over "
          "everything and handed to every entry", "x [1,2], beta [2]",
          SiLUBeta, SiLUBetaFixed,
          lambda: [rand(3, 4), rand(4, seed=1, low=0.5, high=1.5)], silu_ref,
          smallest_inputs=lambda: [rand(1, 2), rand(2, seed=1, low=0.5, high=1.5)],
          note="tf.nn.silu's custom gradient as a Function; TF hands back a scalar (shape ()), "
               "which torch would refuse, so the scalar is broadcast back to beta's shape"),
    Entry("snntorch427-sigmoid-surrogate-overflow", "jeshraghian/snntorch", "issue 427",
          f"{GH}/jeshraghian/snntorch/issues/427", "exp_overflow",
          "-slope * x beyond exp's overflow (float32: x < -3.5 at slope 25; float64: x < "
          "-28.4): inf / inf = NaN", "x [1] = [-30], slope 25",
          SigmoidSpike, SigmoidSpikeFixed,
          lambda: [rand(3, 4), 25.0], spike_ref,
          smallest_inputs=lambda: [vals(-30.0), 25.0],
          note="surrogate.Sigmoid's spike function; the reference states the same surrogate "
               "(Heaviside forward, sigmoid' backward) in plain autograd"),
    Entry("tensorkit543-scalar-pullback-assigns", "QuantumKitHub/TensorKit.jl", "issue 543",
          f"{GH}/QuantumKitHub/TensorKit.jl/issues/543", "overwrite_not_accumulate",
          "the tensor fed to scalar(t) also used elsewhere: the scalar pullback's assignment "
          "clobbers the other contribution", "t [1], x [1]",
          ScalarUse, ScalarUseFixed,
          lambda: [rand(1), rand(4, seed=1)], scalar_use_ref,
          smallest_inputs=lambda: [rand(1), rand(1, seed=1)],
          note="Mooncake's scalar_pullback as one Function whose one-element input is also "
               "added to the output; the reverse pass's accumulation buffer is the Function's "
               "own gradient tensor"),
    Entry("nx1643-sort-grad-target-positions", "elixir-nx/nx", "PR 1643",
          f"{GH}/elixir-nx/nx/pull/1643", "inverse_permutation",
          "a sort permutation that is not its own inverse (a 3-cycle): the gradient is "
          "gathered with perm instead of scattered", "x [3] = [0.3, 0.1, 0.2]",
          Sort, SortFixed,
          lambda: [rand(3, 4)], sort_ref,
          smallest_inputs=lambda: [vals(0.3, 0.1, 0.2)],
          note="Nx.sort's grad along the last axis as a Function"),
    Entry("pt28993-mean-empty-dims", "pytorch/pytorch", "issue 28993",
          f"{GH}/pytorch/pytorch/issues/28993", "empty_dim_list",
          "dims = [] (reduce everything): the gradient is divided by the empty product 1",
          "x [2], dims ()", MeanDims, MeanDimsFixed,
          lambda: [rand(3, 4), (1,)], mean_ref,
          smallest_inputs=lambda: [rand(2), ()],
          note="mean(x, dims) with the dim list as a tuple argument"),
    Entry("jax11469-rem-floor-not-trunc", "jax-ml/jax", "PR 11469",
          f"{GH}/jax-ml/jax/pull/11469", "rounding_mode",
          "x and y of opposite signs (x / y not an integer): d/dy uses floor(x / y) where "
          "trunc is due", "x [1] = [-1], y [1] = [2]", Rem, RemFixed,
          lambda: [rand(3, 4), rand(3, 4, seed=1, low=0.5, high=2.0)], rem_ref,
          smallest_inputs=lambda: [vals(-1.0), vals(2.0)],
          note="lax.rem's JVP rule for its second argument, as a torch Function's backward"),
    Entry("jax40629-sinc-cancellation", "jax-ml/jax", "issue 40629",
          f"{GH}/jax-ml/jax/issues/40629", "catastrophic_cancellation",
          "|x| tiny but nonzero (about 1e-12 and below): cos(pi x)/x - sin(pi x)/(pi x^2) "
          "cancels to rounding noise", "x [1] = [1e-12]",
          SincNearZero, SincNearZeroFixed,
          lambda: [rand(3, 4)], sinc_ref,
          smallest_inputs=lambda: [vals(1e-12)],
          note="jnp.sinc's derivative in the two-term form the report's value implies; the "
               "report reaches x = -1.1e-16 as sinc(2t - 1) at t = 0.49999999999999994"),
    Entry("jax5054-sinc-second-derivative-zero", "jax-ml/jax", "issue 5054",
          f"{GH}/jax-ml/jax/issues/5054", "second_order_select",
          "second order at exactly x = 0: the derivative's select puts in a constant there, "
          "so d2/dx2 is 0 instead of -pi^2/3", "x [1] = [0], order 2",
          SincAtZero, SincAtZeroFixed,
          lambda: [rand(3, 4)], sinc_ref,
          smallest_inputs=lambda: [vals(0.0)], order=2,
          note="jnp.sinc before its custom JVP: the where-guarded quotient's derivative as a "
               "differentiable torch backward"),
    Entry("pt27134-pow-exponent-grad-zero-base", "pytorch/pytorch", "issue 27134",
          f"{GH}/pytorch/pytorch/issues/27134", "zero_times_infinity",
          "a base exactly 0 (exponent > 0): d/db = a**b * log(a) = 0 * -inf = NaN",
          "a [1] = [0], b [1] = [2]", Pow, PowFixed,
          lambda: [rand(3, 4, low=0.5, high=1.5), rand(3, 4, seed=1, low=0.5, high=2.0)],
          pow_ref,
          smallest_inputs=lambda: [vals(0.0), vals(2.0)],
          note="pow_backward_exponent as a Function over two tensors"),
    Entry("mlx3433-prod-complex-conj", "ml-explore/mlx", "PR 3433",
          f"{GH}/ml-explore/mlx/pull/3433", "complex_conjugate",
          "a complex input with a nonzero imaginary part: the vjp misses conj()",
          "z [2] = [0.5+0.5j, 1+1j]", ComplexProd, ComplexProdFixed,
          lambda: [crand(3, 4)], cprod_ref,
          smallest_inputs=lambda: [ctensor([0.5, 1.0], [0.5, 1.0])],
          note="mx.prod's vjp over the last axis, products of the others computed without "
               "division"),
    Entry("pytensor1911-cumprod-grad-nan-zero", "pymc-devs/pytensor", "PR 1911",
          f"{GH}/pymc-devs/pytensor/pull/1911", "division_by_input",
          "an exact zero in the input: reverse_cumsum(g * y) / x is 0/0 = NaN",
          "x [1] = [0]", CumprodDiv, CumprodDivFixed,
          lambda: [rand(3, 4, low=0.5, high=1.5)], cumprod_ref,
          smallest_inputs=lambda: [vals(0.0)],
          note="CumOp.L_op for mode='mul' as a Function over the last axis"),
    Entry("tf119430-cumprod-grad-zero-dropped", "tensorflow/tensorflow", "issue 119430",
          f"{GH}/tensorflow/tensorflow/issues/119430", "nan_replaced_by_zero",
          "an exact zero in the input: div_no_nan gives that element 0 instead of the "
          "product of the others times what follows", "x [1] = [0]",
          CumprodDivNoNan, CumprodDivNoNanFixed,
          lambda: [rand(3, 4, low=0.5, high=1.5)], cumprod_ref,
          smallest_inputs=lambda: [vals(0.0)],
          note="_CumprodGrad (exclusive=False, reverse=False) as a Function over the last "
               "axis; the report's table matches div_no_nan"),
    Entry("pt106789-prod-double-backward-zeros", "pytorch/pytorch", "issue 106789",
          f"{GH}/pytorch/pytorch/issues/106789", "second_order_constant_branch",
          "two or more zeros, second order: the gradient is a constant without graph, so the "
          "Hessian between the zeros is 0", "x [2] = [0, 0], order 2",
          ProdAll, ProdAllFixed,
          lambda: [rand(2, 3, low=0.5, high=1.5)], prod_ref,
          smallest_inputs=lambda: [vals(0.0, 0.0)], order=2, demo=prod_hessian_demo,
          note="prod_backward's two-or-more-zeros branch as a Function over all entries"),
    Entry("interp335-lower-bound-tie", "JuliaMath/Interpolations.jl", "issue 335",
          f"{GH}/JuliaMath/Interpolations.jl/issues/335", "bound_tie",
          "a query exactly at the grid's lower bound with line extrapolation: the min/max "
          "tie drops the derivative in x", "x [1] = [0], v [2]",
          InterpLine, InterpLineFixed,
          _interp_inputs, interp_ref,
          smallest_inputs=lambda: [vals(0.0), rand(2, seed=1)],
          note="LinearInterpolation(1:n, v, extrapolation_bc=Line()) on the grid 0..n-1 as a "
               "Function of the queries and the values; ForwardDiff's lost dual modelled as "
               "a zero derivative in x at the tie"),
    Entry("jax37635-digamma-negative-grad", "jax-ml/jax", "issue 37635",
          f"{GH}/jax-ml/jax/issues/37635", "missing_reflection_term",
          "a negative non-integer x: trigamma by reflection without its pi^2 / sin^2(pi x) "
          "term", "x [1] = [-0.5]", Digamma, DigammaFixed,
          lambda: [rand(3, 4, low=0.5, high=2.0)], digamma_ref,
          smallest_inputs=lambda: [vals(-0.5)],
          note="lax.digamma's derivative as a Function; the report shows negative "
               "half-integers, the reproduction drops the term at every negative x (its "
               "measured values are exactly -trigamma(1 - x))"),
    Entry("ttmetal56397-softplus-overflow-zero", "tenstorrent/tt-metal", "PR 56397",
          f"{GH}/tenstorrent/tt-metal/pull/56397", "exp_overflow",
          "a threshold above exp's overflow point and beta * x between the two: the "
          "gradient is exactly 0", "x [1] = [710], beta 1, threshold 1000",
          Softplus, SoftplusFixed,
          lambda: [rand(3, 4), 1.0, 20.0], softplus_ref,
          smallest_inputs=lambda: [vals(710.0), 1.0, 1000.0],
          note="ttnn softplus_bw as a Function; float64's overflow at 709.8 stands for "
               "bfloat16's at 88, and the device's inf * 0 = 0 is modelled by mapping the "
               "NaN to 0"),
)

"""Held-out correct custom Functions, their plain-autograd references and example inputs.

Written without looking at the hint corpus's Functions (tests/data/corpus), on ops it does not
use, to measure how gradlab's hints generalise: the broken Functions in holdout_functions.py
are these with one bug each.  Every input is small float64 with values away from kinks,
ties and zeros, drawn from a seeded generator so a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

Fn = Any  # an autograd.Function subclass (gradlab.check calls its apply)


@dataclass(frozen=True)
class Entry:
    """One broken Function, its correct twin, the reference and the causes that are right.

    The fields the corpus judge (tests/data/corpus/corpus_judge.py) reads, so its scoring is
    reused as is.  right: the hint codes that name the true cause; empty for a mixed error
    (no hint names it, so every hint shown is wrong)."""

    id: str
    broken: Fn
    twin: Fn
    reference: Callable[..., Any]
    make: Callable[[], list[Any]]
    right: frozenset[str]
    options: dict[str, Any] = field(default_factory=dict)
    twin_id: str = ""
    pending: str = ""

    def args(self) -> list[Any]:
        return self.make()


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def uniform(shape: tuple[int, ...], lo: float, hi: float, seed: int) -> Tensor:
    """float64 values in [lo, hi): away from zero or kinks when the range says so."""
    u = torch.rand(shape, generator=gen(seed), dtype=torch.float64)
    return (lo + (hi - lo) * u).requires_grad_()


def signed(shape: tuple[int, ...], lo: float, hi: float, seed: int) -> Tensor:
    """float64 magnitudes in [lo, hi) with random signs: never near zero."""
    mag = uniform(shape, lo, hi, seed).detach()
    sign = torch.randint(0, 2, shape, generator=gen(seed + 1)).to(torch.float64) * 2 - 1
    return (mag * sign).requires_grad_()


def distinct(shape: tuple[int, ...], seed: int) -> Tensor:
    """Values with gaps of at least 0.1 between any two (no ties for max or sort)."""
    n = 1
    for s in shape:
        n *= s
    perm = torch.randperm(n, generator=gen(seed)).to(torch.float64)
    return (perm.reshape(shape) * 0.25 - n * 0.125).requires_grad_()


def rev_cumsum(t: Tensor, dim: int) -> Tensor:
    return t.flip(dim).cumsum(dim).flip(dim)


# ---- log_softmax over a dim given as a non-tensor argument ----------------------------------

class LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int) -> Tensor:
        y = x - torch.logsumexp(x, dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(ctx.dim, keepdim=True), None


def log_softmax_ref(x: Tensor, dim: int) -> Tensor:
    return torch.log_softmax(x, dim)


def log_softmax_args() -> list[Any]:
    return [signed((4, 6), 0.2, 2.0, 11), 1]


# ---- cumsum with a scale kwarg ---------------------------------------------------------------

class ScaledCumsum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: float = 1.0) -> Tensor:
        ctx.scale = scale
        return x.cumsum(-1) * scale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return rev_cumsum(g, -1) * ctx.scale, None


def scaled_cumsum_ref(x: Tensor, scale: float = 1.0) -> Tensor:
    return x.cumsum(-1) * scale


def cumsum_args() -> list[Any]:
    return [signed((3, 7), 0.2, 2.0, 12)]


CUMSUM_OPTIONS: dict[str, Any] = {"kwargs": {"scale": 2.5}}


# ---- cumprod of positive values --------------------------------------------------------------

class Cumprod(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(1)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x = ctx.saved_tensors[0]
        # d y_j / d x_i = y_j / x_i for j >= i, written without the division (an x of 0 in
        # it: gradlab's edges feed one, where y_j / x_i is 0 / 0): the product of the others
        out = torch.zeros_like(x)
        for i in range(x.shape[1]):
            others = torch.cat([x[:, :i], torch.ones_like(x[:, i:i + 1]), x[:, i + 1:]], 1)
            out[:, i] = (g[:, i:] * others.cumprod(1)[:, i:]).sum(1)
        return out


def cumprod_ref(x: Tensor) -> Tensor:
    return x.cumprod(1)


def cumprod_args() -> list[Any]:
    return [uniform((3, 6), 0.6, 1.5, 13)]


# ---- gather / scatter with distinct indices --------------------------------------------------

def distinct_index(rows: int, cols: int, take: int, seed: int) -> Tensor:
    """Per row, `take` distinct column indices out of `cols` (scatter without collisions)."""
    return torch.stack([torch.randperm(cols, generator=gen(seed + r))[:take]
                        for r in range(rows)])


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return x.gather(1, idx)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        # scatter_add: a plain scatter keeps one of a repeated index's gradients (the
        # repeated_index variant's bug), right only for the distinct indices of gather_args
        return g.new_zeros(ctx.shape).scatter_add(1, idx, g), None


def gather_ref(x: Tensor, idx: Tensor) -> Tensor:
    return x.gather(1, idx)


def gather_args() -> list[Any]:
    return [signed((6, 8), 0.2, 2.0, 14), distinct_index(6, 8, 5, 140)]


class Scatter(torch.autograd.Function):
    """Places src's rows at distinct columns of a zero (rows, 8) tensor."""

    @staticmethod
    def forward(ctx: Any, src: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        return src.new_zeros(src.shape[0], 8).scatter(1, idx, src)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        return g.gather(1, idx), None


def scatter_ref(src: Tensor, idx: Tensor) -> Tensor:
    return src.new_zeros(src.shape[0], 8).scatter(1, idx, src)


def scatter_args() -> list[Any]:
    return [signed((5, 3), 0.2, 2.0, 15), distinct_index(5, 8, 3, 150)]


# ---- bmm and a three-input einsum contraction ------------------------------------------------

class Bmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return torch.bmm(a, b)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.bmm(g, b.transpose(1, 2)), torch.bmm(a.transpose(1, 2), g)


def bmm_ref(a: Tensor, b: Tensor) -> Tensor:
    return torch.bmm(a, b)


def bmm_args() -> list[Any]:
    return [signed((2, 4, 4), 0.2, 2.0, 16), signed((2, 4, 4), 0.2, 2.0, 17)]


class Bilinear(torch.autograd.Function):
    """out_b = x_b^T W y_b."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, w, y)
        return torch.einsum("bi,ij,bj->b", x, w, y)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w, y = ctx.saved_tensors
        gx = g[:, None] * (y @ w.T)
        gw = torch.einsum("b,bi,bj->ij", g, x, y)
        gy = g[:, None] * (x @ w)
        return gx, gw, gy


def bilinear_ref(x: Tensor, w: Tensor, y: Tensor) -> Tensor:
    return torch.einsum("bi,ij,bj->b", x, w, y)


def bilinear_args() -> list[Any]:
    return [signed((5, 4), 0.2, 2.0, 18), signed((4, 4), 0.2, 2.0, 19),
            signed((5, 4), 0.2, 2.0, 20)]


# ---- pooling and a 1-d convolution -----------------------------------------------------------

class AvgPool(torch.autograd.Function):
    """Average over windows of 2 along the last dim (stride 2, even length)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.unflatten(-1, (-1, 2)).mean(-1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.repeat_interleave(2, -1) / 2


def avg_pool_ref(x: Tensor) -> Tensor:
    return F.avg_pool1d(x, 2, 2)


def avg_pool_args() -> list[Any]:
    return [signed((2, 3, 12), 0.2, 2.0, 21)]


class MaxPool(torch.autograd.Function):
    """Max over windows of 2 along the last dim (stride 2); distinct values, no ties."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        vals, arg = x.unflatten(-1, (-1, 2)).max(-1)
        ctx.save_for_backward(arg)
        ctx.shape = x.shape
        return vals

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (arg,) = ctx.saved_tensors
        pos = arg + 2 * torch.arange(arg.shape[-1])
        return g.new_zeros(ctx.shape).scatter(-1, pos, g)


def max_pool_ref(x: Tensor) -> Tensor:
    return F.max_pool1d(x, 2, 2)


def max_pool_args() -> list[Any]:
    return [distinct((2, 3, 8), 23)]


class Conv1d(torch.autograd.Function):
    """conv1d with padding 1."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return F.conv1d(x, w, padding=1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        gx = F.conv_transpose1d(g, w, padding=1)
        cols = F.pad(x, (1, 1)).unfold(-1, w.shape[-1], 1)  # (B, Cin, T, K)
        gw = torch.einsum("bot,bitk->oik", g, cols)
        return gx, gw


def conv1d_ref(x: Tensor, w: Tensor) -> Tensor:
    return F.conv1d(x, w, padding=1)


def conv1d_args() -> list[Any]:
    return [signed((2, 3, 10), 0.2, 2.0, 24), signed((4, 3, 3), 0.2, 1.0, 25)]


# ---- atan2, hypot, polar (two outputs) -------------------------------------------------------

class Atan2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, y: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(y, x)
        return torch.atan2(y, x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        y, x = ctx.saved_tensors
        r2 = x * x + y * y
        return g * x / r2, -g * y / r2


def atan2_ref(y: Tensor, x: Tensor) -> Tensor:
    return torch.atan2(y, x)


def plane_args() -> list[Any]:
    """x > 0: atan2 away from its branch cut; both away from the origin."""
    return [signed((4, 5), 0.3, 2.0, 26), uniform((4, 5), 0.3, 2.0, 27)]


def plane_args_tiled() -> list[Any]:
    """8 columns: a multiple of a blocked backward's tile of 4."""
    return [signed((3, 8), 0.3, 2.0, 36), signed((3, 8), 0.3, 2.0, 37)]


class Hypot(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        h = torch.hypot(x, y)
        ctx.save_for_backward(x, y, h)
        return h

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        return g * x / h, g * y / h


def hypot_ref(x: Tensor, y: Tensor) -> Tensor:
    return torch.hypot(x, y)


class Polar(torch.autograd.Function):
    """(x, y) -> (r, theta): two differentiable outputs."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        ctx.save_for_backward(x, y)
        return torch.hypot(x, y), torch.atan2(y, x)

    @staticmethod
    def backward(ctx: Any, gr: Tensor, gt: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        r2 = x * x + y * y
        r = r2.sqrt()
        return gr * x / r - gt * y / r2, gr * y / r + gt * x / r2


class PolarLean(torch.autograd.Function):
    """Polar without materialised zero gradients: an unused output's gradient is None."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, y)
        return torch.hypot(x, y), torch.atan2(y, x)

    @staticmethod
    def backward(ctx: Any, gr: Tensor | None, gt: Tensor | None) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        gx, gy = torch.zeros_like(x), torch.zeros_like(y)
        if gr is not None:
            r = torch.hypot(x, y)
            gx, gy = gx + gr * x / r, gy + gr * y / r
        if gt is not None:
            r2 = x * x + y * y
            gx, gy = gx - gt * y / r2, gy + gt * x / r2
        return gx, gy


def polar_ref(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    return torch.hypot(x, y), torch.atan2(y, x)


def polar_args() -> list[Any]:
    return [uniform((3, 5), 0.3, 2.0, 28), signed((3, 5), 0.3, 2.0, 29)]


# ---- polynomial evaluation -------------------------------------------------------------------

class Poly(torch.autograd.Function):
    """p(x) = sum_k c_k x^k, by Horner's rule."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, c: Tensor) -> Tensor:
        ctx.save_for_backward(x, c)
        out = torch.zeros_like(x) + c[-1]
        for ck in c.flip(0)[1:]:
            out = out * x + ck
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, c = ctx.saved_tensors
        k = torch.arange(c.shape[0], dtype=x.dtype)
        powers = x[..., None] ** k  # (..., K)
        gc = (g[..., None] * powers).reshape(-1, c.shape[0]).sum(0)
        dp = (k[1:] * c[1:] * powers[..., :-1]).sum(-1)
        return g * dp, gc


def poly_ref(x: Tensor, c: Tensor) -> Tensor:
    k = torch.arange(c.shape[0], dtype=x.dtype)
    return (c * x[..., None] ** k).sum(-1)


def poly_args() -> list[Any]:
    return [signed((4, 5), 0.3, 1.5, 30), signed((5,), 0.3, 1.5, 31)]


# ---- norms and the cross product -------------------------------------------------------------

class Norm(torch.autograd.Function):
    """The L2 norm of the whole tensor (a scalar)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        n = x.pow(2).sum().sqrt()
        ctx.save_for_backward(x, n)
        return n

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, n = ctx.saved_tensors
        return g * x / n


def norm_ref(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x)


class RowNorm(torch.autograd.Function):
    """The L2 norm of each row."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        n = x.pow(2).sum(-1).sqrt()
        ctx.save_for_backward(x, n)
        return n

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, n = ctx.saved_tensors
        return (g / n)[:, None] * x


def row_norm_ref(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x, dim=-1)


def norm_args() -> list[Any]:
    return [signed((4, 6), 0.2, 2.0, 32)]


class Cross(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return torch.linalg.cross(a, b)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.linalg.cross(b, g), torch.linalg.cross(g, a)


def cross_ref(a: Tensor, b: Tensor) -> Tensor:
    return torch.linalg.cross(a, b)


def cross_args() -> list[Any]:
    return [signed((6, 3), 0.2, 2.0, 33), signed((6, 3), 0.2, 2.0, 34)]


# ---- sort: values and a float rank tensor that is not differentiable --------------------------

class SortRanks(torch.autograd.Function):
    """Sorted values along the last dim and where each came from (as float, not differentiable)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        vals, idx = x.sort(-1)
        ctx.save_for_backward(idx)
        ranks = idx.to(x.dtype)
        ctx.mark_non_differentiable(ranks)
        return vals, ranks

    @staticmethod
    def backward(ctx: Any, g: Tensor, _granks: Tensor) -> Tensor:
        (idx,) = ctx.saved_tensors
        return torch.zeros_like(g).scatter(-1, idx, g)


def sort_ranks_ref(x: Tensor) -> tuple[Tensor, Tensor]:
    vals, idx = x.sort(-1)
    return vals, idx.to(x.dtype)


def sort_args() -> list[Any]:
    return [distinct((3, 6), 35)]


def poly_args_small_top() -> list[Any]:
    """The top coefficient 1e-4 of the others: a term dropped from it is a small error."""
    c = signed((5,), 0.3, 1.5, 31).detach()
    c[-1] *= 1e-4
    return [signed((4, 5), 0.3, 1.5, 30), c.requires_grad_()]


# ---- 2-d average pooling (3x3, stride 1, zero padding 1) -------------------------------------

class AvgPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, 3, 1, 1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        # a uniform 3x3 window with zero padding, divided by 9 everywhere: its own adjoint
        return F.avg_pool2d(g, 3, 1, 1)


def avg_pool2d_ref(x: Tensor) -> Tensor:
    return F.avg_pool2d(x, 3, 1, 1)


def avg_pool2d_args() -> list[Any]:
    return [signed((2, 2, 6, 7), 0.2, 2.0, 38)]


# ---- a per-channel scale on NCHW input -------------------------------------------------------

class ChannelScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w[:, None, None]

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w[:, None, None], (g * x).sum((0, 2, 3))


def channel_scale_ref(x: Tensor, w: Tensor) -> Tensor:
    return x * w[:, None, None]


def channel_scale_args() -> list[Any]:
    return [signed((2, 3, 4, 5), 0.2, 2.0, 39), signed((3,), 0.5, 2.0, 40)]


# ---- dropout that replays its mask from the saved RNG state ----------------------------------

class Dropout(torch.autograd.Function):
    """Keeps no mask: saves the RNG state and draws the same mask again in backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float) -> Tensor:
        ctx.rng = torch.get_rng_state()
        ctx.p = p
        keep = torch.rand(x.shape, dtype=x.dtype) >= p
        return x * keep / (1 - p)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        now = torch.get_rng_state()
        torch.set_rng_state(ctx.rng)
        keep = torch.rand(g.shape, dtype=g.dtype) >= ctx.p
        torch.set_rng_state(now)
        return g * keep / (1 - ctx.p), None


def dropout_ref(x: Tensor, p: float) -> Tensor:
    keep = torch.rand(x.shape, dtype=x.dtype) >= p
    return x * keep / (1 - p)


def dropout_args() -> list[Any]:
    return [signed((4, 6), 0.2, 2.0, 41), 0.3]


# ---- a non-square matrix product -------------------------------------------------------------

class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return torch.einsum("ij,jk->ik", a, b)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.einsum("ik,jk->ij", g, b), torch.einsum("ij,ik->jk", a, g)


def matmul_ref(a: Tensor, b: Tensor) -> Tensor:
    return a @ b


def matmul_args() -> list[Any]:
    return [signed((3, 4), 0.2, 2.0, 42), signed((4, 5), 0.2, 2.0, 43)]


# ---- in place with mark_dirty, a view, an expanded gradient, an integer output ---------------

class ScaleInplace(torch.autograd.Function):
    """x *= s in place, marked dirty: the very input object is returned."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, s: float) -> Tensor:
        ctx.s = s
        x.mul_(s)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * ctx.s, None


def scale_ref(x: Tensor, s: float) -> Tensor:
    return x * s


def scale_args() -> list[Any]:
    return [signed((3, 4), 0.2, 2.0, 44), 1.5]


class TransposeView(torch.autograd.Function):
    """Returns a view of its input (the transpose): a non-contiguous output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.t()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.t()


def transpose_ref(x: Tensor) -> Tensor:
    return x.t()


def square_args() -> list[Any]:
    return [signed((4, 4), 0.2, 2.0, 45)]


class SumRows(torch.autograd.Function):
    """Row sums; backward returns an expanded (stride-0) gradient, which autograd accepts."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return x.sum(1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g[:, None].expand(ctx.shape)


def sum_rows_ref(x: Tensor) -> Tensor:
    return x.sum(1)


def sum_rows_args() -> list[Any]:
    return [signed((3, 4), 0.2, 2.0, 46)]


class MaxDim(torch.autograd.Function):
    """Row maxima and their integer positions (an output that cannot require grad)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        v, i = x.max(1)
        ctx.save_for_backward(i)
        ctx.shape = x.shape
        return v, i

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gi: Tensor | None) -> Tensor:
        (i,) = ctx.saved_tensors
        return g.new_zeros(ctx.shape).scatter(1, i[:, None], g[:, None])


def max_dim_ref(x: Tensor) -> tuple[Tensor, Tensor]:
    v, i = x.max(1)
    return v, i


def max_dim_args() -> list[Any]:
    return [distinct((3, 5), 47)]


# ---- float32 examples (the numerical checks still run in float64) ----------------------------

def as_float32(make: Any) -> Any:
    """The same example args, floating tensors in float32."""

    def made() -> list[Any]:
        return [a.detach().float().requires_grad_() if isinstance(a, Tensor)
                and a.is_floating_point() else a for a in make()]

    made.__name__ = f"{make.__name__}_float32"
    return made

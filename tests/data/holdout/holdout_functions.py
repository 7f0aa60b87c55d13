"""Held-out broken custom Functions: each a correct Function of holdout_ops.py with one bug.

HOLDOUT lists them as Entries (broken, correct twin, reference, inputs, right set).  A right
set holds the hint codes (gradlab/render/words.py HINTS) whose sentence names the true cause;
it is empty for a mixed error no hint names (a dropped term, a wrong reduction dim, a wrong
contraction), where every hint shown is wrong.  Written before looking at the corpus's
mutations and without tuning gradlab to them: a measurement of how hints generalise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from holdout_ops import (
    CUMSUM_OPTIONS,
    Atan2,
    AvgPool,
    AvgPool2d,
    Bilinear,
    Bmm,
    ChannelScale,
    Conv1d,
    Cross,
    Cumprod,
    Dropout,
    Entry,
    Gather,
    Hypot,
    LogSoftmax,
    Matmul,
    MaxDim,
    MaxPool,
    Norm,
    Polar,
    PolarLean,
    Poly,
    RowNorm,
    ScaledCumsum,
    ScaleInplace,
    Scatter,
    SortRanks,
    SumRows,
    TransposeView,
    as_float32,
    atan2_ref,
    avg_pool2d_args,
    avg_pool2d_ref,
    avg_pool_args,
    avg_pool_ref,
    bilinear_args,
    bilinear_ref,
    bmm_args,
    bmm_ref,
    channel_scale_args,
    channel_scale_ref,
    conv1d_args,
    conv1d_ref,
    cross_args,
    cross_ref,
    cumprod_args,
    cumprod_ref,
    cumsum_args,
    dropout_args,
    dropout_ref,
    gather_args,
    gather_ref,
    hypot_ref,
    log_softmax_args,
    log_softmax_ref,
    matmul_args,
    matmul_ref,
    max_dim_args,
    max_dim_ref,
    max_pool_args,
    max_pool_ref,
    norm_args,
    norm_ref,
    plane_args,
    plane_args_tiled,
    polar_args,
    polar_ref,
    poly_args,
    poly_args_small_top,
    poly_ref,
    rev_cumsum,
    row_norm_ref,
    scale_args,
    scale_ref,
    scaled_cumsum_ref,
    scatter_args,
    scatter_ref,
    sort_args,
    sort_ranks_ref,
    square_args,
    sum_rows_args,
    sum_rows_ref,
    transpose_ref,
)
from torch import Tensor

SIGN = frozenset({"sign", "constant_factor"})  # "off by a constant factor -1" is as true
FACTOR = frozenset({"constant_factor"})
MIXED: frozenset[str] = frozenset()
#: a layout assumption about the inputs: each *_only hint names it for its own layout
INPUT_LAYOUT = frozenset({"noncontiguous_only", "transposed_only", "expanded_only"})
#: a wrong gate on needs_input_grad: in the subset variant the gradient comes back None
GATE = frozenset({"requires_grad_subset", "missing"})
#: a boundary element dropped: a range, at a border, and zero there
EDGE = frozenset({"index_range", "border_band", "zero"})


# ---- log_softmax -----------------------------------------------------------------------------

class LsSign(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        return y.exp() * g.sum(ctx.dim, keepdim=True) - g, None


class LsWrongDim(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(0, keepdim=True), None  # dim 0, not ctx.dim


class LsDroppedTerm(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g.clone(), None  # the softmax term dropped


class LsNoChain(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        n = y.shape[ctx.dim]
        return torch.ones_like(y) - y.exp() * n, None  # as if grad_output were all ones


class LsGradForDim(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]  # the bug's signature
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(ctx.dim, keepdim=True), torch.zeros(())


class LsInplaceInput(LogSoftmax):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int) -> Tensor:
        x.data.sub_(x.data.amax(dim, keepdim=True))  # "stabilise" the caller's tensor in place
        y = x - torch.logsumexp(x, dim, keepdim=True)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y


class LsNoMaxShift(LogSoftmax):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int) -> Tensor:
        y = x - x.exp().sum(dim, keepdim=True).log()  # overflows for large x
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y


# ---- cumsum with a scale kwarg ---------------------------------------------------------------

class CsForgotScale(ScaledCumsum):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return rev_cumsum(g, -1), None


class CsWrongDirection(ScaledCumsum):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g.cumsum(-1) * ctx.scale, None  # forward cumsum, not reversed


class CsLastDropped(ScaledCumsum):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        out = torch.zeros_like(g)
        n = g.shape[-1]
        for i in range(n - 1):  # off by one: the last column never written
            out[..., i] = g[..., i:].sum(-1) * ctx.scale
        return out, None


class CsGradOutputView(ScaledCumsum):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        rows, cols = g.shape
        flat = torch.as_strided(g, (rows * cols,), (1,))  # reads storage as if contiguous
        return rev_cumsum(flat.view(rows, cols), -1) * ctx.scale, None


# ---- cumprod ---------------------------------------------------------------------------------

class CpExclusive(Cumprod):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        return (rev_cumsum(g * y, 1) - g * y) / x  # j > i: the diagonal term left out


class CpNoChain(Cumprod):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        return rev_cumsum(y, 1) / x


class CpInplaceSaved(Cumprod):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        return rev_cumsum(y.mul_(g), 1) / x  # right values, but the saved output is changed


class CpCtxInput(Cumprod):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(1)
        ctx.x = x  # not save_for_backward
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return rev_cumsum(g * y, 1) / ctx.x


# ---- gather / scatter ------------------------------------------------------------------------

class GaRowOffset(Gather):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        idx = idx.clone()
        idx[2:4] = (idx[2:4] + 1) % ctx.shape[1]  # rows 2..3 read with an offset index
        return g.new_zeros(ctx.shape).scatter(1, idx, g), None


class GaZero(Gather):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g.new_zeros(ctx.shape), None


class ScMissing(Scatter):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[None, None]:  # type: ignore[override]  # the bug's signature
        return None, None


class ScFactor(Scatter):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        return g.gather(1, idx) * idx.shape[1] / g.shape[1], None  # a stray mean's factor


# ---- bmm and einsum --------------------------------------------------------------------------

class BmmTransposed(Bmm):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.bmm(b, g.transpose(1, 2)), torch.bmm(a.transpose(1, 2), g)


class BmmSwapped(Bmm):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.bmm(a.transpose(1, 2), g), torch.bmm(g, b.transpose(1, 2))


def contiguous_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


class BmmRawStorage(Bmm):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        # a kernel's view of the saved inputs: row-major storage assumed
        a = torch.as_strided(a, a.shape, contiguous_strides(a.shape))
        b = torch.as_strided(b, b.shape, contiguous_strides(b.shape))
        return torch.bmm(g, b.transpose(1, 2)), torch.bmm(a.transpose(1, 2), g)


class BilSwappedXY(Bilinear):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        gx, gw, gy = Bilinear.backward(ctx, g)
        return gy, gw, gx


class BilTransposedW(Bilinear):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        gx, gw, gy = Bilinear.backward(ctx, g)
        return gx, gw.T, gy


class BilWrongContraction(Bilinear):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w, y = ctx.saved_tensors
        gx = g[:, None] * (y @ w)  # contracts w's first index with y: w.T needed
        return gx, torch.einsum("b,bi,bj->ij", g, x, y), g[:, None] * (x @ w)


class BilGate(Bilinear):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]  # the bug's signature
        x, w, y = ctx.saved_tensors
        gx = g[:, None] * (y @ w.T) if ctx.needs_input_grad[0] else None
        gw = torch.einsum("b,bi,bj->ij", g, x, y) if ctx.needs_input_grad[0] else None  # [1]
        gy = g[:, None] * (x @ w) if ctx.needs_input_grad[2] else None
        return gx, gw, gy


# ---- pooling and conv1d ----------------------------------------------------------------------

class ApForgotDivide(AvgPool):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.repeat_interleave(2, -1)


class ApBlockedTail(AvgPool):
    """Backward in tiles of 4 outputs, the remainder tile forgotten."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        n = g.shape[-1]
        out = g.new_zeros(*g.shape[:-1], 2 * n)
        for s in range(0, n // 4 * 4, 4):
            out[..., 2 * s:2 * s + 8] = g[..., s:s + 4].repeat_interleave(2, -1) / 2
        return out


class ApGradOutputView(AvgPool):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        g = torch.as_strided(g, g.shape, contiguous_strides(g.shape))  # layout assumed
        return g.repeat_interleave(2, -1) / 2


class MpFirstInWindow(MaxPool):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return torch.stack([g, torch.zeros_like(g)], -1).flatten(-2)  # always the window's first


class MpInplaceGradOutput(MaxPool):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (arg,) = ctx.saved_tensors
        pos = arg + 2 * torch.arange(arg.shape[-1])
        g.mul_(0.5)  # "saves memory" by scaling the incoming buffer
        return g.new_zeros(ctx.shape).scatter(-1, pos, g * 2)


class CvFlippedKernel(Conv1d):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        _, gw = Conv1d.backward(ctx, g)
        _, w = ctx.saved_tensors
        return F.conv_transpose1d(g, w.flip(-1), padding=1), gw


class CvBorder(Conv1d):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gx, gw = Conv1d.backward(ctx, g)
        gx = gx.clone()
        gx[..., 0] = 0  # the padded border's contribution dropped
        gx[..., -1] = 0
        return gx, gw


class CvBatchMean(Conv1d):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gx, gw = Conv1d.backward(ctx, g)
        return gx, gw / g.shape[0]  # averaged over the batch, as a loss would


class CvWrongShape(Conv1d):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gx, gw = Conv1d.backward(ctx, g)
        return gx, gw.sum(0, keepdim=True)


class CvGlobalDtype(Conv1d):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        torch.set_default_dtype(torch.float64)  # for its buffers; never restored
        ctx.save_for_backward(x, w)
        return F.conv1d(x, w, padding=1)


# ---- atan2, hypot, polar ---------------------------------------------------------------------

class AtSwapped(Atan2):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gy, gx = Atan2.backward(ctx, g)
        return gx, gy


class AtSignX(Atan2):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gy, gx = Atan2.backward(ctx, g)
        return gy, -gx


class AtNoSquare(Atan2):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        y, x = ctx.saved_tensors
        r = torch.hypot(x, y)  # r, not r**2
        return g * x / r, -g * y / r


class AtGate(Atan2):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:  # type: ignore[override]  # the bug's signature
        y, x = ctx.saved_tensors
        r2 = x * x + y * y
        gy = g * x / r2 if ctx.needs_input_grad[0] else None
        gx = -g * y / r2 if ctx.needs_input_grad[0] else None  # should be [1]
        return gy, gx


class AtCtxInputs(Atan2):
    @staticmethod
    def forward(ctx: Any, y: Tensor, x: Tensor) -> Tensor:
        ctx.y, ctx.x = y, x
        return torch.atan2(y, x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        y, x = ctx.y, ctx.x
        r2 = x * x + y * y
        return g * x / r2, -g * y / r2


class HyClassState(Hypot):
    """Keeps what backward needs on the class: a second forward overwrites it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        h = torch.hypot(x, y)
        HyClassState.saved = (x.detach(), y.detach(), h.detach())  # type: ignore[attr-defined]
        return h

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = HyClassState.saved  # type: ignore[attr-defined]
        return g * x / h, g * y / h


class HyBlocked(Hypot):
    """Backward in tiles of 4 columns, as a kernel's launch grid of n // 4: no remainder."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        gx, gy = torch.zeros_like(x), torch.zeros_like(y)
        for s in range(0, x.shape[-1] // 4 * 4, 4):
            t = slice(s, s + 4)
            gx[..., t] = g[..., t] * x[..., t] / h[..., t]
            gy[..., t] = g[..., t] * y[..., t] / h[..., t]
        return gx, gy


class HySwappedNumerators(Hypot):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        return g * y / h, g * x / h


class HyFloat32(Hypot):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = (t.float() for t in ctx.saved_tensors)
        gf = g.float()
        return (gf * x / h).to(g.dtype), (gf * y / h).to(g.dtype)


class HyCtxOutput(Hypot):
    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        h = torch.hypot(x, y)
        ctx.save_for_backward(x, y)
        ctx.h = h  # the output kept on ctx
        return h

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        return g * x / ctx.h, g * y / ctx.h


class HyDetached(Hypot):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = (t.detach() for t in ctx.saved_tensors)  # not differentiable any more
        return g * x / h, g * y / h


class HyAccumulates(Hypot):
    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        h = torch.hypot(x, y)
        ctx.save_for_backward(x, y, h)
        ctx.seen = torch.zeros_like(h)
        return h

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        ctx.seen = ctx.seen + g  # accumulates across backward calls
        return ctx.seen * x / h, ctx.seen * y / h


class PlDroppedTheta(Polar):
    @staticmethod
    def backward(ctx: Any, gr: Tensor, gt: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        r = torch.hypot(x, y)
        return gr * x / r, gr * y / r  # theta's gradient forgotten


class PlOutputsSwapped(Polar):
    @staticmethod
    def backward(ctx: Any, gr: Tensor, gt: Tensor) -> tuple[Tensor, Tensor]:
        return Polar.backward(ctx, gt, gr)


class PlUndefined(PolarLean):
    @staticmethod
    def backward(ctx: Any, gr: Tensor, gt: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]  # the bug's signature
        x, y = ctx.saved_tensors
        r2 = x * x + y * y
        r = r2.sqrt()
        return gr * x / r - gt * y / r2, gr * y / r + gt * x / r2  # None not handled


# ---- polynomial ------------------------------------------------------------------------------

class PoExponent(Poly):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, c = ctx.saved_tensors
        k = torch.arange(c.shape[0], dtype=x.dtype)
        powers = x[..., None] ** k
        gc = (g[..., None] * powers).reshape(-1, c.shape[0]).sum(0)
        dp = (k[1:] * c[1:] * powers[..., 1:]).sum(-1)  # x^k, not x^(k-1)
        return g * dp, gc


class PoConstantTermDropped(Poly):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gx, gc = Poly.backward(ctx, g)
        gc = gc.clone()
        gc[0] = 0  # the loop over coefficients started at 1
        return gx, gc


class PoMissingC(Poly):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]  # the bug's signature
        gx, _ = Poly.backward(ctx, g)
        return gx, None


class PoWrongCount(Poly):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:  # type: ignore[override]
        gx, _ = Poly.backward(ctx, g)
        return gx


# ---- norms, cross, sort ----------------------------------------------------------------------

class NmForgotDivide(Norm):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, _ = ctx.saved_tensors
        return g * x


class NmCached(Norm):
    """Caches the norm of the last tensor object seen: in-place updates of x go unseen."""

    last: ClassVar[list[tuple[Tensor, Tensor]]] = []  # (that tensor, its norm), kept alive

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        if not NmCached.last or NmCached.last[0][0] is not x:
            NmCached.last[:] = [(x, x.pow(2).sum().sqrt())]
        n = NmCached.last[0][1].clone()
        ctx.save_for_backward(x, n)
        return n


class RnForgotDivide(RowNorm):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, _ = ctx.saved_tensors
        return g[:, None] * x


class CrSignA(Cross):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.linalg.cross(g, b), torch.linalg.cross(g, a)


class CrSwapped(Cross):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        ga, gb = Cross.backward(ctx, g)
        return gb, ga


class SoRanksDifferentiable(SortRanks):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        vals, idx = x.sort(-1)
        ctx.save_for_backward(idx)
        return vals, idx.to(x.dtype)  # not marked non-differentiable


class SoGatherNotScatter(SortRanks):
    @staticmethod
    def backward(ctx: Any, g: Tensor, _granks: Tensor) -> Tensor:
        (idx,) = ctx.saved_tensors
        return g.gather(-1, idx)  # the permutation, not its inverse


# ---- held-out extras: small errors, forward bugs, borders, channels_last, RNG, shapes ---------

class PoTopTermDropped(Poly):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, c = ctx.saved_tensors
        k = torch.arange(c.shape[0], dtype=x.dtype)
        powers = x[..., None] ** k
        gc = (g[..., None] * powers).reshape(-1, c.shape[0]).sum(0)
        dp = (k[1:-1] * c[1:-1] * powers[..., :-2]).sum(-1)  # the loop stops one term early
        return g * dp, gc


class LsApproxExp(LogSoftmax):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        soft = (1 + y / 2**20) ** (2**20)  # exp by a limit: close, not exact
        return g - soft * g.sum(ctx.dim, keepdim=True), None


class CpForwardExclusive(Cumprod):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(1)
        ctx.save_for_backward(x, y)
        return y / x  # exclusive: the product before each element, not through it


class CpGradOutputView(Cumprod):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        flat = g.view(-1)  # raises for a grad_output that is not contiguous
        return rev_cumsum(flat.view(g.shape) * y, 1) / x


class Ap2CountExcludesPad(AvgPool2d):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return F.avg_pool2d(g, 3, 1, 1, count_include_pad=False)  # forward counts the pad


class ChRawStorage(ChannelScale):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        x = torch.as_strided(x, x.shape, contiguous_strides(x.shape))  # NCHW storage assumed
        return g * w[:, None, None], (g * x).sum((0, 2, 3))


class DoFreshMask(Dropout):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        keep = torch.rand(g.shape, dtype=g.dtype) >= ctx.p  # a new mask, not forward's
        return g * keep / (1 - ctx.p), None


class HyFastPath(Hypot):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        far = x.abs() > 2 * y.abs()  # "h ~ |x|" shortcut, wrong in y
        gx = torch.where(far, g * x.sign(), g * x / h)
        gy = torch.where(far, torch.zeros_like(g), g * y / h)
        return gx, gy


class MmTransposedShape(Matmul):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return torch.einsum("ik,jk->ij", g, b), torch.einsum("ik,ij->kj", g, a)


class SiNotMarked(ScaleInplace):
    @staticmethod
    def forward(ctx: Any, x: Tensor, s: float) -> Tensor:
        ctx.s = s
        x.data.mul_(s)  # written through .data, returned, never marked dirty
        return x


class TvNotTransposed(TransposeView):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.contiguous()  # square input: the shape fits, the layout of values does not


class SrMean(SumRows):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g[:, None].expand(ctx.shape) / ctx.shape[1]  # the mean's gradient


class MdEveryElement(MaxDim):
    @staticmethod
    def backward(ctx: Any, g: Tensor, _gi: Tensor | None) -> Tensor:
        return g[:, None].expand(ctx.shape).clone()  # as if it were a sum


class Hy32Factor(Hypot):
    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y, h = ctx.saved_tensors
        return 2 * g * x / h, 2 * g * y / h  # the derivative of h**2's root taken as h**2's


def entry(id: str, broken: Any, twin: Any, reference: Any, make: Any, right: Iterable[str],
          options: dict[str, Any] | None = None, twin_id: str = "") -> Entry:
    return Entry(id, broken, twin, reference, make, frozenset(right), dict(options or {}),
                 twin_id)


LS = (LogSoftmax, log_softmax_ref, log_softmax_args)
CS = (ScaledCumsum, scaled_cumsum_ref, cumsum_args)
CP = (Cumprod, cumprod_ref, cumprod_args)
GA = (Gather, gather_ref, gather_args)
SC = (Scatter, scatter_ref, scatter_args)
BM = (Bmm, bmm_ref, bmm_args)
BI = (Bilinear, bilinear_ref, bilinear_args)
AP = (AvgPool, avg_pool_ref, avg_pool_args)
MP = (MaxPool, max_pool_ref, max_pool_args)
CV = (Conv1d, conv1d_ref, conv1d_args)
AT = (Atan2, atan2_ref, plane_args)
HY = (Hypot, hypot_ref, plane_args)
PL = (Polar, polar_ref, polar_args)
PO = (Poly, poly_ref, poly_args)
NM = (Norm, norm_ref, norm_args)
RN = (RowNorm, row_norm_ref, norm_args)
CR = (Cross, cross_ref, cross_args)
SO = (SortRanks, sort_ranks_ref, sort_args)

HOLDOUT: list[Entry] = [
    entry("log_softmax/sign", LsSign, *LS, SIGN),
    entry("log_softmax/wrong_reduction_dim", LsWrongDim, *LS, MIXED),
    entry("log_softmax/dropped_softmax_term", LsDroppedTerm, *LS, MIXED),
    entry("log_softmax/no_chain_rule", LsNoChain, *LS, {"no_chain_rule"}),
    entry("log_softmax/grad_for_dim_arg", LsGradForDim, *LS, {"non_tensor_grad"}),
    entry("log_softmax/inplace_input", LsInplaceInput, *LS, {"inplace_input"}),
    entry("log_softmax/no_max_shift", LsNoMaxShift, *LS, {"magnitude_only", "non_finite"}),
    entry("cumsum/forgot_scale_kwarg", CsForgotScale, *CS, FACTOR, CUMSUM_OPTIONS),
    entry("cumsum/not_reversed", CsWrongDirection, *CS, MIXED, CUMSUM_OPTIONS),
    entry("cumsum/last_column_dropped", CsLastDropped, *CS, EDGE, CUMSUM_OPTIONS),
    entry("cumsum/grad_output_raw_storage", CsGradOutputView, *CS, {"grad_output_layout"},
          CUMSUM_OPTIONS),
    entry("cumprod/diagonal_term_dropped", CpExclusive, *CP, MIXED),
    entry("cumprod/no_chain_rule", CpNoChain, *CP, {"no_chain_rule"}),
    # the values are right; backward writes the saved output (so a second backward differs)
    entry("cumprod/saved_output_written", CpInplaceSaved, *CP, {"inplace_saved", "not_reentrant"}),
    # a first-order-right backward reading an input kept on ctx: second order loses its path
    entry("cumprod/input_on_ctx", CpCtxInput, *CP, {"ctx_input", "second_order_only"}),
    entry("gather/row_offset", GaRowOffset, *GA, {"index_range"}),
    entry("gather/zero", GaZero, *GA, {"zero"}),
    entry("scatter/missing", ScMissing, *SC, {"missing"}),
    entry("scatter/stray_mean_factor", ScFactor, *SC, FACTOR),
    entry("bmm/transposed", BmmTransposed, *BM, {"transposed"}),
    entry("bmm/swapped", BmmSwapped, *BM, {"swapped"}),
    entry("bmm/raw_storage_inputs", BmmRawStorage, *BM, INPUT_LAYOUT),
    entry("bilinear/swapped_x_y", BilSwappedXY, *BI, {"swapped"}),
    entry("bilinear/transposed_w", BilTransposedW, *BI, {"transposed"}),
    entry("bilinear/wrong_contraction", BilWrongContraction, *BI, MIXED),
    entry("bilinear/needs_input_grad_gate", BilGate, *BI, GATE),
    entry("avg_pool/forgot_divide", ApForgotDivide, *AP, FACTOR),
    # 6 outputs per row, tiles of 4: the last two outputs' inputs get no gradient
    entry("avg_pool/tail_tile", ApBlockedTail, *AP,
          {"tail_tile", "index_range", "zero", "border_band"}),
    entry("avg_pool/grad_output_raw_storage", ApGradOutputView, *AP, {"grad_output_layout"}),
    entry("max_pool/first_in_window", MpFirstInWindow, *MP, MIXED),
    entry("max_pool/grad_output_written", MpInplaceGradOutput, *MP, {"inplace_grad_output"}),
    entry("conv1d/flipped_kernel", CvFlippedKernel, *CV, MIXED),
    entry("conv1d/border_dropped", CvBorder, *CV, EDGE),
    entry("conv1d/weight_batch_mean", CvBatchMean, *CV, FACTOR),
    entry("conv1d/weight_wrong_shape", CvWrongShape, *CV, {"wrong_shape"}),
    entry("conv1d/default_dtype_changed", CvGlobalDtype, *CV, {"global_state"}),
    entry("atan2/swapped", AtSwapped, *AT, {"swapped"}),
    entry("atan2/sign_of_x_grad", AtSignX, *AT, SIGN),
    entry("atan2/r_not_squared", AtNoSquare, *AT, MIXED),
    entry("atan2/needs_input_grad_gate", AtGate, *AT, GATE),
    entry("atan2/inputs_on_ctx", AtCtxInputs, *AT, {"ctx_input", "second_order_only"}),
    entry("hypot/swapped_numerators", HySwappedNumerators, *HY, {"swapped"}),
    entry("hypot/float32_backward", HyFloat32, *HY, {"precision_loss", "approximate"}),
    entry("hypot/output_on_ctx", HyCtxOutput, *HY, {"ctx_output", "second_order_only"}),
    entry("hypot/detached_backward", HyDetached, *HY, {"second_order_only"}),
    entry("hypot/accumulates_on_ctx", HyAccumulates, *HY, {"not_reentrant"}),
    # the class keeps detached copies: second order is wrong too, and rightly named
    entry("hypot/state_on_class", HyClassState, *HY, {"state_outside_ctx", "second_order_only"}),
    # 8 columns, tiles of 4: right on the example, wrong once the ragged variant grows them
    entry("hypot/tail_tile_ragged_only", HyBlocked, Hypot, hypot_ref, plane_args_tiled,
          {"ragged_only", "tail_tile", "index_range", "zero"}, twin_id="hypot_tiled"),
    entry("polar/theta_grad_dropped", PlDroppedTheta, *PL, MIXED),
    entry("polar/output_grads_swapped", PlOutputsSwapped, *PL, MIXED),
    entry("polar/undefined_grad", PlUndefined, PolarLean, polar_ref, polar_args,
          {"undefined_grad"}),
    entry("poly/exponent_off_by_one", PoExponent, *PO, MIXED),
    entry("poly/constant_term_dropped", PoConstantTermDropped, *PO, EDGE),
    entry("poly/missing_coefficient_grad", PoMissingC, *PO, {"missing"}),
    entry("poly/wrong_count", PoWrongCount, *PO, {"wrong_count"}),
    # a scalar norm: x * g is the gradient times the norm, one constant
    entry("norm/forgot_divide", NmForgotDivide, *NM, FACTOR),
    entry("norm/cached_by_address", NmCached, *NM, {"cached_forward", "forward"}),
    # per row the factor is that row's norm: no constant
    entry("row_norm/forgot_divide", RnForgotDivide, *RN, MIXED),
    entry("cross/sign_a", CrSignA, *CR, SIGN),
    entry("cross/swapped", CrSwapped, *CR, {"swapped"}),
    entry("sort/ranks_differentiable", SoRanksDifferentiable, *SO, {"output_differentiable"}),
    entry("sort/permutation_not_inverse", SoGatherNotScatter, *SO, MIXED),
    # a formula bug whose error happens to be small: not an approximate method
    entry("poly/small_top_term_dropped", PoTopTermDropped, Poly, poly_ref, poly_args_small_top,
          MIXED, twin_id="poly_small_top"),
    entry("log_softmax/approximate_exp", LsApproxExp, *LS, {"approximate"}),
    # backward is right for the true op: only forward is wrong
    entry("cumprod/forward_exclusive", CpForwardExclusive, *CP, {"forward"}),
    entry("cumprod/grad_output_view", CpGradOutputView, *CP, {"grad_output_layout"}),
    entry("avg_pool2d/count_excludes_pad", Ap2CountExcludesPad, AvgPool2d, avg_pool2d_ref,
          avg_pool2d_args, {"border_band"}),
    entry("channel_scale/raw_storage", ChRawStorage, ChannelScale, channel_scale_ref,
          channel_scale_args, INPUT_LAYOUT | {"channels_last_only"}),
    entry("dropout/fresh_mask_in_backward", DoFreshMask, Dropout, dropout_ref, dropout_args,
          {"rng_replay"}),
    # wrong only where |x| > 2|y|: the values decide, not the layout
    entry("hypot/wrong_fast_path", HyFastPath, *HY, {"value_dependent"}),
    entry("matmul/transposed_weight_grad", MmTransposedShape, Matmul, matmul_ref, matmul_args,
          {"wrong_shape", "transposed"}),
    entry("scale_inplace/data_write_not_marked", SiNotMarked, ScaleInplace, scale_ref,
          scale_args, {"inplace_input"}),
    entry("transpose_view/backward_not_transposed", TvNotTransposed, TransposeView,
          transpose_ref, square_args, {"transposed"}),
    entry("sum_rows/mean_gradient", SrMean, SumRows, sum_rows_ref, sum_rows_args, FACTOR),
    entry("max_dim/gradient_to_every_element", MdEveryElement, MaxDim, max_dim_ref,
          max_dim_args, MIXED),
    # float32 examples: the float32 tolerance for the rows, float64 for the numerical checks
    entry("hypot32/factor_2", Hy32Factor, Hypot, hypot_ref, as_float32(plane_args), FACTOR,
          twin_id="hypot32"),
    entry("atan2_32/sign_of_x_grad", AtSignX, Atan2, atan2_ref, as_float32(plane_args), SIGN,
          twin_id="atan2_32"),
    entry("log_softmax32/dropped_softmax_term", LsDroppedTerm, LogSoftmax, log_softmax_ref,
          as_float32(log_softmax_args), MIXED, twin_id="log_softmax32"),
    entry("cumprod32/no_chain_rule", CpNoChain, Cumprod, cumprod_ref, as_float32(cumprod_args),
          {"no_chain_rule"}, twin_id="cumprod32"),
]

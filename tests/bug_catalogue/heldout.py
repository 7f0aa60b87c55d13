"""A held-out set: real gradient bugs collected after gradlab was built, never used to build it.

Each entry follows base.py's conventions (a broken Function written from the report's
description, its correct twin, a plain-autograd reference, an example input as the Function's
author would pass it, and the smallest input that shows the bug). The set measures how
gradlab generalises; it is not tuned to gradlab's variants in either direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import F64, Entry, ids, needs, rand, vals, vjp

GH = "https://github.com"
SO = "second order through grad_output (a loss on a gradient, e.g. force matching)"


def read_flat(t: Tensor, n: int) -> Tensor:
    """The n values a kernel loads from t's data pointer as if t held n contiguous
    elements (zero past its storage's end, where a real kernel reads whatever lies there)."""
    flat = t.detach().new_empty(0).set_(t.untyped_storage()).view(-1)
    seen = flat[t.storage_offset():t.storage_offset() + n]
    return torch.cat([seen, seen.new_zeros(n - seen.numel())])


# --- flag_gems #5212: a 0-dim grad_output read as if it had one value per element -------

@torch.library.custom_op("gradlab_heldout::mse_flat", mutates_args=())
def mse_flat(x: Tensor, t: Tensor) -> Tensor:
    """mean((x - t)^2) as a registered op; BROKEN backward: loads grad_output[i] for every
    element i of x from a 0-dim grad_output (reads past its one value)."""
    return ((x - t) ** 2).mean()


@torch.library.custom_op("gradlab_heldout::mse", mutates_args=())
def mse(x: Tensor, t: Tensor) -> Tensor:
    return ((x - t) ** 2).mean()


def _mse_fake(x: Tensor, t: Tensor) -> Tensor:
    return x.new_empty(())


def _mse_setup(ctx: Any, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _mse_bwd_flat(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
    x, t = ctx.saved_tensors
    return 2 * (x - t) / x.numel() * read_flat(g, x.numel()).reshape(x.shape), None


def _mse_bwd(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
    x, t = ctx.saved_tensors
    return 2 * (x - t) / x.numel() * g, None


for _op, _bwd in ((mse_flat, _mse_bwd_flat), (mse, _mse_bwd)):
    _op.register_fake(_mse_fake)
    _op.register_autograd(_bwd, setup_context=_mse_setup)


def mse_loss_flat(x: Tensor, t: Tensor) -> Tensor:
    """The broken op as a user calls it (torch.ops.gradlab_heldout.mse_flat)."""
    return mse_flat(x, t)


def mse_loss(x: Tensor, t: Tensor) -> Tensor:
    return mse(x, t)


# --- aprender PR 2182: cross-entropy backward ignores the reduction ---------------------

class CrossEntropy(Function):
    """F.cross_entropy(logits, target, reduction); BROKEN: backward always scales by
    grad_output[0] / batch, right only for reduction='mean'."""

    by_reduction = False

    @classmethod
    def forward(cls, ctx: Any, logits: Tensor, target: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(logits, target)
        ctx.reduction = reduction
        return F.cross_entropy(logits, target, reduction=reduction)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        logits, target = ctx.saved_tensors
        d = logits.softmax(-1) - F.one_hot(target, logits.shape[-1]).to(logits.dtype)
        n = logits.shape[0]
        if not cls.by_reduction:
            return d * (g.reshape(-1)[0] / n), None, None
        scale = {"mean": g / n, "sum": g}.get(ctx.reduction, g.reshape(-1, 1))
        return d * scale, None, None


class CrossEntropyFixed(CrossEntropy):
    by_reduction = True


# --- gsplat #623 and joeyan/gaussian_splatting #35: alpha-compositing backwards ---------

def composite(c: Tensor, a: Tensor) -> Tensor:
    """Front-to-back compositing per row: sum_k c_k a_k prod_{j<k} (1 - a_j)."""
    ones = torch.ones_like(a[:, :1])
    trans = torch.cumprod(torch.cat([ones, 1 - a[:, :-1]], 1), 1)
    return (c * a * trans).sum(1)


class Composite(Function):
    """One pixel per camera row; BROKEN: backward reads camera 0's rendered value for every
    camera (the per-camera offset into the saved render is missing)."""

    offset = False

    @classmethod
    def forward(cls, ctx: Any, c: Tensor, a: Tensor) -> Tensor:
        out = composite(c, a)
        ctx.save_for_backward(c, a, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        c, a, out = ctx.saved_tensors
        ones = torch.ones_like(a[:, :1])
        trans = torch.cumprod(torch.cat([ones, 1 - a[:, :-1]], 1), 1)
        rendered = out if cls.offset else out[:1].expand_as(out)
        after = rendered[:, None] - (c * a * trans).cumsum(1)   # what lies behind k
        return a * trans * g[:, None], (c * trans - after / (1 - a)) * g[:, None]


class CompositeFixed(Composite):
    offset = True


ALPHA_MIN = 1 / 255   # 3DGS skips a splat whose alpha is below this


def skip_composite(c: Tensor, a: Tensor) -> Tensor:
    return composite(c, torch.where(a >= ALPHA_MIN, a, torch.zeros_like(a)))


class SkipComposite(Function):
    """Compositing that skips near-transparent splats; backward walks back from the final
    transmittance. BROKEN: it starts at the last splat visited and divides it out even when
    that splat was skipped (the weights of all earlier splats come out too large)."""

    skip_last = False

    @classmethod
    def forward(cls, ctx: Any, c: Tensor, a: Tensor) -> Tensor:
        ctx.save_for_backward(c, a)
        return composite(c, torch.where(a >= ALPHA_MIN, a, torch.zeros_like(a)))

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        c, a = ctx.saved_tensors
        live = a >= ALPHA_MIN
        a_eff = torch.where(live, a, torch.zeros_like(a))
        trans = torch.prod(1 - a_eff, 1)                  # the final transmittance
        after = torch.zeros_like(trans)
        dc, da = [], []
        for k in reversed(range(a.shape[1])):
            ak = a[:, k] if (k == a.shape[1] - 1 and not cls.skip_last) else a_eff[:, k]
            trans = trans / (1 - ak)                      # transmittance in front of k
            dc.append(a_eff[:, k] * trans * g)
            dak = (c[:, k] * trans - after / (1 - a[:, k])) * g
            da.append(torch.where(live[:, k], dak, torch.zeros_like(dak)))
            after = after + c[:, k] * a_eff[:, k] * trans
        return torch.stack(dc[::-1], 1), torch.stack(da[::-1], 1)


class SkipCompositeFixed(SkipComposite):
    skip_last = True


# --- torchvision PR 2438: RoIAlign backward clamps the RoI width on the wrong branch ------

def roi_weights(roi: Tensor, length: int, bins: int, aligned: bool, flip: bool) -> Tensor:
    """[bins, length] linear-interpolation weights of one sample per bin in a 1-D RoI;
    `flip` clamps the width to 1 when aligned instead of when not (the broken condition)."""
    off = 0.5 if aligned else 0.0
    start, end = float(roi[0]) - off, float(roi[1]) - off
    width = end - start
    if (aligned if flip else not aligned):
        width = max(width, 1.0)
    w = torch.zeros(bins, length, dtype=F64)
    for p in range(bins):
        pos = min(max(start + (p + 0.5) * width / bins, 0.0), length - 1.0)
        lo = math.floor(pos)
        hi = min(lo + 1, length - 1)
        w[p, lo] += 1 - (pos - lo)
        w[p, hi] += pos - lo
    return w


class RoIAlign1d(Function):
    """Rows of features pooled over one RoI; BROKEN: backward's width clamp is inverted."""

    flip = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, roi: Tensor, bins: int, aligned: bool) -> Tensor:
        ctx.save_for_backward(roi)
        ctx.args = (x.shape[-1], bins, aligned)
        return x @ roi_weights(roi, x.shape[-1], bins, aligned, False).to(x.dtype).T

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        (roi,) = ctx.saved_tensors
        return g @ roi_weights(roi, *ctx.args, cls.flip).to(g.dtype), None, None, None


class RoIAlign1dFixed(RoIAlign1d):
    flip = False


def roi_align_ref(x: Tensor, roi: Tensor, bins: int, aligned: bool) -> Tensor:
    return x @ roi_weights(roi, x.shape[-1], bins, aligned, False).to(x.dtype).T


# --- unsloth #5002 and PR 10616: cross-entropy kernels --------------------------------

class CEWritesLogits(Function):
    """Mean cross-entropy; BROKEN: backward writes the gradient into the saved logits'
    memory (a kernel store, no version bump) and returns that buffer."""

    inplace = True

    @classmethod
    def forward(cls, ctx: Any, logits: Tensor, labels: Tensor) -> Tensor:
        ctx.save_for_backward(logits, labels)
        return F.cross_entropy(logits, labels)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        logits, labels = ctx.saved_tensors
        onehot = F.one_hot(labels, logits.shape[-1]).to(logits.dtype)
        grad = (logits.softmax(-1) - onehot) * (g / logits.shape[0])
        if cls.inplace:
            logits.data.copy_(grad)
            return logits, None
        return grad, None


class CEOutOfPlace(CEWritesLogits):
    inplace = False


SOFTCAP = 2.0   # logit softcapping (Gemma 2 uses 30; the PR's tests also used 1)


def softcapped(logits: Tensor, remask: bool) -> Tensor:
    """Logits padded to a power-of-two width with -inf, then softcapped; without `remask`
    the padding becomes the finite -SOFTCAP and carries probability mass."""
    v = logits.shape[-1]
    width = 1 << max(v - 1, 0).bit_length()
    padded = F.pad(logits, (0, width - v), value=float("-inf"))
    z = SOFTCAP * torch.tanh(padded / SOFTCAP)
    if remask:
        z = z.masked_fill(torch.arange(width) >= v, float("-inf"))
    return z


class SoftcapCE(Function):
    """Mean cross-entropy of softcapped logits in a padded tile; BROKEN: the pad lanes are
    softcapped to -SOFTCAP and enter the logsumexp (forward and backward)."""

    remask = False

    @classmethod
    def forward(cls, ctx: Any, logits: Tensor, labels: Tensor) -> Tensor:
        ctx.save_for_backward(logits, labels)
        z = softcapped(logits, cls.remask)
        return (z.logsumexp(-1) - z.gather(1, labels[:, None])[:, 0]).mean()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        logits, labels = ctx.saved_tensors
        v = logits.shape[-1]
        p = softcapped(logits, cls.remask).softmax(-1)[:, :v]
        dz = p - F.one_hot(labels, v).to(p.dtype)
        return dz * (1 - torch.tanh(logits / SOFTCAP) ** 2) * (g / logits.shape[0]), None


class SoftcapCEFixed(SoftcapCE):
    remask = True


def softcap_ce_ref(logits: Tensor, labels: Tensor) -> Tensor:
    return F.cross_entropy(SOFTCAP * torch.tanh(logits / SOFTCAP), labels)


# --- torch_scatter #299, DGL PR 1864, sphericart PR 61, cuEquivariance #264: second order --

def segment_ids(ptr: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())


def segment_sum_ref(src: Tensor, ptr: Tensor) -> Tensor:
    out = src.new_zeros(ptr.numel() - 1, *src.shape[1:])
    return out.index_add(0, segment_ids(ptr), src)


class SegmentSum(Function):
    """Sums of rows between CSR pointers; BROKEN: backward's gather is an unlinked kernel
    (no graph), so a second derivative through it is empty."""

    linked = False

    @classmethod
    def forward(cls, ctx: Any, src: Tensor, ptr: Tensor) -> Tensor:
        ctx.save_for_backward(ptr)
        return segment_sum_ref(src, ptr)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (ptr,) = ctx.saved_tensors
        if cls.linked:
            return g[segment_ids(ptr)], None
        with torch.no_grad():
            return g[segment_ids(ptr)], None


class SegmentSumFixed(SegmentSum):
    linked = True


class UMulV(Function):
    """Edge messages x[src] * x[dst]; BROKEN: backward runs the scatter kernels on detached
    data, so the gradient it returns has no graph (double backward raises)."""

    linked = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, src: Tensor, dst: Tensor) -> Tensor:
        ctx.save_for_backward(x, src, dst)
        return x[src] * x[dst]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        x, src, dst = ctx.saved_tensors
        xs = x if cls.linked else x.detach()
        gx = torch.zeros_like(xs).index_add(0, src, g * xs[dst]).index_add(0, dst, g * xs[src])
        return gx, None, None


class UMulVFixed(UMulV):
    linked = True


def harmonics(xyz: Tensor) -> Tensor:
    """Four degree-2 polynomials of a direction (unnormalised l = 2 harmonics)."""
    x, y, z = xyz.unbind(-1)
    return torch.stack([x * y, y * z, z * x, x * x - y * y], -1)


def harmonics_vjp(g: Tensor, xyz: Tensor) -> Tensor:
    """J(xyz)^T g, written out (what the backward kernel computes)."""
    x, y, z = xyz.unbind(-1)
    g0, g1, g2, g3 = g.unbind(-1)
    return torch.stack([y * g0 + z * g2 + 2 * x * g3, x * g0 + z * g1 - 2 * y * g3,
                        y * g1 + x * g2], -1)


class HarmonicsBackward(Function):
    """The backward kernel as an op of (grad_output, xyz); BROKEN: its own backward returns
    no gradient for grad_output (only for xyz)."""

    wrt_grad_out = False

    @classmethod
    def forward(cls, ctx: Any, g: Tensor, xyz: Tensor) -> Tensor:
        ctx.save_for_backward(g, xyz)
        return harmonics_vjp(g, xyz)

    @classmethod
    def backward(cls, ctx: Any, gg: Tensor) -> tuple[Tensor | None, Tensor]:
        g, xyz = ctx.saved_tensors
        dg, dxyz = vjp(harmonics_vjp, (g, xyz), gg)
        return (dg if cls.wrt_grad_out else None), dxyz


class HarmonicsBackwardFixed(HarmonicsBackward):
    wrt_grad_out = True


class Harmonics(Function):
    bwd: type[HarmonicsBackward] = HarmonicsBackward

    @classmethod
    def forward(cls, ctx: Any, xyz: Tensor) -> Tensor:
        ctx.save_for_backward(xyz)
        return harmonics(xyz)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (xyz,) = ctx.saved_tensors
        return cls.bwd.apply(g, xyz)


class HarmonicsFixed(Harmonics):
    bwd = HarmonicsBackwardFixed


def unpacked(ggs: tuple[Tensor, ...], flags: tuple[bool, bool], by_flags: bool,
             like: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    """The two incoming gradients of a backward op that returned only the needed ones, packed:
    by its flags (right), or by position as if none had been dropped (BROKEN); zeros shaped as
    `like` for one that did not come."""
    if by_flags:
        it = iter(ggs)
        got = [next(it) if f else None for f in flags]
    else:
        got = [ggs[0], ggs[1] if len(ggs) > 1 else None]
    first, second = (torch.zeros_like(t) if g is None else g
                     for g, t in zip(got, like, strict=True))
    return first, second


class LinearBackward(Function):
    """Backward of y = x @ w as an op returning only the gradients needed, packed; BROKEN:
    its backward unpacks the incoming gradients by position as if none had been dropped."""

    by_flags = False

    @classmethod
    def forward(cls, ctx: Any, g: Tensor, x: Tensor, w: Tensor, nx: bool,
                nw: bool) -> tuple[Tensor, ...]:
        ctx.save_for_backward(g, x, w)
        ctx.flags = (nx, nw)
        outs = ([g[:, None] * w] if nx else []) + ([x.T @ g] if nw else [])
        return tuple(outs)

    @classmethod
    def backward(cls, ctx: Any, *ggs: Tensor) -> tuple[Any, ...]:
        g, x, w = ctx.saved_tensors
        ggx, ggw = unpacked(ggs, ctx.flags, cls.by_flags, (x, w))
        dg = (ggx * w).sum(-1) + x @ ggw
        return dg, g[:, None] * ggw, ggx.transpose(0, -1) @ g, None, None


class LinearBackwardFixed(LinearBackward):
    by_flags = True


class Linear(Function):
    bwd: type[LinearBackward] = LinearBackward

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        outs = iter(cls.bwd.apply(g, x, w, needs(ctx, 0), needs(ctx, 1)))
        return (next(outs) if needs(ctx, 0) else None), (next(outs) if needs(ctx, 1) else None)


class LinearFixed(Linear):
    bwd = LinearBackwardFixed


def through_grad_output(reference: Callable[..., Any],
                        smallest: Callable[[], list[Any]]) -> Callable[[Any], str | None]:
    """A demo: a head on the output whose first derivative is penalised (energy and force
    matching); the second derivative runs through the op's backward w.r.t. grad_output."""
    def second(f: Callable[..., Any]) -> tuple[Tensor | None, ...]:
        args = smallest()
        leaves = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        out = f(*args)
        head = torch.linspace(0.5, 1.5, out.numel(), dtype=F64).reshape(out.shape)
        head.requires_grad_()
        firsts = torch.autograd.grad((head * out).sum() + (out ** 2).sum(), leaves,
                                     create_graph=True)
        total = sum((g * g).sum() for g in firsts)
        return torch.autograd.grad(total, [*leaves, head], allow_unused=True)

    def demo(fn: Any) -> str | None:
        f = fn.apply if isinstance(fn, type) else fn
        want = second(reference)
        try:
            got = second(f)
        except Exception as exc:  # any error is the failure
            return f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            if a is None or not torch.allclose(a, b, rtol=1e-7, atol=1e-7):
                return f"second derivative {i} differs from the reference"
        return None
    return demo


# --- pytorch PR 120582: all_gather's backward drops the result of an out-of-place kernel --

def reduce_scatter_into(out: Tensor, grads: tuple[Tensor, ...]) -> Tensor:
    """A collective that writes its sum into `out` when `out` is contiguous, and otherwise
    allocates and returns a new buffer (leaving `out` as it was)."""
    total = torch.stack(grads).sum(0)
    if out.is_contiguous():
        return out.copy_(total)
    return total.contiguous()


class AllGather(Function):
    """all_gather over two ranks holding the same tensor (one process); BROKEN: backward
    returns its preallocated buffer, assuming the collective always fills it in place."""

    use_result = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        return x.clone(), x.clone()

    @classmethod
    def backward(cls, ctx: Any, g0: Tensor, g1: Tensor) -> Tensor:
        out = torch.zeros_like(g0)   # keeps g0's strides, as empty_like does
        res = reduce_scatter_into(out, (g0, g1))
        return res if cls.use_result else out


class AllGatherFixed(AllGather):
    use_result = True


# --- flash-linear-attention PR 649: exp(-G) overflows in a decayed scan's backward ------

def decay_matrix(g: Tensor) -> Tensor:
    """M[t, s] = exp(G_t - G_s) for s <= t, else 0, with G the cumulative log-decay."""
    cum = g.cumsum(-1)
    diff = cum[..., :, None] - cum[..., None, :]
    n = g.shape[-1]
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    return torch.where(keep, diff, torch.full_like(diff, float("-inf"))).exp()


def decay_scan_ref(k: Tensor, g: Tensor) -> Tensor:
    return (decay_matrix(g) @ k[..., None])[..., 0]


class DecayScan(Function):
    """y_t = sum_{s<=t} exp(G_t - G_s) k_s; BROKEN: backward factors exp(G_t - G_s) into
    exp(-G_s) * exp(G_t), which overflows (inf * 0 = NaN) once G is below about -709."""

    factored = True

    @classmethod
    def forward(cls, ctx: Any, k: Tensor, g: Tensor) -> Tensor:
        y = decay_scan_ref(k, g)
        ctx.save_for_backward(k, g, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, dy: Tensor) -> tuple[Tensor, Tensor]:
        k, g, y = ctx.saved_tensors
        cum = g.cumsum(-1)
        if cls.factored:
            dk = (-cum).exp() * (cum.exp() * dy).flip(-1).cumsum(-1).flip(-1)
        else:
            dk = (decay_matrix(g).transpose(-1, -2) @ dy[..., None])[..., 0]
        dcum = dy * y - k * dk
        return dk, dcum.flip(-1).cumsum(-1).flip(-1)


class DecayScanFixed(DecayScan):
    factored = False


# --- pytorch_geometric PR 6635: gcn_norm reads the adjacency's values detached ----------

def gcn_norm_detached(edge_index: Tensor, edge_weight: Tensor, n: int) -> Tensor:
    """BROKEN (plain autograd): `_values()` of the sparse adjacency is detached, so the
    normalised weights carry no gradient to edge_weight."""
    adj = torch.sparse_coo_tensor(edge_index, edge_weight, (n, n))
    w, (row, col) = adj._values(), adj._indices()
    deg = w.new_zeros(n).index_add(0, col, w)
    return deg[row].rsqrt() * w * deg[col].rsqrt()


def gcn_norm_ref(edge_index: Tensor, edge_weight: Tensor, n: int) -> Tensor:
    """gcn_norm without a sparse tensor: duplicates merged and edges sorted as coalesce does."""
    keys, inverse = torch.unique(edge_index[0] * n + edge_index[1], return_inverse=True)
    w = edge_weight.new_zeros(keys.numel()).index_add(0, inverse, edge_weight)
    row, col = keys // n, keys % n
    deg = w.new_zeros(n).index_add(0, col, w)
    return deg[row].rsqrt() * w * deg[col].rsqrt()


def gcn_norm(edge_index: Tensor, edge_weight: Tensor, n: int) -> Tensor:
    adj = torch.sparse_coo_tensor(edge_index, edge_weight, (n, n)).coalesce()
    w, (row, col) = adj.values(), adj.indices()
    deg = w.new_zeros(n).index_add(0, col, w)
    return deg[row].rsqrt() * w * deg[col].rsqrt()


# --- mlx PR 3633: a jvp rule that reads tangents packed, not by position -----------------

class Select(Function):
    """torch.where(cond, a, b) with a forward-mode rule; BROKEN: the jvp takes the tangents
    of the traced inputs in order, so with `a` untraced b's tangent is used as a's."""

    positional = False

    @classmethod
    def forward(cls, ctx: Any, cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(cond)
        ctx.save_for_forward(cond)
        ctx.set_materialize_grads(False)   # untraced inputs' tangents arrive as None
        return torch.where(cond, a, b)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor | None) -> tuple[Any, ...]:
        (cond,) = ctx.saved_tensors
        if g is None:
            return None, None, None
        zero = torch.zeros_like(g)
        return None, torch.where(cond, g, zero), torch.where(cond, zero, g)

    @classmethod
    def jvp(cls, ctx: Any, dcond: Any, da: Tensor | None, db: Tensor | None) -> Tensor:
        (cond,) = ctx.saved_tensors
        if not cls.positional:
            packed = [t for t in (da, db) if t is not None]
            da, db = packed[0], (packed[1] if len(packed) > 1 else None)
        ref = da if da is not None else db
        za = torch.zeros_like(ref) if da is None else da
        zb = torch.zeros_like(ref) if db is None else db
        return torch.where(cond, za, zb)


class SelectFixed(Select):
    positional = True


def select_ref(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return torch.where(cond, a, b)


def jvp_one_branch(fn: Any) -> str | None:
    """A demo: forward-mode AD with only b traced (a is a constant branch)."""
    cond = torch.tensor([True, False])
    a, b, tb = vals(1.0, grad=False), vals(2.0, 3.0, grad=False), vals(0.5, 0.25, grad=False)
    a = a.expand(2)
    with torch.autograd.forward_ad.dual_level():
        out = fn.apply(cond, a, torch.autograd.forward_ad.make_dual(b, tb))
        got = torch.autograd.forward_ad.unpack_dual(out).tangent
    want = torch.where(cond, torch.zeros_like(tb), tb)
    return None if torch.allclose(got, want) else f"tangent {got.tolist()}, want {want.tolist()}"


# --- pytorch PR 99698: a batching rule that flattens the queries and never unflattens ----

def lerp_table(table: Tensor, v: Tensor) -> Tensor:
    """Linear interpolation of a 1-D table at positions v (any shape)."""
    idx = v.detach().floor().clamp(0, table.shape[-1] - 2).long()
    frac = v - idx
    return table[idx] * (1 - frac) + table[idx + 1] * frac


class LerpTable(Function):
    """lerp_table with a hand-written backward and vmap rule; BROKEN: with both arguments
    batched the rule flattens each sample's queries and returns them flat."""

    unflatten = False

    @staticmethod
    def forward(table: Tensor, v: Tensor) -> Tensor:
        return lerp_table(table, v)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        table, v = ctx.saved_tensors
        idx = v.detach().floor().clamp(0, table.shape[-1] - 2).long()
        frac = v - idx
        dt = torch.zeros_like(table).index_add(0, idx.reshape(-1), (g * (1 - frac)).reshape(-1))
        dt = dt.index_add(0, idx.reshape(-1) + 1, (g * frac).reshape(-1))
        return dt, g * (table[idx + 1] - table[idx])

    @classmethod
    def vmap(cls, info: Any, in_dims: tuple[int | None, int | None], table: Tensor,
             v: Tensor) -> tuple[Tensor, int]:
        tb, vb = in_dims
        n = info.batch_size
        table = table.movedim(tb, 0) if tb is not None else table.expand(n, *table.shape)
        v = v.movedim(vb, 0) if vb is not None else v.expand(n, *v.shape)
        flat = v.flatten(1) if (tb is not None and vb is not None) else v
        out = torch.stack([cls.apply(table[i], flat[i]) for i in range(n)])
        return (out.view(v.shape) if cls.unflatten else out), 0


class LerpTableFixed(LerpTable):
    unflatten = True


def vmap_both_batched(fn: Any) -> str | None:
    """A demo: vmap over a batch of tables and a batch of [2, 2] query grids."""
    table = rand(2, 3, grad=False)
    v = rand(2, 2, 2, seed=1, low=0.0, high=2.0, grad=False)
    got = torch.func.vmap(fn.apply)(table, v)
    want = torch.stack([lerp_table(table[i], v[i]) for i in range(2)])
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    return None if torch.allclose(got, want) else "values differ from the loop"



# --- cherimoya #25: a dilated conv's dx written by overlapping load-add-store sequences ----

DIL = 2   # the dilation of the three-tap convolution


class DilatedConv3(Function):
    """out[l] = w0 x[l-d] + w1 x[l] + w2 x[l+d] (zero padded); BROKEN: backward loads dx at
    l, l-d, l+d, adds, and stores the three vectors in turn, so the last store wins."""

    accumulate = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        if w.shape != (3,):   # the kernel takes exactly three taps
            raise ValueError(f"w must hold the 3 taps, got shape {list(w.shape)}")
        ctx.save_for_backward(x, w)
        return dilated_conv3(x, w)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        n = x.shape[-1]
        xp = F.pad(x, (DIL, DIL))
        dw = torch.stack([(g * xp[..., k * DIL:k * DIL + n]).sum() for k in range(3)])
        gp = F.pad(g, (DIL, DIL))
        if cls.accumulate:
            dx = w[0] * gp[..., 2 * DIL:] + w[1] * g + w[2] * gp[..., :n]
            return dx, dw
        dx = torch.zeros_like(x)
        pos = torch.arange(n)
        for k in (1, 0, 2):                       # the three stores, in the kernel's order
            dst = pos + (k - 1) * DIL
            ok = (dst >= 0) & (dst < n)
            dx = dx.index_copy(-1, dst[ok], (w[k] * g)[..., ok])
        return dx, dw


class DilatedConv3Fixed(DilatedConv3):
    accumulate = True


def dilated_conv3(x: Tensor, w: Tensor) -> Tensor:
    n = x.shape[-1]
    xp = F.pad(x, (DIL, DIL))
    return sum(w[k] * xp[..., k * DIL:k * DIL + n] for k in range(3))


# --- Liger-Kernel PR 950: RMSNorm's weight gradient reduced in the input's precision -----

RMS_EPS = 1e-6
LOW = (torch.float16, torch.bfloat16)


def rms_norm(x: Tensor, w: Tensor) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


def rms_norm_ref(x: Tensor, w: Tensor) -> Tensor:
    """rms_norm computed in float32 for a half-precision input, as the kernel does."""
    if x.dtype in LOW:
        return rms_norm(x.float(), w.float()).to(x.dtype)
    return rms_norm(x, w)


def tree_sum_rows(t: Tensor) -> Tensor:
    """Rows summed pairwise with every addition rounded to t's dtype (a tl.sum in bf16)."""
    while t.shape[0] > 1:
        if t.shape[0] % 2:
            t = torch.cat([t, t.new_zeros(1, *t.shape[1:])])
        t = t[0::2] + t[1::2]
    return t[0]


class RMSNorm(Function):
    """RMSNorm over the last dim; BROKEN: the weight gradient's reduction over rows runs in
    the input's dtype (bfloat16 or float16 loses it), not in float32."""

    fp32_acc = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return rms_norm_ref(x, w)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        xf, wf, gf = (t.float() if t.dtype in LOW else t for t in (x, w, g))
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
        xhat = xf * rstd
        gw = gf * wf
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        rows = (gf * xhat).reshape(-1, x.shape[-1])
        if x.dtype in LOW and not cls.fp32_acc:     # each row's term rounded, then summed
            return dx.to(x.dtype), tree_sum_rows(rows.to(x.dtype)).to(w.dtype)
        return dx.to(x.dtype), rows.sum(0).to(w.dtype)


class RMSNormFixed(RMSNorm):
    fp32_acc = True



# --- triton #5660: the fused-attention tutorial's backward walks the causal blocks only ---

def masked_scores(q: Tensor, k: Tensor, causal: bool, scale: float) -> Tensor:
    s = q @ k.T * scale
    if causal:
        above = torch.ones(s.shape, dtype=torch.bool).triu(1)
        s = s.masked_fill(above, float("-inf"))
    return s


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> Tensor:
    return masked_scores(q, k, causal, scale).softmax(-1) @ v


class FusedAttention(Function):
    """softmax(q k^T * scale, causal or not) v; BROKEN: backward recomputes the scores with
    the causal mask whatever `causal` says (its block loop stops at the diagonal)."""

    honours_flag = False

    @classmethod
    def forward(cls, ctx: Any, q: Tensor, k: Tensor, v: Tensor, causal: bool,
                scale: float) -> Tensor:
        out = attention(q, k, v, causal, scale)
        ctx.save_for_backward(q, k, v, out)
        ctx.args = (causal, scale)
        return out

    @classmethod
    def backward(cls, ctx: Any, do: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        q, k, v, out = ctx.saved_tensors
        causal, scale = ctx.args
        lse = masked_scores(q, k, causal, scale).logsumexp(-1, keepdim=True)
        p = (masked_scores(q, k, causal or not cls.honours_flag, scale) - lse).exp()
        dp = do @ v.T
        ds = p * (dp - (do * out).sum(-1, keepdim=True))
        return ds @ k * scale, ds.T @ q * scale, p.T @ do, None, None


class FusedAttentionFixed(FusedAttention):
    honours_flag = True



def heads_smallest() -> list[Any]:
    return [rand(2, 3)]


def segment_smallest() -> list[Any]:
    return [rand(1, 1), ids(0, 1)]


def linear_smallest() -> list[Any]:
    return [rand(2, 1, grad=False), rand(1, seed=1)]


def ce_ref(logits: Tensor, target: Tensor, reduction: str) -> Tensor:
    return F.cross_entropy(logits, target, reduction=reduction)


def linear_ref(x: Tensor, w: Tensor) -> Tensor:
    return x @ w


ENTRIES = (
    Entry("flaggems5212-mse-scalar-grad", "flagos-ai/FlagGems", "issue 5212",
          f"{GH}/flagos-ai/FlagGems/issues/5212", "grad_output_broadcast",
          "reduction='mean' (the default): a 0-dim grad_output read as one value per element",
          "x [2], t [2]", mse_loss_flat, mse_loss,
          lambda: [rand(3, 4), rand(3, 4, seed=1, grad=False)],
          lambda x, t: F.mse_loss(x, t),
          smallest_inputs=lambda: [rand(2), rand(2, seed=1, grad=False)],
          note="flag_gems' aten override modelled as a torch.library custom op with "
               "register_autograd; the memory past grad_output's one value read as zeros"),
    Entry("aprender2182-ce-reduction", "paiml/aprender", "PR 2182",
          f"{GH}/paiml/aprender/pull/2182", "reduction",
          "reduction='sum' or 'none': backward still divides by the batch, reads grad_output[0]",
          "logits [2,2], target [2], reduction 'sum'", CrossEntropy, CrossEntropyFixed,
          lambda: [rand(3, 4), ids(1, 0, 3), "mean"], ce_ref,
          smallest_inputs=lambda: [rand(2, 2), ids(0, 1), "sum"],
          note="aprender's Rust CrossEntropyBackward modelled as a torch Function"),
    Entry("gsplat623-camera-offset", "nerfstudio-project/gsplat", "issue 623",
          f"{GH}/nerfstudio-project/gsplat/issues/623", "batch_handling",
          "more than one camera: backward reads camera 0's rendered colour for every camera",
          "c [2,1], a [2,1]", Composite, CompositeFixed,
          lambda: [rand(3, 4, low=0.0), rand(3, 4, seed=1, low=0.1, high=0.9)], composite,
          smallest_inputs=lambda: [rand(2, 1, low=0.0), rand(2, 1, seed=1, low=0.1, high=0.9)],
          note="2DGS rasterisation reduced to front-to-back compositing of one pixel per "
               "camera, one colour channel"),
    Entry("joeyan35-skipped-last-splat", "joeyan/gaussian_splatting", "issue 35",
          f"{GH}/joeyan/gaussian_splatting/issues/35", "threshold_skip",
          "a skipped splat (alpha < 1/255) after a pixel's last contributing one",
          "c [1,2], a [1,2] = [0.5, 0.001]", SkipComposite, SkipCompositeFixed,
          lambda: [rand(3, 4, low=0.0), rand(3, 4, seed=1, low=0.1, high=0.9)],
          skip_composite,
          smallest_inputs=lambda: [rand(1, 2, low=0.0), vals(0.5, 0.001)[None]],
          note="the CUDA renderer reduced to one pixel per row, one colour channel"),
    Entry("vision2438-roialign-clamp", "pytorch/vision", "PR 2438",
          f"{GH}/pytorch/vision/pull/2438", "forward_backward_mismatch",
          "an RoI narrower than one pixel: backward clamps its width where forward does not",
          "x [1,2], roi [0.2, 0.6], bins 1, aligned", RoIAlign1d, RoIAlign1dFixed,
          lambda: [rand(2, 8), torch.tensor([1.0, 5.0], dtype=F64), 2, True], roi_align_ref,
          smallest_inputs=lambda: [rand(1, 2), torch.tensor([0.2, 0.6], dtype=F64), 1, True],
          note="RoIAlign reduced to rows of 1-D features, one sampling point per bin"),
    Entry("unsloth5002-ce-writes-logits", "unslothai/unsloth", "issue 5002",
          f"{GH}/unslothai/unsloth/issues/5002", "inplace_saved",
          "logits another op saved (a second loss head, an upstream op's output): backward "
          "overwrites them", "logits [1,2] = an exp's output, labels [1]",
          CEWritesLogits, CEOutOfPlace, lambda: [rand(3, 4), ids(1, 0, 3)],
          lambda logits, labels: F.cross_entropy(logits, labels),
          smallest_inputs=lambda: [rand(1, 2), ids(1)], nonleaf="exp"),
    Entry("unsloth10616-softcap-pad", "unslothai/unsloth", "PR 10616",
          f"{GH}/unslothai/unsloth/pull/10616", "tail_tile",
          "a vocabulary that is no power of two, with softcapping: pad lanes carry probability",
          "logits [1,3], labels [1]", SoftcapCE, SoftcapCEFixed,
          lambda: [rand(2, 8), ids(1, 5)], softcap_ce_ref,
          smallest_inputs=lambda: [rand(1, 3), ids(0)]),
    Entry("scatter299-segment-no-hessian", "rusty1s/pytorch_scatter", "issue 299",
          f"{GH}/rusty1s/pytorch_scatter/issues/299", "second_order_unlinked",
          f"{SO}: backward's gather has no graph, the second derivative is empty",
          "src [1,1], ptr [0, 1]", SegmentSum, SegmentSumFixed,
          lambda: [rand(5, 2), ids(0, 2, 5)], segment_sum_ref,
          smallest_inputs=segment_smallest,
          demo=through_grad_output(segment_sum_ref, segment_smallest)),
    Entry("dgl1864-umulv-no-double-backward", "dmlc/dgl", "PR 1864",
          f"{GH}/dmlc/dgl/pull/1864", "second_order_unlinked",
          "second order (a loss on x.grad): backward's result has no graph, it raises",
          "x [1,1], src [0], dst [0]", UMulV, UMulVFixed,
          lambda: [rand(3, 4), ids(0, 1, 2), ids(1, 2, 0)], lambda x, s, d: x[s] * x[d],
          smallest_inputs=lambda: [rand(1, 1), ids(0), ids(0)], order=2,
          note="DGL's message-passing kernels modelled as u_mul_v with index_add"),
    Entry("sphericart61-gradgrad-grad-out", "lab-cosmo/sphericart", "PR 61",
          f"{GH}/lab-cosmo/sphericart/pull/61", "second_order_grad_output",
          f"{SO}: the backward op returns no gradient for grad_output",
          "xyz [2,3]", Harmonics, HarmonicsFixed, lambda: [rand(4, 3)], harmonics,
          smallest_inputs=heads_smallest, demo=through_grad_output(harmonics, heads_smallest),
          note="spherical harmonics reduced to four degree-2 polynomials"),
    Entry("cueq264-packed-bwd-bwd", "NVIDIA/cuEquivariance", "issue 264",
          f"{GH}/NVIDIA/cuEquivariance/issues/264", "needs_input_grad",
          f"{SO} with one operand not requiring grad: packed gradients unpacked by position",
          "x [2,1] (no grad), w [1]", Linear, LinearFixed,
          lambda: [rand(3, 4), rand(4, seed=1)], linear_ref,
          smallest_inputs=linear_smallest, demo=through_grad_output(linear_ref, linear_smallest),
          note="the fused tensor product reduced to x @ w with the same packed backward op"),
    Entry("pt120582-allgather-noncontig", "pytorch/pytorch", "PR 120582",
          f"{GH}/pytorch/pytorch/pull/120582", "grad_output_layout",
          "a non-contiguous grad_output: the collective returns a new buffer, backward the "
          "untouched one", "x [2,2]; grad_output transposed", AllGather, AllGatherFixed,
          lambda: [rand(3, 4)], lambda x: (x.clone(), x.clone()),
          smallest_inputs=lambda: [rand(2, 2)], grad_kind="transposed",
          note="all_gather over two ranks modelled in one process (both ranks hold x); "
               "empty_like's uninitialised buffer as zeros"),
    Entry("fla649-decay-exp-overflow", "fla-org/flash-linear-attention", "PR 649",
          f"{GH}/fla-org/flash-linear-attention/pull/649", "magnitude",
          "a cumulative log-decay below about -709 (float32: -88): exp(-G) overflows to NaN",
          "k [1], g [1] = [-800]", DecayScan, DecayScanFixed,
          lambda: [rand(2, 5), rand(2, 5, seed=1, low=-1.0, high=0.0)], decay_scan_ref,
          smallest_inputs=lambda: [rand(1), vals(-800.0)],
          note="the chunked gated linear attention reduced to a scalar decayed scan"),
    Entry("pyg6635-gcn-norm-detached", "pyg-team/pytorch_geometric", "PR 6635",
          f"{GH}/pyg-team/pytorch_geometric/pull/6635", "missing_gradient",
          "edge weights given through a torch sparse adjacency: _values() is detached",
          "edge_index [2,1], edge_weight [1], n 1", gcn_norm_detached, gcn_norm,
          lambda: [ids(0, 0, 1, 2, 1, 2, 2, 0).view(2, 4), rand(4, low=0.5, high=1.5), 3],
          gcn_norm_ref,
          smallest_inputs=lambda: [ids(0, 0).view(2, 1), rand(1, low=0.5, high=1.5), 1]),
    Entry("mlx3633-select-jvp-packed", "ml-explore/mlx", "PR 3633",
          f"{GH}/ml-explore/mlx/pull/3633", "jvp_rule",
          "forward-mode AD (jvp, jacfwd) with one branch untraced: tangents read packed",
          "cond [2], a constant, b [2] traced", Select, SelectFixed,
          lambda: [rand(3, 4, grad=False) > 0, rand(3, 4), rand(3, 4, seed=1)], select_ref,
          demo=jvp_one_branch, note="mlx's C++ Select::jvp modelled as a torch Function's jvp"),
    Entry("pt99698-vmap-flatten", "pytorch/pytorch", "PR 99698",
          f"{GH}/pytorch/pytorch/pull/99698", "vmap",
          "torch.vmap with both arguments batched and queries of rank 2 or more per sample",
          "table [2,3], v [2,2,2] under vmap", LerpTable, LerpTableFixed,
          lambda: [rand(5), rand(3, 4, seed=1, low=0.0, high=4.0)], lerp_table,
          demo=vmap_both_batched,
          note="searchsorted's batch rule (not differentiable) carried over to a "
               "differentiable table interpolation with the same flatten"),
    Entry("cherimoya25-dx-overlapping-stores", "jmschrei/cherimoya", "issue 25",
          f"{GH}/jmschrei/cherimoya/issues/25", "overlapping_writes",
          "any input longer than the dilation: lanes' load-add-store sequences overwrite "
          "each other's dx", f"x [1,{DIL + 1}], w [3]", DilatedConv3, DilatedConv3Fixed,
          lambda: [rand(2, 8), rand(3, seed=1)], dilated_conv3,
          smallest_inputs=lambda: [rand(1, DIL + 1), rand(3, seed=1)],
          note="the Triton kernel's three load-add-store sequences modelled as three vector "
               "stores from one zero buffer (the last store wins)"),
    Entry("liger950-rmsnorm-bf16-dw", "linkedin/Liger-Kernel", "PR 950",
          f"{GH}/linkedin/Liger-Kernel/pull/950", "low_precision",
          "bfloat16 or float16 with many rows: the weight gradient is reduced in that dtype",
          "x [64,2] bfloat16, w [2]", RMSNorm, RMSNormFixed,
          lambda: [rand(3, 4), rand(4, seed=1, low=0.5, high=1.5)], rms_norm_ref,
          smallest_inputs=lambda: [rand(64, 2, dtype=torch.bfloat16),
                                   rand(2, seed=1, low=0.5, high=1.5, dtype=torch.bfloat16)],
          note="the block-wise Triton reduction (tl.sum over bf16) modelled as a pairwise sum "
               "rounded to bf16 at every addition"),
    Entry("triton5660-attention-bwd-causal", "triton-lang/triton", "issue 5660",
          f"{GH}/triton-lang/triton/issues/5660", "flag_ignored",
          "causal=False: backward still masks the scores above the diagonal",
          "q [2,1], k [2,1], v [2,1], causal False", FusedAttention, FusedAttentionFixed,
          lambda: [rand(4, 3), rand(4, 3, seed=1), rand(4, 3, seed=2), True, 0.5], attention,
          smallest_inputs=lambda: [rand(2, 1), rand(2, 1, seed=1), rand(2, 1, seed=2), False,
                                   0.5],
          note="the tutorial's blocked kernels modelled as dense matrices; the block loop "
               "that stops at the diagonal as the causal mask"),
)

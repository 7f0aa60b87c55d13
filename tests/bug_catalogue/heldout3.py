"""A third held-out batch: 16 real gradient bugs from 14 projects' trackers, chosen and
reproduced by a helper who had not read gradlab's checking code, and measured before any change
to gradlab (at 783476c): 7 caught at the defaults (a fail or error), 1 more warned, 7 with
--explore, 4 by gradcheck with gradgradcheck; benchmarks/catalogue/RESULTS.md has today's
figures.  Each follows base.py's
conventions: a broken Function written from the report's description, its correct twin (same
signature), a plain-autograd reference, an ordinary author's input (the trigger not built in),
and the smallest failing input the report implies.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import F64, Entry, ids, rand, vals, vjp

GH = "https://github.com"



def same_shape(*ts: Tensor) -> None:
    """The op's contract: its tensors share one shape (a kernel indexes them together)."""
    if len({tuple(t.shape) for t in ts}) != 1:
        raise ValueError(f"shapes differ: {[list(t.shape) for t in ts]}")


def flat_read(g: Tensor, offsets: Tensor) -> Tensor:
    """g's elements at these flat (row-major) offsets; zero past the end, as a kernel that
    reads beyond its buffer sees memory unrelated to it."""
    flat = g.contiguous().reshape(-1)
    inside = offsets < flat.numel()
    got = flat[offsets.clamp(max=max(flat.numel() - 1, 0))] if flat.numel() else \
        flat.new_zeros(offsets.shape)
    return torch.where(inside, got, got.new_zeros(()))


# --- returnn #1835: CTC gives an infeasible sequence softmax(logits) as its gradient ------

NEG = -1e30   # log(0) kept finite, so that no path of the recursion gives NaN gradients


def ctc_raw(logits: Tensor, targets: Tensor, in_lens: Tensor, tgt_lens: Tensor) -> Tensor:
    """Per-sequence CTC negative log-likelihood over logits [T, N, C] (blank 0) by the
    forward (alpha) recursion in plain autograd; about 1e30 where no alignment exists."""
    logp = logits.log_softmax(-1)
    out = []
    for n in range(logits.shape[1]):
        lab = [int(v) for v in targets[n, :int(tgt_lens[n])]]
        ext = [0]
        for v in lab:
            ext += [v, 0]
        skip = torch.tensor([s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]
                             for s in range(len(ext))])
        idx = torch.tensor(ext)
        neg = logp.new_full((len(ext),), NEG)
        alpha = torch.cat([logp[0, n, idx[:2]], neg[2:]])
        for t in range(1, int(in_lens[n])):
            a1 = torch.cat([neg[:1], alpha[:-1]])
            a2 = torch.where(skip, torch.cat([neg[:2], alpha[:-2]]), neg)
            alpha = torch.stack([alpha, a1, a2]).logsumexp(0) + logp[t, n, idx]
        out.append(-alpha[-2:].logsumexp(0))
    return torch.stack(out)


def ctc_ref(logits: Tensor, targets: Tensor, in_lens: Tensor, tgt_lens: Tensor) -> Tensor:
    """Per-sequence CTC loss (as F.ctc_loss with reduction='none', zero_infinity=True): a
    sequence with no valid alignment contributes loss 0 and no gradient."""
    raw = ctc_raw(logits, targets, in_lens, tgt_lens)
    return torch.where(raw > -NEG / 10, torch.zeros_like(raw), raw)


class CTCLoss(Function):
    """CTC loss on logits; the gradient is softmax(logits) minus the alignment posterior.
    BROKEN: a sequence with no valid alignment (a target longer than its input) has posterior
    0, so its gradient comes out as softmax(logits) although its loss is the constant 0."""

    masks_infeasible = False

    @classmethod
    def forward(cls, ctx: Any, logits: Tensor, targets: Tensor, in_lens: Tensor,
                tgt_lens: Tensor) -> Tensor:
        ctx.save_for_backward(logits, targets, in_lens, tgt_lens)
        return ctc_ref(logits, targets, in_lens, tgt_lens)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        logits, targets, in_lens, tgt_lens = ctx.saved_tensors
        (gl,) = vjp(lambda lg: ctc_ref(lg, targets, in_lens, tgt_lens), [logits], g)
        if not cls.masks_infeasible:
            raw = ctc_raw(logits.detach(), targets, in_lens, tgt_lens)
            bad = (raw > -NEG / 10).to(g.dtype)                     # [N]: no alignment
            frames = (torch.arange(logits.shape[0])[:, None] < in_lens[None, :]).to(g.dtype)
            gl = gl + logits.softmax(-1) * (g * bad)[None, :, None] * frames[..., None]
        return gl, None, None, None


class CTCLossFixed(CTCLoss):
    masks_infeasible = True


# --- SKaiNET #863: softmax backward skips the unsqueeze for a negative dim ----------------

def softmax_ref(x: Tensor, dim: int) -> Tensor:
    return x.softmax(dim)


class Softmax(Function):
    """softmax(x, dim); backward re-inserts the reduced dim of sum(g * y) before the
    broadcast. BROKEN: it does so only for dim >= 0, so for dim = -1 on a rank >= 2 input the
    row sums broadcast along the last axis (wrong values when it matches, else a crash)."""

    normalises_dim = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, dim: int) -> Tensor:
        y = x.softmax(dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        dim = ctx.dim
        if cls.normalises_dim and dim < 0:
            dim += y.dim()
        s = (g * y).sum(dim)
        if 0 <= dim <= s.dim():
            s = s.unsqueeze(dim)
        return y * (g - s), None


class SoftmaxFixed(Softmax):
    normalises_dim = True


# --- tiny-cuda-nn #25: SH encoding backward strides dL/dy by degree, not degree^2 ---------

C0, C1, C2, C3, C4 = (0.28209479177387814, 0.48860251190291987, 1.0925484305920792,
                      0.94617469575755997, 0.54627421529603959)


def sh_ref(d: Tensor, degree: int) -> Tensor:
    """Real spherical harmonics of directions d [N, 3] up to `degree` bands (1 to 3)."""
    if degree not in (1, 2, 3) or d.dim() != 2 or d.shape[-1] != 3:
        raise ValueError("degree 1 to 3 and directions [N, 3] only")
    x, y, z = d.unbind(-1)
    one = torch.ones_like(x)
    cols = [C0 * one]
    if degree >= 2:
        cols += [-C1 * y, C1 * z, -C1 * x]
    if degree >= 3:
        cols += [C2 * x * y, -C2 * y * z, C3 * z * z - 0.31539156525251999, -C2 * x * z,
                 C4 * (x * x - y * y)]
    return torch.stack(cols, -1)


def sh_jacobian(d: Tensor, degree: int) -> Tensor:
    """[N, degree^2, 3]: d sh_k / d (x, y, z)."""
    x, y, z = d.unbind(-1)
    o = torch.zeros_like(x)
    rows = [(o, o, o)]
    if degree >= 2:
        rows += [(o, -C1 + o, o), (o, o, C1 + o), (-C1 + o, o, o)]
    if degree >= 3:
        rows += [(C2 * y, C2 * x, o), (o, -C2 * z, -C2 * y), (o, o, 2 * C3 * z),
                 (-C2 * z, o, -C2 * x), (2 * C4 * x, -2 * C4 * y, o)]
    return torch.stack([torch.stack(r, -1) for r in rows], 1)


class SphericalHarmonics(Function):
    """SH encoding of directions [N, 3] with degree^2 outputs per row; backward reads row
    i's output gradients at flat offset i * stride. BROKEN: stride = degree (the number of
    bands) where degree^2 is the row pitch, right only for degree 1 or a single row."""

    squared = False

    @classmethod
    def forward(cls, ctx: Any, d: Tensor, degree: int) -> Tensor:
        ctx.save_for_backward(d)
        ctx.degree = degree
        return sh_ref(d, degree)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (d,) = ctx.saved_tensors
        deg = ctx.degree
        k = deg * deg
        stride = k if cls.squared else deg
        offs = torch.arange(d.shape[0])[:, None] * stride + torch.arange(k)[None, :]
        dy = flat_read(g, offs)
        return torch.einsum("nk,nkc->nc", dy, sh_jacobian(d, deg)), None


class SphericalHarmonicsFixed(SphericalHarmonics):
    squared = True


# --- gsplat PR 136: v_cov2d from v_conic misses the 0.5 on the off-diagonal ---------------

def conic_ref(cov: Tensor) -> Tensor:
    """(a, b, c) of a symmetric 2x2 covariance [[a, b], [b, c]] -> (A, B, C) of its inverse."""
    a, b, c = cov.unbind(-1)
    det = a * c - b * b
    return torch.stack([c / det, -b / det, a / det], -1)


def cov2d(n: int, seed: int = 0) -> Tensor:
    """n symmetric positive-definite 2x2 covariances as (a, b, c) rows, requiring grad."""
    a = rand(n, seed=seed, low=1.0, high=2.0, grad=False)
    c = rand(n, seed=seed + 1, low=1.0, high=2.0, grad=False)
    b = rand(n, seed=seed + 2, low=-0.5, high=0.5, grad=False)
    return torch.stack([a, b, c], -1).requires_grad_()


class Conic(Function):
    """The conic (inverse) of a 2D covariance; backward forms dL/dM = -M^-1 G M^-1 with G the
    conic gradient as a symmetric matrix, whose off-diagonal entries must each carry half of
    the gradient of the one stored B. BROKEN: each carries all of it."""

    half = False

    @classmethod
    def forward(cls, ctx: Any, cov: Tensor) -> Tensor:
        out = conic_ref(cov)
        ctx.save_for_backward(out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (q,) = ctx.saved_tensors
        big_a, big_b, big_c = q.unbind(-1)
        ga, gb, gc = g.unbind(-1)
        s = 0.5 if cls.half else 1.0
        inv = torch.stack([torch.stack([big_a, big_b], -1), torch.stack([big_b, big_c], -1)], -2)
        gm = torch.stack([torch.stack([ga, s * gb], -1), torch.stack([s * gb, gc], -1)], -2)
        dm = -inv @ gm @ inv
        return torch.stack([dm[..., 0, 0], dm[..., 0, 1] + dm[..., 1, 0], dm[..., 1, 1]], -1)


class ConicFixed(Conic):
    half = True


# --- LichtFeld-Studio PR 2057: a compact per-visible helper read at the full index --------

def visible_ref(x: Tensor, q: Tensor) -> Tensor:
    same_shape(x, q)
    return torch.where(x > 0, x * torch.sin(q), torch.zeros_like(x))


class VisibleRotation(Function):
    """Per-primitive output x * sin(q) for visible primitives (x > 0), zero for culled ones;
    backward first fills a helper with one row per VISIBLE primitive (compact index), then
    scatters it to the rotations. BROKEN: the scatter reads the helper at each primitive's
    full index, right only while no culled primitive precedes a visible one."""

    compact = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, q: Tensor) -> Tensor:
        ctx.save_for_backward(x, q)
        return visible_ref(x, q)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, q = ctx.saved_tensors
        vis = x > 0
        idx = vis.nonzero()[:, 0]
        helper = (g * x * torch.cos(q))[idx]                       # n_visible rows
        read = helper if cls.compact else flat_read(helper, idx)
        dq = torch.zeros_like(q).index_put((idx,), read)
        dx = torch.where(vis, g * torch.sin(q), torch.zeros_like(g))
        return dx, dq


class VisibleRotationFixed(VisibleRotation):
    compact = True


# --- pytorch #100793: reflect-pad backward loads the centre unmasked for negative padding -

def reflect_ref(x: Tensor, left: int, right: int) -> Tensor:
    return F.pad(x, (left, right), mode="reflect")


class ReflectPad1d(Function):
    """Reflection padding of rows [N, L] by (left, right), either possibly negative (a crop).
    Backward gathers, per input position i, the centre g[i + left] and the reflected
    positions. BROKEN: the centre load is not masked, so with a negative pad an input that was
    cropped away reads g at an index outside the output (wrapping, as an unchecked index does)."""

    masked = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, left: int, right: int) -> Tensor:
        ctx.args = (x.shape[-1], left, right)
        return reflect_ref(x, left, right)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        length, left, right = ctx.args
        n_out = g.shape[-1]
        i = torch.arange(length)
        last = length - 1
        centre = i + left
        ok = (centre >= 0) & (centre <= n_out - 1)
        load = g[..., centre % n_out] if n_out else g.new_zeros(*g.shape[:-1], length)
        gi = torch.where(ok, load, 0.0) if cls.masked else load
        lmask = (i >= 1) & (i <= left)                     # reflected at the left edge
        lsrc = (left - i).clamp(0, max(n_out - 1, 0))
        gi = gi + torch.where(lmask, g[..., lsrc], 0.0)
        rmask = (i >= last - right) & (i <= last - 1)      # reflected at the right edge
        rsrc = (2 * last + left - i).clamp(0, max(n_out - 1, 0))
        gi = gi + torch.where(rmask, g[..., rsrc], 0.0)
        return gi, None, None


class ReflectPad1dFixed(ReflectPad1d):
    masked = True


# --- jvp_flash_attention #13: backward asserts seq_len % 32 == 0, forward does not --------

def attention_ref(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return s.softmax(-1) @ v


class Attention(Function):
    """Softmax attention [B, N, D]; forward masks its blocks and takes any N. BROKEN: backward
    asserts N is a multiple of its smallest block (32)."""

    any_length = False

    @classmethod
    def forward(cls, ctx: Any, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        ctx.save_for_backward(q, k, v)
        return attention_ref(q, k, v)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, ...]:
        q, k, v = ctx.saved_tensors
        if not cls.any_length:
            assert q.shape[-2] % 32 == 0, "N_CTX must be divisible by BLOCK_MIN=32"
        return vjp(attention_ref, [q, k, v], g)


class AttentionFixed(Attention):
    any_length = True


# --- Paddle PR 74716: RoPE backward applies sin after rotate_half, not before --------------

def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, -1)
    return torch.cat([-x2, x1], -1)


def rope_ref(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return x * cos + rotate_half(x) * sin


def rope_tables(n: int, dim: int) -> tuple[Tensor, Tensor]:
    """Standard RoPE tables: angles pos * 10000^(-2i/dim), repeated for both halves."""
    inv = 10000.0 ** (-torch.arange(0, dim, 2, dtype=F64) / dim)
    ang = torch.arange(n, dtype=F64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], -1)
    return ang.cos(), ang.sin()


class Rope(Function):
    """Rotary embedding x*cos + rotate_half(x)*sin with given tables; the input gradient is
    g*cos - rotate_half(g*sin). BROKEN: g*cos - rotate_half(g)*sin, which agrees only when
    sin's two halves are equal (as the standard tables are)."""

    sin_first = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        ctx.save_for_backward(cos, sin)
        return rope_ref(x, cos, sin)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        cos, sin = ctx.saved_tensors
        rot = rotate_half(g * sin) if cls.sin_first else rotate_half(g) * sin
        return g * cos - rot, None, None


class RopeFixed(Rope):
    sin_first = True


# --- jax #22398: logsumexp's gradient w.r.t. b is 0 where b == 0 ---------------------------

def lse_b_ref(a: Tensor, b: Tensor) -> Tensor:
    same_shape(a, b)
    return torch.log((b * a.exp()).sum(-1))


class LogSumExpB(Function):
    """log(sum(b * exp(a))) over the last dim. BROKEN: like jax's, it first sets a to -inf
    where b == 0 (so those terms drop out of the sum), which also zeroes d/db there."""

    keeps_a = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        same_shape(a, b)
        a_eff = a if cls.keeps_a else torch.where(b != 0, a, float("-inf"))
        amax = a_eff.amax(-1, keepdim=True).detach().clamp(min=-1e300)
        out = torch.log((b * (a_eff - amax).exp()).sum(-1)) + amax[..., 0]
        ctx.save_for_backward(a, b, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b, out = ctx.saved_tensors
        a_eff = a if cls.keeps_a else torch.where(b != 0, a, float("-inf"))
        w = (a_eff - out[..., None]).exp()
        return g[..., None] * b * w, g[..., None] * w


class LogSumExpBFixed(LogSumExpB):
    keeps_a = True


# --- jax #40628: i0's derivative at 0 is 1 instead of 0 ----------------------------------

class BesselI0(Function):
    """I0(x) computed as exp(|x|) * i0e(x); the derivative adds d|x|/dx * exp(|x|) * i0e and
    exp(|x|) * (i1e - sign(x) * i0e). BROKEN: the first term takes |x|'s slope at 0 as 1 while
    the second takes sign(0) = 0, so at x = 0 they do not cancel (1 instead of I1(0) = 0)."""

    one_slope = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.abs().exp() * torch.special.i0e(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        e = x.abs().exp()
        i0e, i1e = torch.special.i0e(x), torch.special.i1e(x)
        sign = torch.sign(x)
        slope = sign if cls.one_slope else torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
        return g * (slope * e * i0e + e * (i1e - sign * i0e))


class BesselI0Fixed(BesselI0):
    one_slope = True


# --- flash-linear-attention #1140: short chunk's final-state gradient shifted -------------

def conv_state_ref(x: Tensor, w: Tensor, h0: Tensor) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv of x [D, T] with w [D, W] after an initial state h0 [D, W-1]:
    y[:, t] = sum_k w[:, k] z[:, t + k], z = cat(h0, x); the final state is z's last W-1."""
    if h0.shape[-1] != w.shape[-1] - 1 or not x.shape[0] == w.shape[0] == h0.shape[0]:
        raise ValueError("h0 must be [D, W-1] for x [D, T] and w [D, W]")
    z = torch.cat([h0, x], -1)
    t, wd = x.shape[-1], w.shape[-1]
    y = sum(w[:, k:k + 1] * z[:, k:k + t] for k in range(wd))
    return y, z[:, z.shape[-1] - (wd - 1):]


class ConvWithState(Function):
    """Causal conv returning (y, final_state). The final-state gradient dht goes back to the
    tokens in it: token t takes dht[t + W-1 - T]; initial-state slot i (i >= T) survives into
    final_state[i - T]. BROKEN: the slot comes from start = max(0, T - (W-1)), shifting every
    contribution when T < W-1, and the pass-through to the initial state is dropped."""

    unclamped = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, h0: Tensor) -> tuple[Tensor, Tensor]:
        ctx.save_for_backward(x, w, h0)
        return conv_state_ref(x, w, h0)

    @classmethod
    def backward(cls, ctx: Any, gy: Tensor, ght: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w, h0 = ctx.saved_tensors
        gx, gw, gh0 = vjp(lambda a, b, c: conv_state_ref(a, b, c)[0], [x, w, h0], gy)
        t, keep = x.shape[-1], w.shape[-1] - 1
        start = max(0, t - keep)
        extra_x = torch.zeros_like(x)
        for tok in range(start, t):
            slot = tok + keep - t if cls.unclamped else tok - start
            if 0 <= slot < keep:
                extra_x[:, tok] = ght[:, slot]
        extra_h = torch.zeros_like(h0)
        if cls.unclamped:
            for i in range(t, keep):
                extra_h[:, i] = ght[:, i - t]
        return gx + extra_x, gw, gh0 + extra_h


class ConvWithStateFixed(ConvWithState):
    unclamped = True


# --- pytorch #196949: MPS reflection_pad1d backward wrong past 65536, not a multiple ------

TILE = 65536


def reflect_sym_ref(x: Tensor, pad: int) -> Tensor:
    return F.pad(x, (pad, pad), mode="reflect")


class ReflectPadLong(Function):
    """Symmetric reflection padding of rows [N, L]. BROKEN (a grid sizing error, modelled):
    when L > 65536 and not a multiple of it, input positions from L mod 65536 on receive the
    gradient of the position L mod 65536 before them."""

    tiled_right = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, pad: int) -> Tensor:
        ctx.args = (x.shape[-1], pad)
        return reflect_sym_ref(x, pad)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        length, pad = ctx.args
        j = torch.arange(g.shape[-1]) - pad
        src = torch.where(j < 0, -j, torch.where(j > length - 1, 2 * (length - 1) - j, j))
        gi = g.new_zeros(*g.shape[:-1], length).index_add(-1, src, g)
        r = length % TILE
        if not cls.tiled_right and length > TILE and r:
            gi = torch.cat([gi[..., :r], gi[..., :length - r]], -1)
        return gi, None


class ReflectPadLongFixed(ReflectPadLong):
    tiled_right = True


# --- unsloth-zoo PR 776: per-step gradients scattered with the wrong batch stride ---------

def gated_ref(a: Tensor, k: Tensor) -> Tensor:
    """h_t = a_t * h_{t-1} + k_t over dim 1 of [B, T, D], h_{-1} = 0; returns all h."""
    same_shape(a, k)
    hs, h = [], torch.zeros_like(k[:, 0])
    for t in range(k.shape[1]):
        h = a[:, t] * h + k[:, t]
        hs.append(h)
    return torch.stack(hs, 1)


class GatedRecurrence(Function):
    """A gated linear recurrence; backward runs the reverse-time loop and adds each step's
    [B, D] gradients into dk[:, t] and da[:, t] with a scatter-add. BROKEN: the scatter reads
    the update's batch rows with the destination's batch stride (T*D, not D), right only for
    B = 1 (or T = 1)."""

    update_stride = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, k: Tensor) -> Tensor:
        h = gated_ref(a, k)
        ctx.save_for_backward(a, h)
        return h

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, h = ctx.saved_tensors
        b, t_len, d = h.shape
        da, dk = torch.zeros_like(a), torch.zeros_like(h)
        stride = d if cls.update_stride else t_len * d
        offs = torch.arange(b)[:, None] * stride + torch.arange(d)[None, :]
        dh = torch.zeros_like(h[:, 0])
        for t in reversed(range(t_len)):
            dh = g[:, t] + (a[:, t + 1] * dh if t + 1 < t_len else torch.zeros_like(dh))
            prev = h[:, t - 1] if t > 0 else torch.zeros_like(dh)
            dk[:, t] = dk[:, t] + flat_read(dh, offs)
            da[:, t] = da[:, t] + flat_read(dh * prev, offs)
        return da, dk


class GatedRecurrenceFixed(GatedRecurrence):
    update_stride = True


# --- FlagGems #5220: embedding_bag backward gives mode='max' the mean gradient -------------

def embbag_ref(indices: Tensor, weight: Tensor, offsets: Tensor, mode: str) -> Tensor:
    if indices.dim() != 1 or offsets.dim() != 1 or offsets.numel() == 0:
        # torch 2.13's embedding_bag segfaults on empty offsets: refuse them here
        raise ValueError("1-D indices and at least one offset")
    return F.embedding_bag(indices, weight, offsets, mode=mode)


class EmbeddingBag(Function):
    """Bags of embedding rows reduced by sum, mean or max. BROKEN: backward has two arms, sum
    as is and everything else divided by the bag size, so max (whose gradient belongs to the
    row that won each feature) gets the mean's."""

    has_max = False

    @classmethod
    def forward(cls, ctx: Any, indices: Tensor, weight: Tensor, offsets: Tensor,
                mode: str) -> Tensor:
        ctx.save_for_backward(indices, weight, offsets)
        ctx.mode = mode
        return embbag_ref(indices, weight, offsets, mode)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[None, Tensor, None, None]:
        indices, weight, offsets = ctx.saved_tensors
        ends = [*offsets.tolist()[1:], indices.numel()]
        gw = torch.zeros_like(weight)
        for b, (s, e) in enumerate(zip(offsets.tolist(), ends, strict=True)):
            rows = indices[s:e]
            if rows.numel() == 0:
                continue
            if ctx.mode == "sum":
                gw = gw.index_add(0, rows, g[b].expand(rows.numel(), -1))
            elif ctx.mode == "max" and cls.has_max:
                win = rows[weight[rows].argmax(0)]                   # [D] winning row
                gw = gw.index_put((win, torch.arange(weight.shape[1])), g[b], accumulate=True)
            else:
                gw = gw.index_add(0, rows, (g[b] / rows.numel()).expand(rows.numel(), -1))
        return None, gw, None, None


class EmbeddingBagFixed(EmbeddingBag):
    has_max = True


# --- apache/tvm PR 7340: tanh's gradient written grad * 1 - y * y -------------------------

class Tanh(Function):
    """tanh(x). BROKEN: backward is g * 1 - y * y (missing parentheses), right only where
    grad_output is exactly 1."""

    parenthesised = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) if cls.parenthesised else g * 1 - y * y


class TanhFixed(Tanh):
    parenthesised = True


# --- flash-attention PR 569: ApplyRotaryEmbQKV_ backward names an undefined variable ------

def rotary_qkv_ref(qkv: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """qkv [N, 3, D]: rotate q and k (non-interleaved halves) by the tables [N, D/2]."""
    def rot(x: Tensor) -> Tensor:
        x1, x2 = x.chunk(2, -1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    q, k, v = qkv.unbind(1)                 # exactly three: q, k and v
    return torch.stack([rot(q), rot(k), v], 1)


class RotaryQKV(Function):
    """Rotary embedding applied to q and k of a packed qkv; backward rotates the gradient
    back (sin negated). BROKEN: backward reads a name that only exists as ctx.interleaved, so
    every backward raises NameError."""

    reads_ctx = False

    @classmethod
    def forward(cls, ctx: Any, qkv: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = False
        return rotary_qkv_ref(qkv, cos, sin)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        cos, sin = ctx.saved_tensors
        if not cls.reads_ctx:   # the backward names `interleaved`, defined only on ctx
            raise NameError("name 'interleaved' is not defined")
        assert not ctx.interleaved
        return rotary_qkv_ref(g, cos, -sin), None, None


class RotaryQKVFixed(RotaryQKV):
    reads_ctx = True


# ------------------------------------------------------------------------------------------

def _rope_inputs() -> list[Any]:
    cos, sin = rope_tables(3, 8)
    return [rand(3, 8), cos, sin]


def _rotary_inputs() -> list[Any]:
    cos, sin = rope_tables(2, 4)
    return [rand(2, 3, 4), cos[:, :2], sin[:, :2]]


ENTRIES = (
    Entry("returnn1835-ctc-infeasible-softmax", "rwth-i6/returnn", "issue 1835",
          f"{GH}/rwth-i6/returnn/issues/1835", "infeasible_case",
          "a sequence with no valid alignment (a target longer than its input, or repeats "
          "with no room for a blank): loss 0 but gradient softmax(logits)",
          "logits [1,1,3], targets [[1,2]], input length 1, target length 2",
          CTCLoss, CTCLossFixed,
          lambda: [rand(5, 2, 4), torch.tensor([[1, 2], [3, 1]]), ids(5, 4), ids(2, 2)],
          ctc_ref,
          smallest_inputs=lambda: [rand(1, 1, 3), torch.tensor([[1, 2]]), ids(1), ids(2)],
          note="returnn's TF native_op.ctc_loss (Baum-Welch on -log_softmax) as a torch "
               "Function over logits, the loss by a plain-autograd alpha recursion (agrees "
               "with F.ctc_loss(zero_infinity=True)); the infeasible sequence's frames within "
               "its input length given softmax(logits) as the report measures"),
    Entry("skainet863-softmax-negative-dim", "SKaiNET-developers/SKaiNET", "issue 863",
          f"{GH}/SKaiNET-developers/SKaiNET/issues/863", "negative_dim",
          "a negative dim (softmax(dim=-1)) on an input of rank >= 2: the reduced dim is not "
          "re-inserted", "x [2,2], dim -1", Softmax, SoftmaxFixed,
          lambda: [rand(3, 4), 1], softmax_ref,
          smallest_inputs=lambda: [rand(2, 2), -1],
          note="the Kotlin gradient tape's broadcastToInput as a torch softmax Function; "
               "square inputs broadcast silently (wrong values), others crash as reported"),
    Entry("tcnn25-sh-backward-stride", "NVlabs/tiny-cuda-nn", "issue 25",
          f"{GH}/NVlabs/tiny-cuda-nn/issues/25", "row_stride",
          "degree >= 2 and more than one direction: row i reads dL/dy at i * degree",
          "d [2,3], degree 2", SphericalHarmonics, SphericalHarmonicsFixed,
          lambda: [rand(4, 3), 3], sh_ref,
          smallest_inputs=lambda: [rand(2, 3), 2],
          note="the SphericalHarmonics encoding's CUDA backward as a Function over raw "
               "directions (no [0,1] -> [-1,1] map), degrees 1 to 3; reads past the end of "
               "dL/dy come back as 0"),
    Entry("gsplat136-conic-offdiag-grad", "nerfstudio-project/gsplat", "PR 136",
          f"{GH}/nerfstudio-project/gsplat/pull/136", "symmetric_offdiag",
          "any conic gradient with a nonzero off-diagonal part: it is counted twice",
          "cov [1,3] = [2, 0, 1]", Conic, ConicFixed,
          lambda: [cov2d(3)], conic_ref,
          smallest_inputs=lambda: [torch.tensor([[2.0, 0.0, 1.0]], dtype=F64,
                                                requires_grad=True)],
          note="the cov2d -> conic step of gsplat's projection backward alone; PR 139's "
               "companion bug (an extra 0.5 in the rasterizer's v_conic.y) not modelled"),
    Entry("lichtfeld2057-compact-index", "MrNeRF/LichtFeld-Studio", "PR 2057",
          f"{GH}/MrNeRF/LichtFeld-Studio/pull/2057", "compact_index",
          "a culled primitive (x <= 0) ahead of a visible one: the compact helper is read at "
          "the full index", "x [2] = [-1, 1], q [2]", VisibleRotation, VisibleRotationFixed,
          lambda: [rand(6, low=0.5, high=2.0), rand(6, seed=1)], visible_ref,
          smallest_inputs=lambda: [vals(-1.0, 1.0), rand(2, seed=1)],
          note="the fastgs normal-gradient helper modelled as g * x * cos(q) per visible "
               "primitive, visibility as x > 0; rows past the visible count read 0"),
    Entry("pt100793-reflect-pad-negative", "pytorch/pytorch", "issue 100793",
          f"{GH}/pytorch/pytorch/issues/100793", "negative_padding",
          "a negative pad (a crop) on a side in reflect mode: the unmasked centre load "
          "gives cropped inputs a gradient", "x [1,2], pad (-1, 0)",
          ReflectPad1d, ReflectPad1dFixed,
          lambda: [rand(2, 6), 2, 1], reflect_ref,
          smallest_inputs=lambda: [rand(1, 2), -1, 0],
          note="inductor's reflection_pad backward decomposition in 1-D; the unmasked "
               "out-of-range load modelled as wrapping around the output"),
    Entry("jvpfa13-bwd-block-multiple", "amorehead/jvp_flash_attention", "issue 13",
          f"{GH}/amorehead/jvp_flash_attention/issues/13", "backward_precondition",
          "a sequence length not a multiple of 32: backward asserts while forward runs",
          "q, k, v [1,1,1]", Attention, AttentionFixed,
          lambda: [rand(1, 32, 4), rand(1, 32, 4, seed=1), rand(1, 32, 4, seed=2)],
          attention_ref,
          smallest_inputs=lambda: [rand(1, 1, 1), rand(1, 1, 1, seed=1),
                                   rand(1, 1, 1, seed=2)],
          note="the Triton kernels as plain softmax attention without heads; only the "
               "backward's assertion is modelled"),
    Entry("paddle74716-rope-sin-halves", "PaddlePaddle/Paddle", "PR 74716",
          f"{GH}/PaddlePaddle/Paddle/pull/74716", "operation_order",
          "sin tables whose two halves differ (any non-standard RoPE table): rotate_half(g) * "
          "sin where rotate_half(g * sin) is due", "x [1,2], cos [1,2], sin [1,2] = [0.1, 0.5]",
          Rope, RopeFixed, _rope_inputs, rope_ref,
          smallest_inputs=lambda: [rand(1, 2), torch.tensor([[1.0, 1.0]], dtype=F64),
                                   torch.tensor([[0.1, 0.5]], dtype=F64)],
          note="fused_rotary_position_embedding's rotate_half path as a Function over one "
               "tensor with given tables; the standard tables (equal halves) are what the "
               "old unit test used"),
    Entry("jax22398-logsumexp-b-zero", "jax-ml/jax", "issue 22398",
          f"{GH}/jax-ml/jax/issues/22398", "mask_kills_derivative",
          "an exact 0 in b: a set to -inf there, so d/db = 0 instead of exp(a - out)",
          "a [2] = [0, 0], b [2] = [1, 0]", LogSumExpB, LogSumExpBFixed,
          lambda: [rand(3, 4), rand(3, 4, seed=1, low=0.5, high=1.5)], lse_b_ref,
          smallest_inputs=lambda: [vals(0.0, 0.0), vals(1.0, 0.0)],
          note="jax.scipy.special.logsumexp(a, b=b) as a Function with a hand-written "
               "backward; the report shows it with jacfwd, the same masking gives reverse "
               "mode the same zero"),
    Entry("jax40628-i0-zero-slope", "jax-ml/jax", "issue 40628",
          f"{GH}/jax-ml/jax/issues/40628", "nonsmooth_decomposition",
          "x exactly 0: the two factors of exp(|x|) * i0e(x) take different slopes of |x|",
          "x [1] = [0]", BesselI0, BesselI0Fixed,
          lambda: [rand(3, 4)], torch.special.i0,
          smallest_inputs=lambda: [vals(0.0)],
          note="jax's i0 = exp(|x|) * i0e(x) with |x|'s derivative at 0 taken as 1 in one "
               "factor and sign(0) = 0 in i0e's rule; which rule gives which slope is a "
               "model of the measured result (1 at 0)"),
    Entry("fla1140-conv-short-chunk", "fla-org/flash-linear-attention", "issue 1140",
          f"{GH}/fla-org/flash-linear-attention/issues/1140", "clamped_offset",
          "a chunk shorter than W - 1 tokens with an initial and a final state: the "
          "final-state gradient lands W-1-T slots off and the initial state misses its share",
          "x [1,1], w [1,3], h0 [1,2]", ConvWithState, ConvWithStateFixed,
          lambda: [rand(2, 8), rand(2, 4, seed=1), rand(2, 3, seed=2)], conv_state_ref,
          smallest_inputs=lambda: [rand(1, 1), rand(1, 3, seed=1), rand(1, 2, seed=2)],
          note="causal_conv1d without batch, bias or activation, the final state holding the "
               "last W-1 positions of cat(initial_state, x)"),
    Entry("pt196949-reflect-pad-long", "pytorch/pytorch", "issue 196949",
          f"{GH}/pytorch/pytorch/issues/196949", "large_size_tiling",
          "a padded length over 65536 and not a multiple of it (MPS): positions from L mod "
          "65536 on get a shifted gradient", "x [1,65537], pad 1",
          ReflectPadLong, ReflectPadLongFixed,
          lambda: [rand(2, 10), 2], reflect_sym_ref,
          smallest_inputs=lambda: [rand(1, TILE + 1), 1],
          note="the MPS kernel's grid sizing error modelled as a shift by L mod 65536 from "
               "that index on; the report gives where the wrong values start, not what they "
               "are"),
    Entry("unslothzoo776-scatter-batch-stride", "unslothai/unsloth-zoo", "PR 776",
          f"{GH}/unslothai/unsloth-zoo/pull/776", "batch_stride",
          "batch > 1 (with T > 1): the per-step scatter-add reads batch rows past the first "
          "with the wrong stride", "a, k [2,2,1]", GatedRecurrence, GatedRecurrenceFixed,
          lambda: [rand(1, 4, 3, low=0.5, high=0.9), rand(1, 4, 3, seed=1)], gated_ref,
          smallest_inputs=lambda: [rand(2, 2, 1, low=0.5, high=0.9), rand(2, 2, 1, seed=1)],
          note="the gated-delta rule reduced to a gated linear recurrence; MLX 0.31.2's "
               "scatter-add stride error modelled as reading rows with the destination's "
               "batch stride, 0 past the update's end"),
    Entry("flaggems5220-embbag-max-as-mean", "flagos-ai/FlagGems", "issue 5220",
          f"{GH}/flagos-ai/FlagGems/issues/5220", "mode_ignored",
          "mode='max': backward divides by the bag size as for 'mean'",
          "indices [2] = [0, 1], weight [2,1], offsets [0], mode 'max'",
          EmbeddingBag, EmbeddingBagFixed,
          lambda: [ids(0, 2, 1, 3, 4), rand(5, 3), ids(0, 2), "mean"], embbag_ref,
          smallest_inputs=lambda: [ids(0, 1), rand(2, 1), ids(0), "max"],
          note="_embedding_bag_dense_backward's two-armed kernel as a Function over "
               "(indices, weight, offsets, mode) without per_sample_weights or padding_idx"),
    Entry("tvm7340-tanh-precedence", "apache/tvm", "PR 7340",
          f"{GH}/apache/tvm/pull/7340", "operator_precedence",
          "any grad_output other than exactly 1: g * 1 - y*y where g * (1 - y*y) is due",
          "x [1], grad_output 2", Tanh, TanhFixed,
          lambda: [rand(3, 4)], torch.tanh,
          smallest_inputs=lambda: [rand(1)],
          note="relay's registered tanh gradient as a Function; TVM's tests fed a grad_output "
               "of ones, which is why they passed"),
    Entry("fa569-rotary-qkv-nameerror", "Dao-AILab/flash-attention", "PR 569",
          f"{GH}/Dao-AILab/flash-attention/pull/569", "backward_raises",
          "any backward through the packed-QKV rotary Function: it reads an undefined name",
          "qkv [1,3,2], cos, sin [1,1]", RotaryQKV, RotaryQKVFixed,
          _rotary_inputs, rotary_qkv_ref,
          smallest_inputs=lambda: [rand(1, 3, 2), torch.ones(1, 1, dtype=F64),
                                   torch.zeros(1, 1, dtype=F64)],
          note="ApplyRotaryEmbQKV_ without heads, non-interleaved; the second error the PR "
               "fixes (a misspelt 'conjugate' keyword) is not modelled"),
)

"""A second held-out batch (session of 2026-11-29): 18 real gradient bugs from 10 projects'
trackers, chosen and reproduced by a helper who had not read gradlab's source, and measured
before any change to gradlab: 7 caught at the defaults, 11 with --explore, 4 by gradcheck with
gradgradcheck (benchmarks/catalogue/RESULTS.md has today's figures).  Each follows base.py's
conventions: a broken Function written from the report's description, its correct twin (same
signature), a plain-autograd reference, an ordinary author's input (the trigger not built in),
and the smallest failing input the report implies.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import F64, Entry, ids, needs, rand, vals

GH = "https://github.com"



# --- pytorch #55587: softplus backward tests the threshold on the output, not the input ---

def softplus_ref(x: Tensor, beta: float, threshold: float) -> Tensor:
    return F.softplus(x, beta, threshold)


class Softplus(Function):
    """softplus(x; beta, threshold), linear where x*beta > threshold; BROKEN: backward
    switches to the linear branch where output*beta > threshold (the saved output)."""

    on_input = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, beta: float, threshold: float) -> Tensor:
        out = torch.where(x * beta > threshold, x, torch.log1p(torch.exp(x * beta)) / beta)
        ctx.save_for_backward(x, out)
        ctx.args = (beta, threshold)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        x, out = ctx.saved_tensors
        beta, threshold = ctx.args
        z = torch.exp(out * beta)                   # = 1 + exp(beta x)
        linear = (x if cls.on_input else out) * beta > threshold
        return torch.where(linear, g, g * (z - 1) / z), None, None


class SoftplusFixed(Softplus):
    on_input = True


# --- pytorch #26302: embedding's CUDA backward gives the padding_idx row a gradient -------

def embedding_ref(idx: Tensor, w: Tensor, padding_idx: int) -> Tensor:
    return F.embedding(idx, w, padding_idx=padding_idx)


class Embedding(Function):
    """w[idx] with a padding row that must receive no gradient; BROKEN: backward
    accumulates into every row, padding_idx's included."""

    skip_pad = False

    @classmethod
    def forward(cls, ctx: Any, idx: Tensor, w: Tensor, padding_idx: int) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.n, ctx.pad = w.shape[0], padding_idx
        return w[idx]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[None, Tensor, None]:
        (idx,) = ctx.saved_tensors
        flat = idx.reshape(-1)
        rows = g.reshape(flat.numel(), -1)
        if cls.skip_pad:
            rows = rows * (flat != ctx.pad).to(rows.dtype)[:, None]
        gw = rows.new_zeros(ctx.n, rows.shape[1]).index_add(0, flat, rows)
        return None, gw, None


class EmbeddingFixed(Embedding):
    skip_pad = True


# --- pytorch #51430: conv weight gradient (nn.grad) wrong when groups > 1 ---------------

def conv1d_ref(x: Tensor, w: Tensor, groups: int) -> Tensor:
    return F.conv1d(x, w, groups=groups)


class GroupConv1d(Function):
    """conv1d(x, w, groups); BROKEN: the weight gradient correlates every output channel
    with the first group's input channels (right only for groups == 1)."""

    per_group = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, groups: int) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.groups = groups
        return F.conv1d(x, w, groups=groups)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        x, w = ctx.saved_tensors
        groups = ctx.groups
        gx = torch.nn.grad.conv1d_input(x.shape, w, g, groups=groups)
        cin, cout, k = w.shape[1], w.shape[0], w.shape[2]
        per_out = cout // groups
        gw = torch.zeros_like(w)
        for o in range(cout):
            grp = o // per_out if cls.per_group else 0
            xs = x[:, grp * cin:(grp + 1) * cin]          # [N, cin, L]
            win = xs.unfold(2, k, 1)                      # [N, cin, Lout, k]
            gw[o] = torch.einsum("nl,nclk->ck", g[:, o], win)
        return gx, gw, None


class GroupConv1dFixed(GroupConv1d):
    per_group = True


# --- burn PR 4466: max_pool2d_with_indices_backward uses dilation[0] for both dims --------

def _windows(h: int, w: int, kernel: tuple[int, int], dil: tuple[int, int]) -> Tensor:
    """[Ho, Wo, kh*kw] flat input positions of each stride-1 dilated window."""
    kh, kw = kernel
    dh, dw = dil
    ho, wo = h - dh * (kh - 1), w - dw * (kw - 1)
    oi = torch.arange(ho)[:, None, None, None]
    oj = torch.arange(wo)[None, :, None, None]
    ki = torch.arange(kh)[None, None, :, None]
    kj = torch.arange(kw)[None, None, None, :]
    return ((oi + dh * ki) * w + (oj + dw * kj)).reshape(ho, wo, kh * kw)


def max_pool_ref(x: Tensor, kernel: tuple[int, int], dil: tuple[int, int]) -> Tensor:
    return F.max_pool2d(x[None, None], kernel, stride=1, dilation=dil)[0, 0]


class MaxPool2d(Function):
    """Stride-1 dilated max pooling of a [H, W] map; BROKEN: backward rebuilds each
    window with dilation (d0, d0), so a saved argmax outside that window is dropped."""

    both_dims = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, kernel: tuple[int, int],
                dil: tuple[int, int]) -> Tensor:
        win = _windows(*x.shape, kernel, dil)
        vals_ = x.reshape(-1)[win]
        out, arg = vals_.max(-1)
        ctx.save_for_backward(win.gather(-1, arg[..., None])[..., 0])
        ctx.args = (x.shape, kernel, dil)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        (argpos,) = ctx.saved_tensors
        shape, kernel, dil = ctx.args
        used = dil if cls.both_dims else (dil[0], dil[0])
        ho, wo = argpos.shape
        kh, kw = kernel
        dh, dw = used
        oi = torch.arange(ho)[:, None, None, None]
        oj = torch.arange(wo)[None, :, None, None]
        ki = torch.arange(kh)[None, None, :, None]
        kj = torch.arange(kw)[None, None, None, :]
        rw = ((oi + dh * ki) * shape[1] + (oj + dw * kj)).reshape(ho, wo, kh * kw)
        inside = (rw == argpos[..., None]).any(-1)       # the index the kernel visits
        gx = g.new_zeros(shape[0] * shape[1])
        gx.index_add_(0, argpos.reshape(-1), (g * inside.to(g.dtype)).reshape(-1))
        return gx.reshape(shape), None, None


class MaxPool2dFixed(MaxPool2d):
    both_dims = True


# --- burn #5604: avg_pool backward divides an overhanging ceil_mode window by the kernel --

def avg_pool_ref(x: Tensor, k: int, s: int, ceil_mode: bool) -> Tensor:
    return F.avg_pool1d(x[:, None], k, s, 0, ceil_mode=ceil_mode, count_include_pad=True)[:, 0]


def _pool_windows(n: int, k: int, s: int, ceil_mode: bool) -> list[tuple[int, int]]:
    num = (n - k + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (num - 1) * s >= n:
        num -= 1
    return [(o * s, min(o * s + k, n)) for o in range(num)]


class AvgPool1d(Function):
    """Rows of x average-pooled (padding 0, count_include_pad); forward divides a window
    that ceil_mode lets overhang by its clipped size; BROKEN: backward by the kernel."""

    clipped = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, k: int, s: int, ceil_mode: bool) -> Tensor:
        wins = _pool_windows(x.shape[1], k, s, ceil_mode)
        ctx.args = (x.shape, k, wins)
        return torch.stack([x[:, a:b].sum(1) / (b - a) for a, b in wins], 1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        shape, k, wins = ctx.args
        gx = g.new_zeros(shape)
        for o, (a, b) in enumerate(wins):
            div = (b - a) if cls.clipped else k
            gx[:, a:b] += (g[:, o] / div)[:, None]
        return gx, None, None, None


class AvgPool1dFixed(AvgPool1d):
    clipped = True


# --- iree-turbine PR 1223: conv weight-gradient op built with stride and dilation swapped --

def conv_sd_ref(x: Tensor, w: Tensor, stride: int, dilation: int) -> Tensor:
    return F.conv1d(x, w, stride=stride, dilation=dilation)


def _conv_wgrad(x: Tensor, w: Tensor, g: Tensor, stride: int, dilation: int) -> Tensor:
    """dW[o, c, j] = sum_{n, t} g[n, o, t] x[n, c, t*stride + j*dilation] (where in range)."""
    gw = torch.zeros_like(w)
    for j in range(w.shape[2]):
        for t in range(g.shape[2]):
            pos = t * stride + j * dilation
            if pos < x.shape[2]:
                gw[:, :, j] += g[:, :, t].T @ x[:, :, pos]
    return gw


class StridedConv1d(Function):
    """conv1d(x, w, stride, dilation); BROKEN: the weight-gradient op is constructed with
    stride and dilation exchanged."""

    in_order = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, stride: int, dilation: int) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.args = (stride, dilation)
        return F.conv1d(x, w, stride=stride, dilation=dilation)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None, None]:
        x, w = ctx.saved_tensors
        stride, dilation = ctx.args
        gx = torch.nn.grad.conv1d_input(x.shape, w, g, stride=stride, dilation=dilation)
        s, d = (stride, dilation) if cls.in_order else (dilation, stride)
        return gx, _conv_wgrad(x, w, g, s, d), None, None


class StridedConv1dFixed(StridedConv1d):
    in_order = True


# --- Megatron-LM #7464: vocab-parallel label smoothing uses the local vocabulary ----------

def smoothed_ce_ref(logits: Tensor, target: Tensor, alpha: float, tp: int) -> Tensor:
    v = logits.shape[-1]
    logp = logits.log_softmax(-1)
    s = alpha * v / (v - 1)
    nll = -logp.gather(1, target[:, None])[:, 0]
    return (1 - s) * nll - s * logp.mean(-1)


class VocabParallelCE(Function):
    """Per-token label-smoothed cross-entropy with the vocabulary split over `tp` ranks
    (simulated in one process, the loss as rank 0 reports it); BROKEN: each rank uses its
    shard's size as the vocabulary size and its shard's mean log-probability."""

    global_vocab = False

    @classmethod
    def forward(cls, ctx: Any, logits: Tensor, target: Tensor, alpha: float,
                tp: int) -> Tensor:
        v = logits.shape[-1]
        logp = logits - logits.logsumexp(-1, keepdim=True)   # global normaliser (all-reduce)
        nll = -logp.gather(1, target[:, None])[:, 0]
        vl = v if cls.global_vocab else v // tp
        s = alpha * vl / (vl - 1)
        mean_logp = logp.mean(-1) if cls.global_vocab else logp[:, :vl].mean(-1)
        ctx.save_for_backward(logits, target)
        ctx.args = (alpha, tp)
        return (1 - s) * nll - s * mean_logp

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        logits, target = ctx.saved_tensors
        alpha, tp = ctx.args
        v = logits.shape[-1]
        vl = v if cls.global_vocab else v // tp
        s = alpha * vl / (vl - 1)
        grad = logits.softmax(-1) - s / vl
        grad = grad - (1 - s) * F.one_hot(target, v).to(grad.dtype)
        return grad * g[:, None], None, None, None


class VocabParallelCEFixed(VocabParallelCE):
    global_vocab = True


# --- adversarial-robustness-toolbox #992: LFilter's gradient estimated as the identity ----

def fir_ref(x: Tensor, b: tuple[float, ...]) -> Tensor:
    """Causal FIR filter along the last dim: y[n] = sum_k b[k] x[n - k]."""
    y = torch.zeros_like(x)
    for k, bk in enumerate(b):
        if k < x.shape[-1]:
            y = y + bk * F.pad(x, (k, 0))[..., :x.shape[-1]]
    return y


class FIRFilter(Function):
    """A causal FIR filter with fixed coefficients; BROKEN: backward passes grad_output
    through unchanged (identity BPDA), exact only for the identity filter."""

    adjoint = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, b: tuple[float, ...]) -> Tensor:
        ctx.b = b
        return fir_ref(x, b)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        if not cls.adjoint:
            return g.clone(), None
        n = g.shape[-1]
        gx = torch.zeros_like(g)
        for k, bk in enumerate(ctx.b):          # the adjoint: an anti-causal filter
            if k < n:
                gx = gx + bk * F.pad(g, (0, k))[..., k:]
        return gx, None


class FIRFilterFixed(FIRFilter):
    adjoint = True


# --- pytorch_wavelets #65: SFB1D computes both gradients only if the first is needed ------

def haar_synth(low: Tensor, high: Tensor) -> Tensor:
    """One-level Haar synthesis: interleave (l + h)/sqrt2 and (l - h)/sqrt2."""
    r = 1 / math.sqrt(2)
    return torch.stack([(low + high) * r, (low - high) * r], -1).flatten(-2)


class HaarSynthesis(Function):
    """Haar synthesis filter bank (low, high) -> signal; BROKEN: backward computes the
    gradients only when ctx.needs_input_grad[0] (low) is set, so high gets None when
    low does not require grad."""

    by_flag = False

    @classmethod
    def forward(cls, ctx: Any, low: Tensor, high: Tensor) -> Tensor:
        return haar_synth(low, high)

    @classmethod
    def backward(cls, ctx: Any, dy: Tensor) -> tuple[Tensor | None, Tensor | None]:
        r = 1 / math.sqrt(2)
        pairs = dy.unflatten(-1, (-1, 2))
        dlow = (pairs[..., 0] + pairs[..., 1]) * r
        dhigh = (pairs[..., 0] - pairs[..., 1]) * r
        if cls.by_flag:
            return (dlow if needs(ctx, 0) else None), (dhigh if needs(ctx, 1) else None)
        if needs(ctx, 0):
            return dlow, dhigh
        return None, None


class HaarSynthesisFixed(HaarSynthesis):
    by_flag = True


# --- jax #40625: sparse coo_matmat's data gradient ignores transpose=True -----------------

def coo_dense(data: Tensor, row: Tensor, col: Tensor, shape: tuple[int, int]) -> Tensor:
    return data.new_zeros(shape).index_put((row, col), data, accumulate=True)


def coo_matmat_ref(data: Tensor, row: Tensor, col: Tensor, b: Tensor,
                   shape: tuple[int, int], transpose: bool) -> Tensor:
    a = coo_dense(data, row, col, shape)
    return (a.T if transpose else a) @ b


class COOMatmat(Function):
    """A @ B (or A^T @ B) for a COO matrix A given by (data, row, col); BROKEN: the
    gradient w.r.t. data always contracts ct[row] with B[col], as if transpose=False."""

    honours_transpose = False

    @classmethod
    def forward(cls, ctx: Any, data: Tensor, row: Tensor, col: Tensor, b: Tensor,
                shape: tuple[int, int], transpose: bool) -> Tensor:
        ctx.save_for_backward(data, row, col, b)
        ctx.args = (shape, transpose)
        return coo_matmat_ref(data, row, col, b, shape, transpose)

    @classmethod
    def backward(cls, ctx: Any, ct: Tensor) -> tuple[Any, ...]:
        data, row, col, b = ctx.saved_tensors
        shape, transpose = ctx.args
        a = coo_dense(data, row, col, shape)
        gb = (a @ ct) if transpose else (a.T @ ct)
        if transpose and cls.honours_transpose:
            gdata = (ct[col] * b[row]).sum(-1)
        else:
            gdata = (ct[row] * b[col]).sum(-1)
        return gdata, None, None, gb, None, None


class COOMatmatFixed(COOMatmat):
    honours_transpose = True


# --- tensorflow-nufft #18: the gradient w.r.t. the points misses a complex conjugate ------

def _freqs(k: int) -> Tensor:
    return (torch.arange(k) - k // 2).to(F64)


def ndft_ref(c: Tensor, p: Tensor) -> Tensor:
    """Type-2 (uniform -> non-uniform) DFT: y_j = sum_k c_k exp(-i k p_j)."""
    k = _freqs(c.shape[-1])
    return (c.to(torch.complex128)[None, :] * torch.exp(-1j * k[None, :] * p[:, None])).sum(-1)


class NDFT(Function):
    """y_j = sum_k c_k exp(-i k p_j) for real coefficients c and real points p; BROKEN:
    the points' gradient multiplies by grad_output where its conjugate is due."""

    conj = False

    @classmethod
    def forward(cls, ctx: Any, c: Tensor, p: Tensor) -> Tensor:
        ctx.save_for_backward(c, p)
        return ndft_ref(c, p)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        c, p = ctx.saved_tensors
        k = _freqs(c.shape[-1])
        e = torch.exp(-1j * k[None, :] * p[:, None])          # [M, K]
        gc = (g[:, None].conj() * e).real.sum(0)               # Re(conj(g) dy/dc)
        dydp = (c[None, :] * (-1j) * k[None, :] * e).sum(-1)   # [M]
        gg = g.conj() if cls.conj else g
        gp = (gg * dydp).real
        return gc, gp


class NDFTFixed(NDFT):
    conj = True


# --- getkeops/keops PR 155: atan2's derivative had its two terms flipped -----------------

class Atan2(Function):
    """atan2(y, x); BROKEN: backward returns each argument the other's partial."""

    flipped = True

    @classmethod
    def forward(cls, ctx: Any, y: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(y, x)
        return torch.atan2(y, x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        y, x = ctx.saved_tensors
        r2 = x * x + y * y
        dy, dx = g * x / r2, -g * y / r2
        return (dx, dy) if cls.flipped else (dy, dx)


class Atan2Fixed(Atan2):
    flipped = False


# --- pytorch #38985: nearest downsampling's CUDA backward picks the wrong source pixel ----

def nearest_ref(x: Tensor, scale: float) -> Tensor:
    return F.interpolate(x[:, None], scale_factor=scale, mode="nearest")[:, 0]


class Nearest1d(Function):
    """Nearest resize of rows by scale_factor (src = floor(dst / scale)); BROKEN: when
    downsampling, backward sends each output's gradient to the LAST input pixel of its
    block instead of the one forward read (bottom-right instead of top-left)."""

    same_source = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, scale: float) -> Tensor:
        n = x.shape[1]
        out_n = math.floor(n * scale)
        src = torch.clamp(torch.floor(torch.arange(out_n, dtype=F64) / scale).long(),
                          max=n - 1)
        ctx.save_for_backward(src)
        ctx.args = (n, scale)
        return x[:, src]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (src,) = ctx.saved_tensors
        n, scale = ctx.args
        if scale < 1 and not cls.same_source:
            o = torch.arange(src.numel(), dtype=F64)
            src = torch.clamp(torch.floor((o + 1) / scale).long() - 1, max=n - 1)
        gx = g.new_zeros(g.shape[0], n).index_add(1, src, g)
        return gx, None


class Nearest1dFixed(Nearest1d):
    same_source = True


# --- jax #40626: scatter_max with mode='clip': out-of-bounds updates not counted ----------

def scatter_max_ref(operand: Tensor, idx: Tensor, upd: Tensor) -> Tensor:
    n = operand.shape[0]
    return operand.scatter_reduce(0, idx.clamp(0, n - 1), upd, "amax", include_self=True)


class ScatterMaxClip(Function):
    """out = operand with out[clip(idx_j)] = max(out, upd_j); the gradient shared among
    the tied maxima. BROKEN: the bookkeeping that counts each position's maxima uses the
    unclipped indices (out-of-bounds ones dropped), so a position won by a clipped update
    counts zero references and its gradients come out 0/0."""

    clip_all = False

    @classmethod
    def forward(cls, ctx: Any, operand: Tensor, idx: Tensor, upd: Tensor) -> Tensor:
        out = scatter_max_ref(operand, idx, upd)
        ctx.save_for_backward(operand, idx, upd, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, Tensor]:
        operand, idx, upd, out = ctx.saved_tensors
        n = operand.shape[0]
        clipped = idx.clamp(0, n - 1)
        book = clipped if cls.clip_all else idx
        valid = (book >= 0) & (book < n)
        safe = book.clamp(0, n - 1)
        op_hit = (operand == out).to(g.dtype)
        hit = (upd == out[clipped]).to(g.dtype)
        refs = op_hit + torch.zeros_like(op_hit).index_add(0, safe, hit * valid.to(g.dtype))
        g_op = g * op_hit / refs
        g_upd = g[clipped] * hit / refs[safe]
        return g_op, None, g_upd


class ScatterMaxClipFixed(ScatterMaxClip):
    clip_all = True


# --- FlagGems #5392: layer_norm_backward takes rows from input.shape[0] -------------------

LN_EPS = 1e-5


def layer_norm_ref(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.layer_norm(x, w.shape, w, b, LN_EPS)


class LayerNorm(Function):
    """layer_norm over the last dim (forward takes N from normalized_shape); BROKEN:
    backward views the input as [input.shape[0], rest], right only for 2-D inputs."""

    by_normalized_shape = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return layer_norm_ref(x, w, b)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        if x.numel() == 0:  # no rows to normalise (the model's own guard, not the report's)
            return torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(w)
        n = w.numel()
        m = x.numel() // n if cls.by_normalized_shape else x.shape[0]
        cols = x.numel() // m
        xv, gv = x.reshape(m, cols), g.reshape(m, cols)
        wv = w.repeat(cols // n) if cols % n == 0 else w
        mean = xv.mean(-1, keepdim=True)
        rstd = torch.rsqrt(xv.var(-1, unbiased=False, keepdim=True) + LN_EPS)
        xhat = (xv - mean) * rstd
        gw_ = gv * wv
        dx = rstd * (gw_ - gw_.mean(-1, keepdim=True) - xhat * (gw_ * xhat).mean(-1, keepdim=True))
        dw = (gv * xhat).reshape(-1, n).sum(0)
        db = gv.reshape(-1, n).sum(0)
        return dx.reshape(x.shape), dw, db


class LayerNormFixed(LayerNorm):
    by_normalized_shape = True


# --- pytorch PR 26637 (review): cummax's first backward mis-accumulated the running max ---

def cummax_ref(x: Tensor) -> Tensor:
    return torch.cummax(x, -1).values


class CumMax(Function):
    """Running maximum along the last dim; BROKEN: backward writes each output's gradient to
    its argmax with scatter (last write wins), so an element that stays the running max
    for several steps gets the gradient of one of them only."""

    accumulate = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        vals_, idx = torch.cummax(x, -1)
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return vals_

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (idx,) = ctx.saved_tensors
        zero = g.new_zeros(ctx.shape)
        if cls.accumulate:
            return zero.scatter_add(-1, idx, g)
        return zero.scatter(-1, idx, g)


class CumMaxFixed(CumMax):
    accumulate = True


# --- pytorch #23925: grid_sample 'border' gradient at the last pixel uses zero padding ----

def border_sample_ref(img: Tensor, pos: Tensor) -> Tensor:
    """Linear sampling of a 1-D image at pixel positions (align_corners), border padding."""
    n = img.shape[0]
    p = pos.clamp(0, n - 1)
    x0 = p.detach().floor().long().clamp(0, n - 1)
    x1 = (x0 + 1).clamp(max=n - 1)
    w = p - x0.to(p.dtype)
    return img[x0] * (1 - w) + img[x1] * w


class BorderSample(Function):
    """1-D grid_sample (bilinear reduced to linear, padding_mode='border'); BROKEN: the
    position's gradient reads the right neighbour with zero padding, so a point exactly
    on the last pixel gets -img[-1] instead of the border's 0."""

    border_grad = False

    @classmethod
    def forward(cls, ctx: Any, img: Tensor, pos: Tensor) -> Tensor:
        ctx.save_for_backward(img, pos)
        return border_sample_ref(img, pos)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        img, pos = ctx.saved_tensors
        n = img.shape[0]
        p = pos.clamp(0, n - 1)
        x0 = p.floor().long().clamp(0, n - 1)
        x1 = x0 + 1
        w = p - x0.to(p.dtype)
        x1c = x1.clamp(max=n - 1)
        gimg = torch.zeros_like(img).index_add(0, x0, g * (1 - w)).index_add(0, x1c, g * w)
        v1 = img[x1c] if cls.border_grad else torch.where(x1 < n, img[x1c], 0.0)
        inside = ((pos >= 0) & (pos <= n - 1)).to(g.dtype)
        return gimg, g * (v1 - img[x0]) * inside


class BorderSampleFixed(BorderSample):
    border_grad = True


# --- FlagGems #5218: upsample_linear1d_backward's window sized for align_corners=False -----

def upsample_weights(n_in: int, n_out: int, align_corners: bool) -> Tensor:
    """[n_out, n_in] linear-interpolation weights as F.interpolate(mode='linear') uses."""
    o = torch.arange(n_out, dtype=F64)
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = ((o + 0.5) * n_in / n_out - 0.5).clamp(min=0)
    x0 = src.floor().long().clamp(max=n_in - 1)
    x1 = (x0 + 1).clamp(max=n_in - 1)
    lam = src - x0.to(F64)
    w = torch.zeros(n_out, n_in, dtype=F64)
    w[torch.arange(n_out), x0] += 1 - lam
    w[torch.arange(n_out), x1] += lam
    return w


def upsample_ref(x: Tensor, size: int, align_corners: bool) -> Tensor:
    return F.interpolate(x[:, None], size=size, mode="linear", align_corners=align_corners)[:, 0]


class UpsampleLinear1d(Function):
    """Linear resize of rows to `size`; backward gathers, for each input pixel, the output
    positions in a window around it. BROKEN: with align_corners the window is sized from
    size / n_in (the align_corners=False stretch), so distant contributors are dropped."""

    ac_window = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, size: int, align_corners: bool) -> Tensor:
        ctx.args = (x.shape[1], size, align_corners)
        return x @ upsample_weights(x.shape[1], size, align_corners).T.to(x.dtype)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        n_in, n_out, ac = ctx.args
        w = upsample_weights(n_in, n_out, ac).to(g.dtype)
        if ac and n_in > 1:
            stretch = (n_out - 1) / (n_in - 1)
            half = (math.ceil(stretch) if cls.ac_window else n_out // n_in) + 2
            centre = torch.floor(torch.arange(n_in, dtype=F64) * stretch)
            o = torch.arange(n_out, dtype=F64)[:, None]
            w = w * ((o - centre[None, :]).abs() <= half).to(g.dtype)
        return g @ w, None, None


class UpsampleLinear1dFixed(UpsampleLinear1d):
    ac_window = True


# ------------------------------------------------------------------------------------------

ENTRIES = (
    Entry("pt55587-softplus-threshold-output", "pytorch/pytorch", "issue 55587",
          f"{GH}/pytorch/pytorch/issues/55587", "threshold_region",
          "x*beta <= threshold < softplus(x)*beta: backward takes the linear branch",
          "x [1] = [0.2736], beta 3, threshold 1", Softplus, SoftplusFixed,
          lambda: [rand(3, 4), 1.0, 20.0], softplus_ref,
          smallest_inputs=lambda: [vals(0.2736), 3.0, 1.0]),
    Entry("pt26302-embedding-padding-grad", "pytorch/pytorch", "issue 26302",
          f"{GH}/pytorch/pytorch/issues/26302", "padding_mask",
          "an index equal to padding_idx: its row receives the gradient",
          "idx [1] = [0], w [1,1], padding_idx 0", Embedding, EmbeddingFixed,
          lambda: [ids(1, 2, 4), rand(5, 3), 0], embedding_ref,
          smallest_inputs=lambda: [ids(0), rand(1, 1), 0],
          note="the CUDA embedding_backward kernel modelled as an index_add that does not "
               "skip padding_idx"),
    Entry("pt51430-conv-weight-groups", "pytorch/pytorch", "issue 51430",
          f"{GH}/pytorch/pytorch/issues/51430", "grouped_conv",
          "groups > 1: the weight gradient mixes up the groups' input channels",
          "x [1,2,1], w [2,1,1], groups 2", GroupConv1d, GroupConv1dFixed,
          lambda: [rand(2, 2, 5), rand(3, 2, 2, seed=1), 1], conv1d_ref,
          smallest_inputs=lambda: [rand(1, 2, 1), rand(2, 1, 1, seed=1), 2],
          note="nn.grad.conv2d_weight's groups>1 reshaping error modelled as every output "
               "channel correlated with group 0's input channels"),
    Entry("burn4466-maxpool-dilation", "tracel-ai/burn", "PR 4466",
          f"{GH}/tracel-ai/burn/pull/4466", "stride_dilation_arith",
          "dilation[0] != dilation[1]: backward rebuilds windows with dilation[0] twice",
          "x [1,3], kernel (1,2), dilation (1,2), max at column 2", MaxPool2d, MaxPool2dFixed,
          lambda: [rand(4, 5), (2, 2), (1, 1)], max_pool_ref,
          smallest_inputs=lambda: [torch.tensor([[0.1, 0.5, 0.9]], dtype=F64,
                                                requires_grad=True), (1, 2), (1, 2)],
          note="burn's max_pool2d_with_indices_backward (which scans the outputs whose "
               "window may hold each input) modelled as dropping a saved argmax that lies "
               "outside the window rebuilt with the wrong dilation"),
    Entry("burn5604-avgpool-ceil-divisor", "tracel-ai/burn", "issue 5604",
          f"{GH}/tracel-ai/burn/issues/5604", "padding_arith",
          "ceil_mode with a last window that overhangs the input: backward divides by k",
          "x [1,5], kernel 2, stride 2, ceil_mode", AvgPool1d, AvgPool1dFixed,
          lambda: [rand(3, 8), 2, 2, True], avg_pool_ref,
          smallest_inputs=lambda: [rand(1, 5), 2, 2, True],
          note="avg_pool2d reduced to 1-D rows with no explicit padding"),
    Entry("iree1223-conv-wgrad-swap", "iree-org/iree-turbine", "PR 1223",
          f"{GH}/iree-org/iree-turbine/pull/1223", "stride_dilation_arith",
          "stride != dilation: the weight gradient is built with the two exchanged",
          "x [1,1,3], w [1,1,2], stride 2, dilation 1", StridedConv1d, StridedConv1dFixed,
          lambda: [rand(2, 2, 8), rand(3, 2, 3, seed=1), 1, 1], conv_sd_ref,
          smallest_inputs=lambda: [rand(1, 1, 3), rand(1, 1, 2, seed=1), 2, 1],
          note="the custom ConvBackwardWeight op modelled as an explicit weight-gradient "
               "sum; a position past the input is skipped"),
    Entry("megatron7464-smoothing-local-vocab", "NVIDIA/Megatron-LM", "issue 7464",
          f"{GH}/NVIDIA/Megatron-LM/issues/7464", "sharded_reduction",
          "tensor parallel (tp > 1) with label_smoothing > 0: shard size and shard mean "
          "used as the vocabulary's", "logits [1,4], target [1], alpha 0.1, tp 2",
          VocabParallelCE, VocabParallelCEFixed,
          lambda: [rand(3, 8), ids(1, 5, 2), 0.1, 1], smoothed_ce_ref,
          smallest_inputs=lambda: [rand(1, 4), ids(0), 0.1, 2],
          note="the TP ranks simulated in one process; the loss as rank 0 computes it, the "
               "gradient as each rank computes its shard"),
    Entry("art992-lfilter-identity-grad", "Trusted-AI/adversarial-robustness-toolbox",
          "issue 992", f"{GH}/Trusted-AI/adversarial-robustness-toolbox/issues/992",
          "surrogate_gradient",
          "any filter other than the identity: backward returns grad_output unchanged",
          "x [1,3], b (1, 0, 1)", FIRFilter, FIRFilterFixed,
          lambda: [rand(2, 10), (1.0, 0.0, 1.0)], fir_ref,
          smallest_inputs=lambda: [rand(1, 3), (1.0, 0.0, 1.0)],
          note="ART's LFilter (numpy, estimate_gradient) as a torch Function; the report's "
               "FIR case (denominator [1, 0, 0])"),
    Entry("wavelets65-needs-first-grad", "fbcotter/pytorch_wavelets", "issue 65",
          f"{GH}/fbcotter/pytorch_wavelets/issues/65", "needs_input_grad",
          "low not requiring grad, high requiring grad: high's gradient is None",
          "low [1,1] (no grad), high [1,1]", HaarSynthesis, HaarSynthesisFixed,
          lambda: [rand(2, 3), rand(2, 3, seed=1)], haar_synth,
          smallest_inputs=lambda: [rand(1, 1, grad=False), rand(1, 1, seed=1)],
          note="SFB1D's filter bank reduced to one-level Haar synthesis"),
    Entry("jax40625-coo-transpose-grad", "jax-ml/jax", "issue 40625",
          f"{GH}/jax-ml/jax/issues/40625", "sparse_transpose",
          "transpose=True with an off-diagonal entry: data's gradient uses ct[row], b[col]",
          "data [1] at (0, 1), shape (2, 2), b [2,1], transpose", COOMatmat, COOMatmatFixed,
          lambda: [rand(3), ids(0, 1, 2), ids(2, 0, 1), rand(3, 2, seed=1), (3, 3), False],
          coo_matmat_ref,
          smallest_inputs=lambda: [rand(1), ids(0), ids(1), rand(2, 1, seed=1), (2, 2), True],
          note="jax.experimental.sparse's coo_matmat transpose rule as a torch Function over "
               "the COO data"),
    Entry("tfnufft18-points-grad-conj", "mrphys/tensorflow-nufft", "issue 18",
          f"{GH}/mrphys/tensorflow-nufft/issues/18", "complex_conjugate",
          "any input with nonzero frequencies: the points' gradient misses conj(grad)",
          "c [2], p [1]", NDFT, NDFTFixed,
          lambda: [rand(4), rand(3, seed=1, low=-3.0, high=3.0)], ndft_ref,
          smallest_inputs=lambda: [rand(2), rand(1, seed=1, low=-3.0, high=3.0)],
          note="the type-2 NUFFT reduced to a direct non-uniform DFT in 1-D with real "
               "coefficients"),
    Entry("keops155-atan2-flipped", "getkeops/keops", "PR 155",
          f"{GH}/getkeops/keops/pull/155", "swapped_partials",
          "any input: atan2's two partial derivatives are exchanged",
          "y [1], x [1]", Atan2, Atan2Fixed,
          lambda: [rand(3, 4), rand(3, 4, seed=1)], torch.atan2,
          smallest_inputs=lambda: [rand(1), rand(1, seed=1)]),
    Entry("pt38985-nearest-downsample-pixel", "pytorch/pytorch", "issue 38985",
          f"{GH}/pytorch/pytorch/issues/38985", "resample_mapping",
          "scale_factor < 1 (downsampling): the gradient lands on the block's last pixel",
          "x [1,2], scale 0.5", Nearest1d, Nearest1dFixed,
          lambda: [rand(2, 4), 2.0], nearest_ref,
          smallest_inputs=lambda: [rand(1, 2), 0.5],
          note="2-D nearest interpolation reduced to 1-D rows"),
    Entry("jax40626-scatter-max-clip", "jax-ml/jax", "issue 40626",
          f"{GH}/jax-ml/jax/issues/40626", "index_mode",
          "mode='clip' with an out-of-bounds index whose update wins: refs counted 0",
          "operand [1] = [0], idx [1], upd [1] = [1]", ScatterMaxClip, ScatterMaxClipFixed,
          lambda: [rand(4), ids(0, 2, 3), rand(3, seed=1)], scatter_max_ref,
          smallest_inputs=lambda: [vals(0.0), ids(1), vals(1.0)],
          note="jax's _scatter_extremal_jvp bookkeeping (gathers and scatter_adds without "
               "mode) modelled in reverse mode; jax reported inf, this model gives NaN"),
    Entry("flaggems5392-layernorm-rank3", "flagos-ai/FlagGems", "issue 5392",
          f"{GH}/flagos-ai/FlagGems/issues/5392", "normalized_dims",
          "an input of rank >= 3 ([batch, seq, hidden]): backward normalises over seq*hidden",
          "x [1,2,2], w [2], b [2]", LayerNorm, LayerNormFixed,
          lambda: [rand(3, 4), rand(4, seed=1, low=0.5, high=1.5), rand(4, seed=2)],
          layer_norm_ref,
          smallest_inputs=lambda: [rand(1, 2, 2), rand(2, seed=1, low=0.5, high=1.5),
                                   rand(2, seed=2)],
          note="the Triton kernels' [M, N] launch arithmetic modelled as the statistics "
               "recomputed over a [shape[0], rest] view; no out-of-bounds writes"),
    Entry("pt26637-cummax-scatter", "pytorch/pytorch", "PR 26637",
          f"{GH}/pytorch/pytorch/pull/26637", "cumulative_scan",
          "a running max that holds for two or more steps (any non-increasing step)",
          "x [2] = [1, 0]", CumMax, CumMaxFixed,
          lambda: [rand(3, 5)], cummax_ref,
          smallest_inputs=lambda: [vals(1.0, 0.0)],
          note="the review reports only that the first backward was wrong (x1 should count "
               "7 times); modelled as scatter where scatter_add is due"),
    Entry("pt23925-gridsample-border-edge", "pytorch/pytorch", "issue 23925",
          f"{GH}/pytorch/pytorch/issues/23925", "boundary_padding",
          "padding_mode='border' and a grid point exactly on the last pixel (an identity "
          "grid with align_corners): the position gradient uses zero padding",
          "img [2], pos [1] = [1.0]", BorderSample, BorderSampleFixed,
          lambda: [rand(5), rand(4, seed=1, low=0.0, high=4.0)], border_sample_ref,
          smallest_inputs=lambda: [rand(2), vals(1.0)],
          note="2-D bilinear grid_sample reduced to 1-D linear sampling at pixel positions; "
               "the border-point gradient taken as 0, as the fix (PR 32829) returns"),
    Entry("flaggems5218-upsample-ac-window", "flagos-ai/FlagGems", "issue 5218",
          f"{GH}/flagos-ai/FlagGems/issues/5218", "resample_mapping",
          "align_corners=True with a large ratio at a small input (about size > 2 n_in^2): "
          "the backward window misses contributors", "x [1,2], size 10, align_corners",
          UpsampleLinear1d, UpsampleLinear1dFixed,
          lambda: [rand(2, 4), 8, True], upsample_ref,
          smallest_inputs=lambda: [rand(1, 2), 10, True],
          note="the kernel's window modelled as +-(size // n_in + 2) outputs around "
               "floor(i * stretch); it reproduces the report's shortfalls (0.111 at 2->10, "
               "0.087 at 3->24, 0.070 at 4->44)"),
)

"""The FIRST Triton involution kernels (issue 24), kept only so benchmarks/bench_involution.py
can time them beside the current ones in the same run (`--baseline-kernels`).

Original description follows.  Triton kernels for involution (Li et al., CVPR 2021): forward,
grad_input and grad_weight.

Layout: x [B, C, H, W], per-pixel kernels w [B, G, KH, KW, Ho, Wo], out [B, C, Ho, Wo]; channel c
uses group c // (C // G).

Every program owns one (batch, group) pair and a block of pixels.  It keeps the whole
[KH*KW, BLOCK_P] tile of per-pixel kernels (or of their gradients) in registers and loops over the
C // G channels of its group, so w, the largest operand (K² values per pixel and group), is read or
written exactly once.  No program writes another's outputs: there are no atomics and the results
are deterministic run to run.

Sizes, strides, paddings and dilations are runtime ints; only the kernel size, the padded tap
count, the block size and the accumulator dtype are constexpr, so a new image size or batch size
does not compile a new kernel (beyond Triton's own int specialisation).  Accumulation is in float32
for 16- and 32-bit inputs and in float64 for float64.  On CPU tensors the kernels run under
TRITON_INTERPRET=1, which must be set before triton is first imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gradlab.kernels.involution_launch import IntPair, geometry

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # the package works without triton; only these kernels need it
    triton = None
    tl = None
    HAVE_TRITON = False

__all__ = ["HAVE_TRITON", "involution_forward", "involution_grad_input", "involution_grad_weight",
           "launch_config"]


#: Elements in one program's [taps, pixels] register tile.  4096 float32 values over 4 warps is
#: 32 registers a thread: room for the tile plus the per-channel operand without spilling.
_TILE_ELEMS = 4096
_MIN_BLOCK_P = 16
_MAX_BLOCK_P = 256


def _blocks(taps: int) -> tuple[int, int]:
    """(padded tap count, pixel block) for a kernel with `taps` taps (both powers of two, as
    tl.arange needs; plain Python, so the launch plan is checked without triton)."""
    kk_pad = 1 << max(taps - 1, 0).bit_length()
    block_p = max(_MIN_BLOCK_P, min(_MAX_BLOCK_P, _TILE_ELEMS // kk_pad))
    return kk_pad, block_p


def launch_config(taps: int, n_pixels: int, batch: int, groups: int) -> tuple[int, int, int]:
    """(grid size, padded tap count, pixel block) of one launch: one program per (batch,
    group, block of `n_pixels` output pixels, or input pixels for grad_input); a 1-D grid."""
    kk_pad, block_p = _blocks(taps)
    return batch * groups * -(-n_pixels // block_p), kk_pad, block_p


def _acc_dtype(dtype: torch.dtype) -> Any:
    """float64 accumulates in float64; everything else in float32."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def _require_triton() -> None:
    if not HAVE_TRITON:
        raise RuntimeError("the involution Triton kernels need triton, which is not installed")


# Kernel parameters stay unannotated (hence the type: ignore): triton gives annotations meaning
# (constexpr, specialisation hints), so only the constexpr ones carry one.
if HAVE_TRITON:

    @triton.jit
    def _forward_kernel(  # type: ignore[no-untyped-def]
        x_ptr, w_ptr, out_ptr,
        C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, KK_PAD: tl.constexpr, BLOCK_P: tl.constexpr,
        ACC: tl.constexpr,
    ):
        """out[b, c, p] = sum_k w[b, g, k, p] * x[b, c, tap k of output pixel p]."""
        n_out = Ho * Wo
        n_pb = tl.cdiv(n_out, BLOCK_P)
        pid = tl.program_id(0)
        bg = pid // n_pb
        b = bg // G
        g = bg % G
        p = (pid % n_pb) * BLOCK_P + tl.arange(0, BLOCK_P)
        p_ok = p < n_out
        ho = p // Wo
        wo = p % Wo
        k = tl.arange(0, KK_PAD)
        k_ok = k < KH * KW
        hi = ho[None, :] * sh - ph + (k // KW)[:, None] * dh
        wi = wo[None, :] * sw - pw + (k % KW)[:, None] * dw
        tile_ok = k_ok[:, None] & p_ok[None, :]
        x_ok = tile_ok & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        x_off = tl.where(x_ok, hi * W + wi, 0)

        w_base = bg.to(tl.int64) * (KH * KW) * n_out
        wt = tl.load(w_ptr + w_base + k[:, None] * n_out + p[None, :], mask=tile_ok, other=0.0)
        wt = wt.to(ACC)
        for cc in range(0, CPG):
            bc = (b * C + g * CPG + cc).to(tl.int64)
            xv = tl.load(x_ptr + bc * H * W + x_off, mask=x_ok, other=0.0).to(ACC)
            o = tl.sum(xv * wt, axis=0)
            tl.store(out_ptr + bc * n_out + p, o.to(out_ptr.dtype.element_ty), mask=p_ok)

    @triton.jit
    def _grad_input_kernel(  # type: ignore[no-untyped-def]
        go_ptr, w_ptr, gx_ptr,
        C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, KK_PAD: tl.constexpr, BLOCK_P: tl.constexpr,
        ACC: tl.constexpr,
    ):
        """grad_x[b, c, q] = sum over taps k and output pixels o that read q through tap k.

        The inverse of the forward gather: input row hi is read by tap i of output row ho exactly
        when hi + ph - i*dh is a non-negative multiple of sh whose quotient ho is < Ho (same for
        columns), so each input pixel meets at most one output pixel per tap.
        """
        n_in = H * W
        n_out = Ho * Wo
        n_pb = tl.cdiv(n_in, BLOCK_P)
        pid = tl.program_id(0)
        bg = pid // n_pb
        b = bg // G
        g = bg % G
        q = (pid % n_pb) * BLOCK_P + tl.arange(0, BLOCK_P)
        q_ok = q < n_in
        hi = q // W
        wi = q % W
        k = tl.arange(0, KK_PAD)
        k_ok = k < KH * KW
        th = hi[None, :] + ph - (k // KW)[:, None] * dh
        tw = wi[None, :] + pw - (k % KW)[:, None] * dw
        # Clamp before dividing: the sign convention of integer // and % on negatives differs
        # between compiled Triton and the interpreter; negatives are masked out anyway.
        th_c = tl.where(th >= 0, th, 0)
        tw_c = tl.where(tw >= 0, tw, 0)
        ho = th_c // sh
        wo = tw_c // sw
        hit = (k_ok[:, None] & q_ok[None, :] & (th >= 0) & (tw >= 0)
               & (th_c % sh == 0) & (tw_c % sw == 0) & (ho < Ho) & (wo < Wo))
        o_off = tl.where(hit, ho * Wo + wo, 0)

        w_base = bg.to(tl.int64) * (KH * KW) * n_out
        wt = tl.load(w_ptr + w_base + k[:, None] * n_out + o_off, mask=hit, other=0.0).to(ACC)
        for cc in range(0, CPG):
            bc = (b * C + g * CPG + cc).to(tl.int64)
            gov = tl.load(go_ptr + bc * n_out + o_off, mask=hit, other=0.0).to(ACC)
            gx = tl.sum(gov * wt, axis=0)
            tl.store(gx_ptr + bc * n_in + q, gx.to(gx_ptr.dtype.element_ty), mask=q_ok)

    @triton.jit
    def _grad_weight_kernel(  # type: ignore[no-untyped-def]
        go_ptr, x_ptr, gw_ptr,
        C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, KK_PAD: tl.constexpr, BLOCK_P: tl.constexpr,
        ACC: tl.constexpr,
    ):
        """grad_w[b, g, k, p] = sum over channels c of group g of go[b, c, p] * x[b, c, tap k]."""
        n_out = Ho * Wo
        n_pb = tl.cdiv(n_out, BLOCK_P)
        pid = tl.program_id(0)
        bg = pid // n_pb
        b = bg // G
        g = bg % G
        p = (pid % n_pb) * BLOCK_P + tl.arange(0, BLOCK_P)
        p_ok = p < n_out
        ho = p // Wo
        wo = p % Wo
        k = tl.arange(0, KK_PAD)
        k_ok = k < KH * KW
        hi = ho[None, :] * sh - ph + (k // KW)[:, None] * dh
        wi = wo[None, :] * sw - pw + (k % KW)[:, None] * dw
        tile_ok = k_ok[:, None] & p_ok[None, :]
        x_ok = tile_ok & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        x_off = tl.where(x_ok, hi * W + wi, 0)

        acc = tl.zeros([KK_PAD, BLOCK_P], dtype=ACC)
        for cc in range(0, CPG):
            bc = (b * C + g * CPG + cc).to(tl.int64)
            gov = tl.load(go_ptr + bc * n_out + p, mask=p_ok, other=0.0).to(ACC)
            xv = tl.load(x_ptr + bc * H * W + x_off, mask=x_ok, other=0.0).to(ACC)
            acc += gov[None, :] * xv
        w_base = bg.to(tl.int64) * (KH * KW) * n_out
        tl.store(gw_ptr + w_base + k[:, None] * n_out + p[None, :],
                 acc.to(gw_ptr.dtype.element_ty), mask=tile_ok)


def _launch(kernel: Any, n_pixels: int, geo: dict[str, int], dtype: torch.dtype,
            *tensors: torch.Tensor) -> None:
    """Launch `kernel` over (batch, group, pixel block) with the shared argument list."""
    n_programs, kk_pad, block_p = launch_config(geo["KH"] * geo["KW"], n_pixels, geo["B"],
                                                geo["G"])
    grid = (n_programs,)
    kernel[grid](
        *tensors,
        geo["C"], geo["H"], geo["W"], geo["Ho"], geo["Wo"], geo["G"], geo["CPG"],
        geo["sh"], geo["sw"], geo["ph"], geo["pw"], geo["dh"], geo["dw"],
        KH=geo["KH"], KW=geo["KW"], KK_PAD=kk_pad, BLOCK_P=block_p, ACC=_acc_dtype(dtype),
    )


def _check_dtypes(*tensors: torch.Tensor) -> None:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise TypeError(f"involution kernels need one dtype, got {sorted(map(str, dtypes))}")


def involution_forward(
    x: torch.Tensor, w: torch.Tensor, s: IntPair = 1, p: IntPair = 0, d: IntPair = 1,
) -> torch.Tensor:
    """out [B, C, Ho, Wo] from x [B, C, H, W] and w [B, G, KH, KW, Ho, Wo]."""
    _require_triton()
    _check_dtypes(x, w)
    geo = geometry(x.shape, w.shape, s, p, d)
    out = x.new_empty((geo["B"], geo["C"], geo["Ho"], geo["Wo"]))
    if out.numel():
        _launch(_forward_kernel, geo["Ho"] * geo["Wo"], geo, x.dtype,
                x.contiguous(), w.contiguous(), out)
    return out


def involution_grad_input(
    go: torch.Tensor, w: torch.Tensor, x_shape: Sequence[int], s: IntPair = 1, p: IntPair = 0,
    d: IntPair = 1,
) -> torch.Tensor:
    """grad of x [B, C, H, W] from grad_output [B, C, Ho, Wo] and w."""
    _require_triton()
    _check_dtypes(go, w)
    geo = geometry(x_shape, w.shape, s, p, d)
    gx = w.new_zeros(tuple(int(n) for n in x_shape))
    # .contiguous() also materialises a stride-0 grad_output (e.g. from out.sum().backward()).
    if gx.numel() and w.numel():
        _launch(_grad_input_kernel, geo["H"] * geo["W"], geo, w.dtype,
                go.contiguous(), w.contiguous(), gx)
    return gx


def involution_grad_weight(
    go: torch.Tensor, x: torch.Tensor, w_shape: Sequence[int], s: IntPair = 1, p: IntPair = 0,
    d: IntPair = 1,
) -> torch.Tensor:
    """grad of w [B, G, KH, KW, Ho, Wo] from grad_output [B, C, Ho, Wo] and x."""
    _require_triton()
    _check_dtypes(go, x)
    geo = geometry(x.shape, w_shape, s, p, d)
    gw = x.new_zeros(tuple(int(n) for n in w_shape))
    if gw.numel():
        _launch(_grad_weight_kernel, geo["Ho"] * geo["Wo"], geo, x.dtype,
                go.contiguous(), x.contiguous(), gw)
    return gw

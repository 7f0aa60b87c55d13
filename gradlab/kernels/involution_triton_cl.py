"""Channels-last Triton kernels for involution (issue 41): forward, grad_input, grad_weight.

Layout: x, out, grad_output and grad_x channels last (memory [B, H, W, C]: a pixel's C channels
contiguous), w [B, G, KH, KW, Ho, Wo] as in the NCHW kernels (gradlab/kernels/involution_triton.py,
which chooses between the two per shape: gradlab/kernels/involution_select.py).

Why: in NCHW a tap's shifted pixel offset breaks 16-byte alignment, so every gather of the NCHW
kernels is a scalar load.  Channels last, a group's channels (16 in RedNet: 64 bytes in float32,
32 in 16-bit) are contiguous and aligned wherever the tap lands (C and the group's first channel
are multiples of 16), so each thread loads them as 16-byte vectors.

- forward: a program owns (batch, block of BLOCK_P pixels, group, block of the group's channels),
  the group fastest (neighbouring programs read the same pixels' lines).  Its tile is
  [BLOCK_P, BLOCK_C], the channels contiguous; each thread holds whole vectors of one pixel's
  channels and loops over all KH*KW taps itself: the tap reduction of an output never leaves its
  thread.  Per tap one w element per pixel (shared by the channels) and one vector gather of x.
- grad_input: the transposed involution as a gather (as in NCHW: input pixel q meets, through tap
  k, at most one output pixel), over channel vectors of grad_output.
- grad_weight, two kernels: "cl" loads the group's grad_output tile once and per tap reduces the
  product with an x tile over the channel axis (a reduction across the few lanes that share a
  pixel); "cl_vec" keeps the reduction in one thread: per tap it walks the group's channels one
  16-byte vector (VEC channels) at a time, each thread summing its own pixel's products, and
  reloads the grad_output vector per tap (an L1 hit) instead of holding the tile.

Offsets within one image are int32 (checked for every RedNet shape in plain Python,
gradlab/kernels/involution_shapes.py); the image base is int64.  Every output element is written
once (no atomics); 16-bit inputs accumulate in float32, float64 in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradlab.kernels.involution_launch import (
    CL_CONFIGS,
    TUNE_REP_MS,
    TUNE_WARMUP_MS,
    Plan,
    block_c,
    cl_tuning_candidates,
    make_step,
    record_step,
    vector_channels,
)

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # only these kernels need triton
    triton = None
    tl = None
    HAVE_TRITON = False

__all__ = ["HAVE_TRITON", "KERNELS", "LayoutCache", "acc_dtype", "channels_last",
           "is_channels_last", "launch", "time_ms"]

#: The channels-last kernels by the name the selector knows them (kernel, variant).
KERNELS = (("forward", "cl"), ("grad_input", "cl"), ("grad_weight", "cl"),
           ("grad_weight", "cl_vec"))

Config = tuple[int, int, int]

# Sizes triton need not specialise (fewer compiled variants across layer shapes); C and CPG stay
# specialised, so their divisibility by 16 (RedNet's) proves the channel vectors aligned.
_NO_SPECIALIZE = ["B", "H", "W", "Ho", "Wo", "G", "ph", "pw"]

if HAVE_TRITON:

    @triton.jit
    def _program(N_PIX, G, CPG, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):  # type: ignore[no-untyped-def]
        """(batch, group, channel offset in the group, pixels, pixel mask) of this program:
        the channel block fastest in the program id, then the group, then the pixel block."""
        n_cb = tl.cdiv(CPG, BLOCK_C)
        pid = tl.program_id(0)
        c0 = (pid % n_cb) * BLOCK_C
        g = (pid // n_cb) % G
        rest = pid // (n_cb * G)
        n_pb = tl.cdiv(N_PIX, BLOCK_P)
        p = (rest % n_pb) * BLOCK_P + tl.arange(0, BLOCK_P)
        return rest // n_pb, g, c0, p, p < N_PIX

    @triton.jit
    def _channel_mask(cc, CPG, WIDTH: tl.constexpr, C_EVEN: tl.constexpr):  # type: ignore[no-untyped-def]
        """cc < CPG, as a constant when every block is full (C_EVEN): a mask that varies along
        the channels would keep Triton from issuing them as one vector load."""
        ok = cc < CPG
        if C_EVEN:
            ok = tl.full([WIDTH], 1, tl.int1)
        return ok

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _forward_kernel(  # type: ignore[no-untyped-def]
        x_ptr, w_ptr, out_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        VEC: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """out[b, p, c] = sum_k w[b, g, k, p] * x[b, tap k of p, c], channels last."""
        b, g, c0, p, p_ok = _program(N_PIX, G, CPG, BLOCK_P, BLOCK_C)
        cc = c0 + tl.arange(0, BLOCK_C)
        c_ok = _channel_mask(cc, CPG, BLOCK_C, C_EVEN)
        c = g * CPG + cc
        ho = p // Wo
        wo = p % Wo
        x_img = x_ptr + b.to(tl.int64) * H * W * C
        w_row = w_ptr + (b * G + g).to(tl.int64) * (KH * KW) * N_PIX + p
        acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=ACC)
        for i in range(KH):  # a runtime loop: compile time stays seconds
            hi = ho * sh - ph + i * dh
            h_ok = p_ok & (hi >= 0) & (hi < H)
            for j in tl.static_range(KW):
                wi = wo * sw - pw + j * dw
                ok = h_ok & (wi >= 0) & (wi < W)
                wv = tl.load(w_row + (i * KW + j) * N_PIX, mask=p_ok, other=0.0).to(ACC)
                pix = tl.where(ok, hi * W + wi, 0)
                xv = tl.load(x_img + pix[:, None] * C + c[None, :],
                             mask=ok[:, None] & c_ok[None, :], other=0.0).to(ACC)
                acc += xv * wv[:, None]
        out = out_ptr + b.to(tl.int64) * N_PIX * C + p[:, None] * C + c[None, :]
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _grad_input_kernel(  # type: ignore[no-untyped-def]
        go_ptr, w_ptr, gx_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        VEC: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """grad_x[b, q, c] = sum over taps k of go[b, o, c] * w[b, g, k, o], o the output pixel
        that reads q through tap k (q + padding - k*dilation = o*stride), channels last."""
        b, g, c0, q, q_ok = _program(N_PIX, G, CPG, BLOCK_P, BLOCK_C)
        cc = c0 + tl.arange(0, BLOCK_C)
        c_ok = _channel_mask(cc, CPG, BLOCK_C, C_EVEN)
        c = g * CPG + cc
        hq = q // W + ph
        wq = q % W + pw
        n_out = Ho * Wo
        go_img = go_ptr + b.to(tl.int64) * n_out * C
        w_base = w_ptr + (b * G + g).to(tl.int64) * (KH * KW) * n_out
        acc = tl.zeros([BLOCK_P, BLOCK_C], dtype=ACC)
        for i in range(KH):
            th = hq - i * dh
            # clamp before dividing: // of negatives differs between compiled and interpreted
            th_c = tl.where(th >= 0, th, 0)
            ho = th_c // sh
            h_ok = q_ok & (th >= 0) & (th_c - ho * sh == 0) & (ho < Ho)
            for j in tl.static_range(KW):
                tw = wq - j * dw
                tw_c = tl.where(tw >= 0, tw, 0)
                wo = tw_c // sw
                hit = h_ok & (tw >= 0) & (tw_c - wo * sw == 0) & (wo < Wo)
                o = tl.where(hit, ho * Wo + wo, 0)
                wv = tl.load(w_base + (i * KW + j) * n_out + o, mask=hit, other=0.0).to(ACC)
                gov = tl.load(go_img + o[:, None] * C + c[None, :],
                              mask=hit[:, None] & c_ok[None, :], other=0.0).to(ACC)
                acc += gov * wv[:, None]
        gx = gx_ptr + b.to(tl.int64) * N_PIX * C + q[:, None] * C + c[None, :]
        tl.store(gx, acc.to(gx_ptr.dtype.element_ty), mask=q_ok[:, None] & c_ok[None, :])

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _grad_weight_kernel(  # type: ignore[no-untyped-def]
        go_ptr, x_ptr, gw_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        VEC: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """grad_w[b, g, k, p] = sum over the group's channels of go[b, p, c] * x[b, tap k, c]:
        the grad_output tile held, the product reduced over the channel axis per tap."""
        b, g, _, p, p_ok = _program(N_PIX, G, 1, BLOCK_P, 1)  # one program per group
        ho = p // Wo
        wo = p % Wo
        x_img = x_ptr + b.to(tl.int64) * H * W * C
        go_img = go_ptr + b.to(tl.int64) * N_PIX * C
        gw_row = gw_ptr + (b * G + g).to(tl.int64) * (KH * KW) * N_PIX + p
        # a group wider than BLOCK_C is summed block by block onto what the last one stored
        for c0 in range(0, CPG, BLOCK_C):
            cc = c0 + tl.arange(0, BLOCK_C)
            c_ok = _channel_mask(cc, CPG, BLOCK_C, C_EVEN)
            c = g * CPG + cc
            gov = tl.load(go_img + p[:, None] * C + c[None, :],
                          mask=p_ok[:, None] & c_ok[None, :], other=0.0).to(ACC)
            for i in range(KH):
                hi = ho * sh - ph + i * dh
                h_ok = p_ok & (hi >= 0) & (hi < H)
                for j in tl.static_range(KW):
                    wi = wo * sw - pw + j * dw
                    ok = h_ok & (wi >= 0) & (wi < W)
                    pix = tl.where(ok, hi * W + wi, 0)
                    xv = tl.load(x_img + pix[:, None] * C + c[None, :],
                                 mask=ok[:, None] & c_ok[None, :], other=0.0).to(ACC)
                    s = tl.sum(gov * xv, axis=1)
                    dst = gw_row + (i * KW + j) * N_PIX
                    if c0 > 0:
                        s += tl.load(dst, mask=p_ok, other=0.0).to(ACC)
                    tl.store(dst, s.to(gw_ptr.dtype.element_ty), mask=p_ok)

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _grad_weight_vec_kernel(  # type: ignore[no-untyped-def]
        go_ptr, x_ptr, gw_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        VEC: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """grad_weight with each pixel's whole channel reduction in its thread: per tap, the
        group's channels VEC at a time (one 16-byte vector of go and one of x per step)."""
        b, g, _, p, p_ok = _program(N_PIX, G, 1, BLOCK_P, 1)
        ho = p // Wo
        wo = p % Wo
        x_img = x_ptr + b.to(tl.int64) * H * W * C
        go_img = go_ptr + b.to(tl.int64) * N_PIX * C
        gw_row = gw_ptr + (b * G + g).to(tl.int64) * (KH * KW) * N_PIX + p
        v = tl.arange(0, VEC)
        for i in range(KH):
            hi = ho * sh - ph + i * dh
            h_ok = p_ok & (hi >= 0) & (hi < H)
            for j in tl.static_range(KW):
                wi = wo * sw - pw + j * dw
                ok = h_ok & (wi >= 0) & (wi < W)
                pix = tl.where(ok, hi * W + wi, 0)
                s = tl.zeros([BLOCK_P], dtype=ACC)
                for c0 in range(0, CPG, VEC):
                    c_ok = _channel_mask(c0 + v, CPG, VEC, C_EVEN)
                    c = g * CPG + c0 + v
                    gov = tl.load(go_img + p[:, None] * C + c[None, :],
                                  mask=p_ok[:, None] & c_ok[None, :], other=0.0).to(ACC)
                    xv = tl.load(x_img + pix[:, None] * C + c[None, :],
                                 mask=ok[:, None] & c_ok[None, :], other=0.0).to(ACC)
                    s += tl.sum(gov * xv, axis=1)
                tl.store(gw_row + (i * KW + j) * N_PIX, s.to(gw_ptr.dtype.element_ty),
                         mask=p_ok)

    def _tuned(kernel: Any, pixels: str) -> Any:
        """`kernel` autotuned over CL_CONFIGS (those that fit the image: cl_tuning_candidates)."""

        def prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
            fits = set(cl_tuning_candidates(int(named_args[pixels])))
            return [c for c in configs if (c.kwargs["BLOCK_P"], c.num_warps, 0) in fits]

        def bench(fn: Any, quantiles: Any = None, **_: Any) -> Any:
            return triton.testing.do_bench(fn, warmup=TUNE_WARMUP_MS, rep=TUNE_REP_MS,
                                           quantiles=quantiles)

        return triton.autotune(
            configs=[triton.Config({"BLOCK_P": bp}, num_warps=nw) for bp, nw, _ in CL_CONFIGS],
            key=["N_PIX", "B", "C", "H", "W", "Ho", "Wo", "G", "sh", "sw", "dh", "dw", "KH",
                 "KW"],
            prune_configs_by={"early_config_prune": prune},
            do_bench=bench,
        )(kernel)

    _JIT = {("forward", "cl"): _forward_kernel, ("grad_input", "cl"): _grad_input_kernel,
            ("grad_weight", "cl"): _grad_weight_kernel,
            ("grad_weight", "cl_vec"): _grad_weight_vec_kernel}
    _TUNED = {k: _tuned(f, "N_PIX") for k, f in _JIT.items()}


def acc_dtype(dtype: torch.dtype) -> Any:
    """The accumulator (both kernel sets): float64 for float64 inputs, float32 otherwise."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def time_ms(run: Callable[[], object]) -> float:
    """Median ms of `run` after one call (which compiles and autotunes it): the variant
    selector's clock on a GPU, as short as the autotuner's."""
    run()
    return float(triton.testing.do_bench(run, warmup=TUNE_WARMUP_MS, rep=TUNE_REP_MS,
                                         return_mode="median"))


def is_channels_last(t: torch.Tensor) -> bool:
    """Whether `t` is in channels-last memory and not also plainly contiguous."""
    return (t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last))


def channels_last(t: torch.Tensor) -> torch.Tensor:
    """`t` in channels-last memory (itself when it is already)."""
    return t.contiguous(memory_format=torch.channels_last)


class LayoutCache:
    """The layout copies the launches of one call made (a forward, a backward), by source
    tensor and memory format, so that a tensor read by several launches is converted once.
    A source modified in place since (another version) is converted again."""

    def __init__(self) -> None:
        self.entries: list[tuple[torch.Tensor, int, torch.memory_format, torch.Tensor]] = []
        self.timing = False

    def add(self, t: torch.Tensor, fmt: torch.memory_format, copy: torch.Tensor) -> None:
        """Know `copy` as `t` in memory format `fmt` (a copy an earlier call made)."""
        self.entries.append((t, t._version, fmt, copy))

    def get(self, t: torch.Tensor, fmt: torch.memory_format) -> torch.Tensor:
        """`t` in memory format `fmt`: itself when it is already, else its one copy (a fresh
        one, not kept, while `clock` times)."""
        if t.is_contiguous(memory_format=fmt):
            return t
        if self.timing:
            return t.contiguous(memory_format=fmt)
        for src, version, f, copy in self.entries:
            if src is t and f == fmt and src._version == version:
                return copy
        copy = t.contiguous(memory_format=fmt)
        if copy is not t:
            self.entries.append((t, t._version, fmt, copy))
        return copy

    def clock(self, run: Callable[[], object]) -> float:
        """time_ms of `run`, every conversion made afresh each call (as before this cache, so
        the variant selector's choice is the one it was): the launchers' timer."""
        self.timing = True
        try:
            return time_ms(run)
        finally:
            self.timing = False

    def copy_of(self, t: torch.Tensor) -> tuple[torch.memory_format, torch.Tensor] | None:
        """(format, copy) of the one copy of `t` made; None unless exactly one was."""
        mine = [(fmt, copy) for src, _, fmt, copy in self.entries if src is t]
        return mine[0] if len(mine) == 1 else None


def launch(kernel: str, variant: str, plan: Plan, dtype: torch.dtype,
           *tensors: torch.Tensor, config: Config | None = None) -> None:
    """Launch the channels-last `kernel` (`variant` "cl" or "cl_vec") on channels-last tensors
    as its Step for `plan` says (built on the plan's first launch): autotuned, or at `config`
    (BLOCK_P, num_warps, 0), or at cl_default_config."""
    if not HAVE_TRITON:
        raise RuntimeError("the involution Triton kernels need triton, which is not installed")
    step = plan.steps.get(variant)
    if step is None:
        cpg = plan.geo["CPG"]
        vec = vector_channels(cpg, dtype.itemsize)
        const = {"KH": plan.geo["KH"], "KW": plan.geo["KW"], "BLOCK_C": block_c(cpg), "VEC": vec,
                 "C_EVEN": cpg % (vec if variant == "cl_vec" else block_c(cpg)) == 0,
                 "ACC": acc_dtype(dtype)}
        step = plan.steps[variant] = make_step(kernel, variant, plan, const, config)
    if step.config is None:
        tuned = _TUNED[(kernel, variant)]
        tuned[step.grid](*tensors, *step.args, **step.const)
        best = tuned.best_config
        record_step(step, (int(best.kwargs["BLOCK_P"]), int(best.num_warps), 0))
        return
    _JIT[(kernel, variant)][step.grid](*tensors, *step.args, **step.const)
    record_step(step)

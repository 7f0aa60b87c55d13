"""Triton kernels for involution (Li et al., CVPR 2021): forward, grad_input and grad_weight.

Layout: x [B, C, H, W], per-pixel kernels w [B, G, KH, KW, Ho, Wo], out [B, C, Ho, Wo]; channel c
uses group c // (C // G).

The design (issue 29): every program owns one (batch, group) pair, a block of BLOCK_C channels of
that group and a block of BLOCK_P pixels, and loops statically over the KH*KW taps.

- forward: an accumulator tile [BLOCK_C, BLOCK_P]; per tap, one contiguous row of w
  (w[b, g, k, pixels], shared by the BLOCK_C channels) and one gathered [BLOCK_C, BLOCK_P] tile of
  x, multiplied and added.  No reduction across threads: each thread owns its pixels and all their
  channels.  The x window of a pixel block (the block plus its halo) is read once from DRAM and
  K² times from L1, so the bound is load issue and L1, not DRAM (docs/gpu.md).
- grad_input: the transposed involution as a gather (no atomics): input pixel q meets, through
  tap k, at most one output pixel o (q + padding - k*dilation = o*stride); per tap, gather the
  grad_output tile and the w row at those o and accumulate.
- grad_weight: grad_w[b, g, k, p] = sum over the group's channels of go[b, c, p] * x[b, c, tap k
  of p]; the grad_output tile is loaded once, then per tap one gathered x tile and a reduction
  over the channel axis, which lies inside each thread (BLOCK_P >= 32 * num_warps).

Every output element is written exactly once (no zero-fill launch, no atomics: deterministic),
and only x and w are needed by backward.  16-bit inputs load 16-bit and accumulate in float32;
float64 accumulates in float64.

Block sizes: on a GPU `triton.autotune` picks BLOCK_P, num_warps and TILE_W per shape and dtype
from CONFIGS (`chosen_configs()` records them); without autotuning (GRADLAB_INVOLUTION_AUTOTUNE=0,
TRITON_INTERPRET=1) `default_config` decides.  The public launchers run these NCHW kernels or the
channels-last ones (involution_triton_cl.py), per shape, as involution_select.py chooses
(`chosen_variants()`); what a launch derives from its shapes is kept from the shape's first call
(involution_launch.plan).  CPU tensors run under TRITON_INTERPRET=1, set before triton loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradlab.exitnoise import quiet_triton_exit
from gradlab.kernels import involution_select as select
from gradlab.kernels import involution_triton_cl as kcl
from gradlab.kernels.involution_launch import (
    AUTOTUNE_ENV,
    CONFIGS,
    TUNE_REP_MS,
    TUNE_WARMUP_MS,
    IntPair,
    Plan,
    Switches,
    autotuning,
    block_c,
    chosen_configs,
    default_config,
    launch_config,
    make_step,
    read_switches,
    record_step,
    tuning_candidates,
)
from gradlab.kernels.involution_launch import plan as launch_plan
from gradlab.kernels.involution_select import VARIANTS, chosen_variants

try:
    import triton
    import triton.language as tl

    HAVE_TRITON = True
    quiet_triton_exit()  # no nanobind leak report at this process's exit
except ImportError:  # the package works without triton; only these kernels need it
    triton = None
    tl = None
    HAVE_TRITON = False

__all__ = ["AUTOTUNE_ENV", "CONFIGS", "HAVE_TRITON", "KERNELS", "VARIANTS", "autotuning",
           "chosen_configs", "chosen_variants", "default_config", "involution_forward",
           "involution_grad_input", "involution_grad_weight", "launch_config"]


#: The three kernels, in the order a forward + backward launches them.
KERNELS = ("forward", "grad_input", "grad_weight")

def _require_triton() -> None:
    if not HAVE_TRITON:
        raise RuntimeError("the involution Triton kernels need triton, which is not installed")


# Kernel parameters stay unannotated (hence the type: ignore): triton gives annotations meaning
# (constexpr, specialisation hints), so only the constexpr ones carry one.  Ints equal to 1 (a
# stride or dilation of 1) are specialised by triton, so the stride-1 divisions fold away.
#: Size arguments triton need not specialise (on divisibility by 16, or on being 1): fewer
#: compiled variants across layer shapes.  N_PIX (the w row stride), CPG, the strides and the
#: dilations stay specialised: a stride or dilation of 1 folds the divisions of grad_input.
_NO_SPECIALIZE = ["B", "C", "H", "W", "Ho", "Wo", "G", "ph", "pw"]

if HAVE_TRITON:

    @triton.jit
    def _pixels(pid, N_ROWS, N_COLS, BLOCK_P: tl.constexpr, TILE_W: tl.constexpr):  # type: ignore[no-untyped-def]
        """(block index of the rest of pid, flat pixel, row, column, in image) of this program's
        pixel block: flattened (TILE_W = 0) or a 2-D tile, the pixel block fastest in pid."""
        lane = tl.arange(0, BLOCK_P)
        if TILE_W == 0:
            n_pb = tl.cdiv(N_ROWS * N_COLS, BLOCK_P)
            p = (pid % n_pb) * BLOCK_P + lane
            ok = p < N_ROWS * N_COLS
            r = p // N_COLS
            col = p % N_COLS
        else:
            n_tc = tl.cdiv(N_COLS, TILE_W)
            n_pb = tl.cdiv(N_ROWS, BLOCK_P // TILE_W) * n_tc
            t = pid % n_pb
            r = (t // n_tc) * (BLOCK_P // TILE_W) + lane // TILE_W
            col = (t % n_tc) * TILE_W + lane % TILE_W
            ok = (r < N_ROWS) & (col < N_COLS)
            p = r * N_COLS + col
        return pid // n_pb, p, r, col, ok

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _forward_kernel(  # type: ignore[no-untyped-def]
        x_ptr, w_ptr, out_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        TILE_W: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """out[b, c, p] = sum_k w[b, g, k, p] * x[b, c, tap k of output pixel p]."""
        n_cb = tl.cdiv(CPG, BLOCK_C)
        pid_bgc, p, ho, wo, p_ok = _pixels(tl.program_id(0), Ho, Wo, BLOCK_P, TILE_W)
        bg = pid_bgc // n_cb
        b = bg // G
        g = bg % G
        c = (pid_bgc % n_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
        c_ok = (c < CPG) | C_EVEN  # C_EVEN: every block full, the mask folds away
        h0 = ho * sh - ph
        w0 = wo * sw - pw
        chan0 = (b * C + g * CPG).to(tl.int64)
        x_rows = x_ptr + chan0 * H * W + c[:, None] * (H * W)
        w_row = w_ptr + bg.to(tl.int64) * (KH * KW) * N_PIX + p
        acc = tl.zeros([BLOCK_C, BLOCK_P], dtype=ACC)
        for i in range(KH):  # a runtime loop: compile time stays seconds, not minutes
            hi = h0 + i * dh
            h_ok = p_ok & (hi >= 0) & (hi < H)
            for j in tl.static_range(KW):
                wi = w0 + j * dw
                ok = h_ok & (wi >= 0) & (wi < W)
                wv = tl.load(w_row + (i * KW + j) * N_PIX, mask=p_ok, other=0.0).to(ACC)
                off = tl.where(ok, hi * W + wi, 0)
                xv = tl.load(x_rows + off[None, :], mask=c_ok[:, None] & ok[None, :],
                             other=0.0).to(ACC)
                acc += xv * wv[None, :]
        out = out_ptr + chan0 * N_PIX + c[:, None] * N_PIX + p[None, :]
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=c_ok[:, None] & p_ok[None, :])

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _grad_input_kernel(  # type: ignore[no-untyped-def]
        go_ptr, w_ptr, gx_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        TILE_W: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """grad_x[b, c, q] = sum over taps k of go[b, c, o] * w[b, g, k, o], o the output pixel
        that reads q through tap k: q + padding - k*dilation = o*stride (rows and columns)."""
        n_out = Ho * Wo
        n_cb = tl.cdiv(CPG, BLOCK_C)
        pid_bgc, q, hq, wq, q_ok = _pixels(tl.program_id(0), H, W, BLOCK_P, TILE_W)
        bg = pid_bgc // n_cb
        b = bg // G
        g = bg % G
        c = (pid_bgc % n_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
        c_ok = (c < CPG) | C_EVEN
        hq = hq + ph
        wq = wq + pw
        chan0 = (b * C + g * CPG).to(tl.int64)
        go_rows = go_ptr + chan0 * n_out + c[:, None] * n_out
        w_base = w_ptr + bg.to(tl.int64) * (KH * KW) * n_out
        acc = tl.zeros([BLOCK_C, BLOCK_P], dtype=ACC)
        for i in range(KH):  # a runtime loop: compile time stays seconds, not minutes
            th = hq - i * dh
            # Clamp before dividing: the sign convention of // and % on negatives differs
            # between compiled Triton and the interpreter; negatives are masked out anyway.
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
                gov = tl.load(go_rows + o[None, :], mask=c_ok[:, None] & hit[None, :],
                              other=0.0).to(ACC)
                acc += gov * wv[None, :]
        gx = gx_ptr + chan0 * N_PIX + c[:, None] * N_PIX + q[None, :]
        tl.store(gx, acc.to(gx_ptr.dtype.element_ty), mask=c_ok[:, None] & q_ok[None, :])

    @triton.jit(do_not_specialize=_NO_SPECIALIZE)
    def _grad_weight_kernel(  # type: ignore[no-untyped-def]
        go_ptr, x_ptr, gw_ptr,
        N_PIX, B, C, H, W, Ho, Wo, G, CPG, sh, sw, ph, pw, dh, dw,
        KH: tl.constexpr, KW: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
        TILE_W: tl.constexpr, C_EVEN: tl.constexpr, ACC: tl.constexpr,
    ):
        """grad_w[b, g, k, p] = sum over channels c of group g of go[b, c, p] * x[b, c, tap k]."""
        bg, p, ho, wo, p_ok = _pixels(tl.program_id(0), Ho, Wo, BLOCK_P, TILE_W)
        b = bg // G
        g = bg % G
        c = tl.arange(0, BLOCK_C)
        h0 = ho * sh - ph
        w0 = wo * sw - pw
        chan0 = (b * C + g * CPG).to(tl.int64)
        x_rows = x_ptr + chan0 * H * W + c[:, None] * (H * W)
        go_rows = go_ptr + chan0 * N_PIX + c[:, None] * N_PIX
        gw_row = gw_ptr + bg.to(tl.int64) * (KH * KW) * N_PIX + p
        # a group wider than BLOCK_C (not RedNet's 16 channels) is summed chunk by chunk: the
        # program owns its grad_w elements, so it adds each chunk to what the last one stored
        for c0 in range(0, CPG, BLOCK_C):
            cc_ok = (c0 + c < CPG) | C_EVEN
            gov = tl.load(go_rows + c0 * N_PIX + p[None, :], mask=cc_ok[:, None] & p_ok[None, :],
                          other=0.0).to(ACC)
            for i in range(KH):  # a runtime loop: compile time stays seconds, not minutes
                hi = h0 + i * dh
                h_ok = p_ok & (hi >= 0) & (hi < H)
                for j in tl.static_range(KW):
                    wi = w0 + j * dw
                    ok = h_ok & (wi >= 0) & (wi < W)
                    off = tl.where(ok, hi * W + wi, 0)
                    xv = tl.load(x_rows + c0 * (H * W) + off[None, :],
                                 mask=cc_ok[:, None] & ok[None, :], other=0.0).to(ACC)
                    s = tl.sum(gov * xv, axis=0)
                    dst = gw_row + (i * KW + j) * N_PIX
                    if c0 > 0:
                        s += tl.load(dst, mask=p_ok, other=0.0).to(ACC)
                    tl.store(dst, s.to(gw_ptr.dtype.element_ty), mask=p_ok)

    def _tuned(kernel: Any, image: tuple[str, str]) -> Any:
        """`kernel` autotuned over CONFIGS; `image`: the names of its pixel grid's sizes."""

        def prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
            fits = set(tuning_candidates(int(named_args[image[0]]), int(named_args[image[1]])))
            return [c for c in configs
                    if (c.kwargs["BLOCK_P"], c.num_warps, c.kwargs["TILE_W"]) in fits]

        def bench(fn: Any, quantiles: Any = None, **_: Any) -> Any:
            return triton.testing.do_bench(fn, warmup=TUNE_WARMUP_MS, rep=TUNE_REP_MS,
                                           quantiles=quantiles)

        return triton.autotune(
            configs=[triton.Config({"BLOCK_P": bp, "TILE_W": tw}, num_warps=nw)
                     for bp, nw, tw in CONFIGS],
            key=["N_PIX", "B", "C", "H", "W", "Ho", "Wo", "G", "sh", "sw", "dh", "dw", "KH",
                 "KW"],
            prune_configs_by={"early_config_prune": prune},
            do_bench=bench,
        )(kernel)

    _JIT = {"forward": _forward_kernel, "grad_input": _grad_input_kernel,
            "grad_weight": _grad_weight_kernel}
    _TUNED = {name: _tuned(k, ("H", "W") if name == "grad_input" else ("Ho", "Wo"))
              for name, k in _JIT.items()}

Config = tuple[int, int, int]


def _launch(name: str, plan: Plan, dtype: torch.dtype, *tensors: torch.Tensor,
            config: Config | None = None) -> None:
    """Launch NCHW kernel `name` on `tensors` as `plan`'s Step says (made on its first launch):
    autotuned, or at `config` (BLOCK_P, num_warps, TILE_W), or at default_config."""
    step = plan.steps.get("nchw")
    if step is None:
        geo, bc = plan.geo, block_c(plan.geo["CPG"])
        const = {"KH": geo["KH"], "KW": geo["KW"], "BLOCK_C": bc, "C_EVEN": geo["CPG"] % bc == 0,
                 "ACC": kcl.acc_dtype(dtype)}
        step = plan.steps["nchw"] = make_step(name, "nchw", plan, const, config)
    if step.config is None:
        tuned = _TUNED[name]
        tuned[step.grid](*tensors, *step.args, **step.const)
        best = tuned.best_config
        record_step(step, (int(best.kwargs["BLOCK_P"]), int(best.num_warps),
                           int(best.kwargs["TILE_W"])))
        return
    _JIT[name][step.grid](*tensors, *step.args, **step.const)
    record_step(step)


def _check_dtypes(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        got = sorted([str(a.dtype), str(b.dtype)])
        raise TypeError(f"involution kernels need one dtype, got {got}")


def _run_variant(kernel: str, plan: Plan, runs: dict[str, Callable[[], torch.Tensor]],
                 variant: str | None, config: Config | None, switches: Switches | None = None,
                 layouts: kcl.LayoutCache | None = None) -> torch.Tensor:
    """Run `variant` of `kernel`, or the one involution_select picks for `plan`'s key (timed once
    per shape on a GPU, conversions included: LayoutCache.clock); a `config` alone runs NCHW."""
    return select.run(kernel, plan.key, runs, variant=variant or ("nchw" if config else None),
                      channels_last=plan.key[-1] == "channels_last",
                      timer=(layouts or kcl.LayoutCache()).clock if plan.timed else None,
                      env=switches.variant if switches else None)


# The launchers' `switches`: the environment as their caller read it (read here when not given);
# `layouts`: its LayoutCache (a forward and its backward share copies through it).
_NCHW, _CL = torch.contiguous_format, torch.channels_last


def involution_forward(
    x: torch.Tensor, w: torch.Tensor, s: IntPair = 1, p: IntPair = 0, d: IntPair = 1,
    config: Config | None = None, variant: str | None = None, *,
    switches: Switches | None = None, layouts: kcl.LayoutCache | None = None,
) -> torch.Tensor:
    """out [B, C, Ho, Wo] from x [B, C, H, W] and w [B, G, KH, KW, Ho, Wo]; channels-last
    memory when the channels-last kernels ran."""
    _require_triton()
    _check_dtypes(x, w)
    sw = switches or read_switches()
    plan = launch_plan("forward", x.shape, w.shape, s, p, d, x.dtype, kcl.is_channels_last(x),
                       config, sw)
    if plan.nothing:
        return x.new_empty(plan.shape)
    layouts = layouts or kcl.LayoutCache()
    get = layouts.get

    def nchw() -> torch.Tensor:
        out = x.new_empty(plan.shape)
        _launch("forward", plan, x.dtype, get(x, _NCHW), get(w, _NCHW), out, config=config)
        return out

    def cl() -> torch.Tensor:
        out = torch.empty(plan.shape, dtype=x.dtype, device=x.device, memory_format=_CL)
        kcl.launch("forward", "cl", plan, x.dtype, get(x, _CL), get(w, _NCHW), out,
                   config=config)
        return out

    return _run_variant("forward", plan, {"nchw": nchw, "cl": cl}, variant, config, sw, layouts)


def involution_grad_input(
    go: torch.Tensor, w: torch.Tensor, x_shape: Sequence[int], s: IntPair = 1, p: IntPair = 0,
    d: IntPair = 1, config: Config | None = None, variant: str | None = None, *,
    switches: Switches | None = None, layouts: kcl.LayoutCache | None = None,
) -> torch.Tensor:
    """grad of x [B, C, H, W] from grad_output [B, C, Ho, Wo] and w."""
    _require_triton()
    _check_dtypes(go, w)
    sw = switches or read_switches()
    plan = launch_plan("grad_input", x_shape, w.shape, s, p, d, go.dtype,
                       kcl.is_channels_last(go), config, sw)
    if plan.nothing:  # nothing to write, or no output pixel reads x: all zeros
        return w.new_zeros(plan.shape)
    layouts = layouts or kcl.LayoutCache()
    get = layouts.get

    # the copies also materialise a stride-0 grad_output (e.g. from out.sum().backward())
    def nchw() -> torch.Tensor:
        gx = w.new_empty(plan.shape)  # every element written once by the kernel
        _launch("grad_input", plan, w.dtype, get(go, _NCHW), get(w, _NCHW), gx, config=config)
        return gx

    def cl() -> torch.Tensor:
        gx = torch.empty(plan.shape, dtype=w.dtype, device=w.device, memory_format=_CL)
        kcl.launch("grad_input", "cl", plan, w.dtype, get(go, _CL), get(w, _NCHW), gx,
                   config=config)
        return gx

    return _run_variant("grad_input", plan, {"nchw": nchw, "cl": cl}, variant, config, sw, layouts)


def involution_grad_weight(
    go: torch.Tensor, x: torch.Tensor, w_shape: Sequence[int], s: IntPair = 1, p: IntPair = 0,
    d: IntPair = 1, config: Config | None = None, variant: str | None = None, *,
    switches: Switches | None = None, layouts: kcl.LayoutCache | None = None,
) -> torch.Tensor:
    """grad of w [B, G, KH, KW, Ho, Wo] from grad_output [B, C, Ho, Wo] and x."""
    _require_triton()
    _check_dtypes(go, x)
    sw = switches or read_switches()
    plan = launch_plan("grad_weight", x.shape, w_shape, s, p, d, x.dtype,
                       kcl.is_channels_last(x), config, sw)
    if plan.nothing:
        return x.new_empty(plan.shape)
    layouts = layouts or kcl.LayoutCache()
    get = layouts.get

    def nchw() -> torch.Tensor:
        gw = x.new_empty(plan.shape)  # every element written once
        _launch("grad_weight", plan, x.dtype, get(go, _NCHW), get(x, _NCHW), gw, config=config)
        return gw

    def cl(vec: str) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            gw = x.new_empty(plan.shape)
            kcl.launch("grad_weight", vec, plan, x.dtype, get(go, _CL), get(x, _CL), gw,
                       config=config)
            return gw
        return run

    runs = {"nchw": nchw, "cl": cl("cl"), "cl_vec": cl("cl_vec")}
    return _run_variant("grad_weight", plan, runs, variant, config, sw, layouts)

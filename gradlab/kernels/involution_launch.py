"""The launch geometry of the involution Triton kernels, in plain Python (no triton needed):
block sizes, the autotuning candidates, the grid.  gradlab/kernels/involution_shapes.py checks
it against CUDA's limits for every RedNet layer without launching anything."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["AUTOTUNE_ENV", "AUTOTUNE_MODES", "CL_CONFIGS", "CONFIGS", "MAX_BLOCK_C",
           "TUNE_REP_MS", "TUNE_WARMUP_MS", "VARIANT_ENV", "VECTOR_BYTES", "LaunchConfig", "Plan",
           "Step", "Switches",
           "autotune_mode", "autotuning", "block_c", "chosen_configs", "cl_default_config",
           "cl_tuning_candidates", "default_config", "launch_config", "make_step",
           "pixel_blocks", "plan", "read_switches", "record_step",
           "tuning_candidates",
           "variant_timing", "vector_channels"]

IntPair = int | Sequence[int]


#: The channel block: the whole group up to this many channels (RedNet: C/G = 16).  Register
#: use per thread is about 2 x BLOCK_C x (pixels per thread) float32 values.
MAX_BLOCK_C = 32

#: The autotuner's candidates, (BLOCK_P, num_warps, TILE_W).  BLOCK_P >= 32 * num_warps keeps the
#: channel axis inside each thread (grad_weight's reduction never crosses threads); 256/4 gives
#: each thread two pixels (more loads in flight per thread, half the programs).  TILE_W = 0: the
#: block is BLOCK_P consecutive pixels of the flattened image (no lane wasted on a 7x7 image);
#: TILE_W > 0: a 2-D tile of BLOCK_P / TILE_W rows x TILE_W columns, whose input window (tile +
#: halo) is smaller than a flattened block's on wide images, so more of it stays in L1 across
#: the K² taps (a 128-pixel block of a 56-wide image reads 8.3 x 62 input pixels, a 4 x 32 tile
#: 10 x 38).
CONFIGS: tuple[tuple[int, int, int], ...] = (
    (64, 2, 0), (128, 4, 0), (256, 4, 0), (128, 4, 16), (128, 4, 32), (256, 8, 32))

#: The channels-last kernels' candidates (gradlab/kernels/involution_triton_cl.py), as
#: (BLOCK_P, num_warps, 0): flattened pixel blocks only.  Their tile is [BLOCK_P, BLOCK_C] with
#: the channels contiguous, a thread holding one pixel's 16-byte channel vectors, so a warp covers
#: 32 / (BLOCK_C / VEC) pixels (8 for RedNet's 16 float32 channels); 64..256 pixels over 2..8
#: warps gives each thread 2-8 vectors to keep in flight.
CL_CONFIGS: tuple[tuple[int, int, int], ...] = ((64, 2, 0), (128, 4, 0), (256, 4, 0),
                                                (256, 8, 0))

#: Bytes per vector load: 16 (LDG.128), the widest a thread issues.
VECTOR_BYTES = 16

#: Environment switch: "0" launches default_config instead of autotuning and chooses the kernel
#: variant by the input's layout (the GPU tests use it, so 86 layer shapes do not each run a
#: tuning sweep; tests/test_triton_shapes.py checks every config separately); "variants" times
#: the variants (gradlab/kernels/involution_select.py) at their default block sizes but tunes no
#: block size: one compile per kernel variant instead of one per candidate (the GPU command's
#: time-boxed benchmark); "1" (the default) does both.
AUTOTUNE_ENV = "GRADLAB_INVOLUTION_AUTOTUNE"
AUTOTUNE_MODES = ("0", "variants", "1")
#: Environment switch forcing a kernel variant (gradlab/kernels/involution_select.py says how).
VARIANT_ENV = "GRADLAB_INVOLUTION_VARIANT"

#: Launches of fewer multiply-adds (B*C*Ho*Wo*KH*KW) than this run default_config: a few
#: microseconds of work, where the candidates differ by less than launch latency, while a tuning
#: sweep compiles every candidate (1.5-6 s each).  `gradlab check`'s small cases stay at one
#: compile per kernel and dtype; RedNet's layers (1e8 and more) are tuned.
AUTOTUNE_MIN_WORK = 1 << 24

#: Autotuner timing per candidate (ms): short, as the candidates differ by 10% or more.
TUNE_WARMUP_MS = 5
TUNE_REP_MS = 25


def _pow2(n: int) -> int:
    """The smallest power of two >= n (>= 1)."""
    return 1 << max(n - 1, 0).bit_length()


def block_c(cpg: int) -> int:
    """Channels per program: the group's channel count padded to a power of two, capped."""
    return min(_pow2(cpg), MAX_BLOCK_C)


def default_config(rows: int, cols: int) -> tuple[int, int, int]:
    """(BLOCK_P, num_warps, TILE_W) without autotuning: one pixel per thread, a flattened
    block of 64..128 pixels."""
    block_p = max(64, min(128, _pow2(rows * cols)))
    return block_p, block_p // 32, 0


def tuning_candidates(rows: int, cols: int) -> list[tuple[int, int, int]]:
    """The CONFIGS worth timing on a rows x cols image: no block over twice the pixel count, no
    2-D tile wider than 4/3 of the image (most of its lanes would idle)."""
    fits = [c for c in CONFIGS if c[0] <= max(64, _pow2(rows * cols))
            and (c[2] == 0 or (3 * c[2] <= 4 * cols and c[0] // c[2] <= 2 * rows))]
    return fits or [CONFIGS[0]]


def cl_default_config(pixels: int) -> tuple[int, int, int]:
    """The channels-last kernels' block without autotuning: 64..128 pixels, 2..4 warps."""
    block_p = max(64, min(128, _pow2(pixels)))
    return block_p, block_p // 32, 0


def cl_tuning_candidates(pixels: int) -> list[tuple[int, int, int]]:
    """The CL_CONFIGS worth timing on an image of `pixels`: no block over twice the pixels."""
    return [c for c in CL_CONFIGS if c[0] <= max(64, _pow2(pixels))] or [CL_CONFIGS[0]]


def vector_channels(cpg: int, itemsize: int) -> int:
    """Channels per 16-byte vector (4 float32, 8 16-bit), at most the group's padded width."""
    return max(1, min(VECTOR_BYTES // itemsize, block_c(cpg)))


def autotune_mode() -> str:
    """GRADLAB_INVOLUTION_AUTOTUNE's value (AUTOTUNE_MODES; unset: "1")."""
    mode = os.environ.get(AUTOTUNE_ENV, "1").strip() or "1"
    if mode not in AUTOTUNE_MODES:
        raise ValueError(f"{AUTOTUNE_ENV}={mode!r}: expected one of {', '.join(AUTOTUNE_MODES)}")
    return mode


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


class Switches(NamedTuple):
    """The environment's switches as one call reads them, once (read_switches): a forward and
    its backward, or one direct launcher call."""

    #: GRADLAB_INVOLUTION_AUTOTUNE (AUTOTUNE_MODES)
    autotune: str
    #: TRITON_INTERPRET=1: nothing is timed or tuned
    interpreted: bool
    #: GRADLAB_INVOLUTION_VARIANT: "auto" or a variant (checked by involution_select)
    variant: str


def read_switches() -> Switches:
    """The switches as the environment sets them now (an unknown autotune mode raises)."""
    return Switches(autotune_mode(), _interpreted(),
                    os.environ.get(VARIANT_ENV, "auto").strip() or "auto")


def _large_compiled(work: int | None, interpreted: bool | None = None) -> bool:
    if interpreted is None:
        interpreted = _interpreted()
    return not interpreted and (work is None or work >= AUTOTUNE_MIN_WORK)


def autotuning(work: int | None = None, mode: str | None = None,
               interpreted: bool | None = None) -> bool:
    """Whether a launch of `work` multiply-adds autotunes its block size: on a compiled GPU
    path in mode "1", and only from AUTOTUNE_MIN_WORK on (`mode`, `interpreted`: the switches
    as a call read them; the environment's now when not given)."""
    return (mode or autotune_mode()) == "1" and _large_compiled(work, interpreted)


def variant_timing(work: int | None = None, mode: str | None = None,
                   interpreted: bool | None = None) -> bool:
    """Whether a launch of `work` multiply-adds times the kernel variants (once per shape):
    on a compiled GPU path in mode "1" or "variants", from AUTOTUNE_MIN_WORK on."""
    return (mode or autotune_mode()) != "0" and _large_compiled(work, interpreted)


#: The shape fields of a launch's record, in its key's order.
SHAPE_KEYS = ("dtype", "B", "C", "G", "H", "W", "KH", "KW", "sh", "sw", "dh", "dw")
#: (kernel, variant, shape key) -> ((BLOCK_P, num_warps, TILE_W), how chosen), every launch.
_CHOSEN: dict[tuple[str, str, tuple[Any, ...]], tuple[tuple[int, int, int], str]] = {}


def shape_key(geo: dict[str, int], dtype: object) -> tuple[Any, ...]:
    """A launch's shape as the records key it: dtype name, then SHAPE_KEYS' sizes."""
    return (str(dtype).removeprefix("torch."), *(geo[k] for k in SHAPE_KEYS[1:]))


def record_step(step: Step, config: tuple[int, int, int] | None = None) -> None:
    """Record a Step's launch (`config`: the one the autotuner chose, for a tuned Step)."""
    cfg = config or step.config
    assert cfg is not None, "an autotuned Step is recorded with the config it ran"
    _CHOSEN[step.record] = (cfg, step.how)


def chosen_configs() -> list[dict[str, Any]]:
    """Every (kernel, variant, shape) launched so far with the block size, warps and tile it
    ran (variant: gradlab/kernels/involution_select.py)."""
    return [{"kernel": kernel, "variant": variant, **dict(zip(SHAPE_KEYS, key, strict=True)),
             "BLOCK_P": cfg[0], "num_warps": cfg[1], "TILE_W": cfg[2], "chosen_by": how}
            for (kernel, variant, key), (cfg, how) in _CHOSEN.items()]


def pixel_blocks(rows: int, cols: int, block_p: int, tile_w: int) -> int:
    """Pixel blocks covering a rows x cols image (as the kernels compute them)."""
    if tile_w == 0:
        return -(-(rows * cols) // block_p)
    return -(-rows // (block_p // tile_w)) * -(-cols // tile_w)


@dataclass(frozen=True)
class LaunchConfig:
    """One launch: a 1-D grid of (batch x group x channel block) x pixel block programs, the
    pixel block fastest (neighbouring pixel blocks, which share a halo, run side by side)."""

    grid: tuple[int, int, int]
    block_c: int
    block_p: int
    #: pixel blocks per (batch, group, channel block); x block_p: the pixel lanes launched
    n_pb: int


def launch_config(kernel: str, rows: int, cols: int, batch: int, groups: int, cpg: int,
                  block_p: int, tile_w: int = 0) -> LaunchConfig:
    """The grid of `kernel` over a rows x cols image (the output; the input for grad_input):
    forward and grad_input split a group's channels over programs, grad_weight reduces over
    them inside one program.  Plain Python (checked without triton)."""
    bc = block_c(cpg)
    n_cb = 1 if kernel == "grad_weight" else -(-cpg // bc)
    n_pb = pixel_blocks(rows, cols, block_p, tile_w)
    return LaunchConfig((n_pb * batch * groups * n_cb, 1, 1), bc, block_p, n_pb)


def pair(v: IntPair) -> tuple[int, int]:
    """(v, v) for an int, the two ints of a 2-sequence otherwise."""
    if isinstance(v, int):
        return (v, v)
    a, b = v
    return (int(a), int(b))


def geometry(
    x_shape: Sequence[int], w_shape: Sequence[int], stride: IntPair, padding: IntPair,
    dilation: IntPair,
) -> dict[str, int]:
    """Every size a kernel needs, checked for consistency between x and w."""
    if len(x_shape) != 4 or len(w_shape) != 6:
        raise ValueError(f"expected x [B,C,H,W] and w [B,G,KH,KW,Ho,Wo], got {tuple(x_shape)} "
                         f"and {tuple(w_shape)}")
    b, c, h, w = (int(n) for n in x_shape)
    wb, g, kh, kw, ho, wo = (int(n) for n in w_shape)
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    exp_ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    exp_wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if wb != b or g <= 0 or c % g or (ho, wo) != (exp_ho, exp_wo):
        raise ValueError(f"w shape {tuple(w_shape)} does not fit x shape {tuple(x_shape)} "
                         f"(expected [{b}, G | {c}, KH, KW, {exp_ho}, {exp_wo}])")
    return {"B": b, "C": c, "H": h, "W": w, "Ho": ho, "Wo": wo, "G": g, "CPG": c // g,
            "KH": kh, "KW": kw, "sh": sh, "sw": sw, "ph": ph, "pw": pw, "dh": dh, "dw": dw}


@dataclass(frozen=True)
class Step:
    """One kernel variant's launch at one shape, dtype and block size, built on its first launch:
    the size arguments after the tensors, the constexprs, the grid (a tuple for a fixed block
    size, a function of the config when autotuned) and the key its record goes under."""

    args: tuple[int, ...]
    const: dict[str, Any]
    grid: tuple[int, int, int] | Callable[[dict[str, Any]], tuple[int, int, int]]
    #: (BLOCK_P, num_warps, TILE_W) for a fixed launch; None when autotuned
    config: tuple[int, int, int] | None
    how: str
    record: tuple[Any, ...]


@dataclass
class Plan:
    """What one launcher call derives from its shapes and the environment's switches, kept per
    (kernel, shapes, geometry, dtype, input layout, block size, switches): the checked geometry,
    the selector's key, whether the variants are timed and whether each launch autotunes, and
    each variant's Step once launched."""

    geo: dict[str, int]
    key: tuple[Any, ...]
    timed: bool
    autotune: bool
    #: the launcher's result shape, and whether it has nothing to compute (an empty tensor, or
    #: for grad_input no output pixel reading x: zeros)
    shape: tuple[int, ...]
    nothing: bool
    steps: dict[str, Step] = field(default_factory=dict)


#: Plans by launcher call (plan()'s key); a few per layer shape, never evicted.
_PLANS: dict[tuple[Any, ...], Plan] = {}


def plan(kernel: str, x_shape: Sequence[int], w_shape: Sequence[int], stride: IntPair,
         padding: IntPair, dilation: IntPair, dtype: object, channels_last: bool,
         config: tuple[int, int, int] | None, switches: Switches | None = None) -> Plan:
    """The Plan of one launch of `kernel`: built on the first call with these arguments and
    switches (read from the environment when not given), reused after."""
    mode, interpreted, _ = switches or read_switches()
    key: tuple[Any, ...] | None = (kernel, x_shape, w_shape, stride, padding, dilation, dtype,
                                   channels_last, config, mode, interpreted)
    try:  # the Function passes pairs: hashable as given
        found = _PLANS.get(key)  # type: ignore[arg-type]
    except TypeError:  # a list somewhere: not kept
        key, found = None, None
    if found is not None:
        return found
    made = _new_plan(kernel, (tuple(x_shape), tuple(w_shape), pair(stride), pair(padding),
                              pair(dilation)), dtype, channels_last, config, mode, interpreted)
    if key is not None:
        _PLANS[key] = made
    return made


def _new_plan(kernel: str, shapes: tuple[Any, ...], dtype: object, channels_last: bool,
              config: tuple[int, int, int] | None, mode: str, interpreted: bool) -> Plan:
    geo = geometry(*shapes)
    rows, cols = (geo["H"], geo["W"]) if kernel == "grad_input" else (geo["Ho"], geo["Wo"])
    work = geo["B"] * geo["C"] * rows * cols * geo["KH"] * geo["KW"]
    if kernel == "forward":
        shape: tuple[int, ...] = (geo["B"], geo["C"], geo["Ho"], geo["Wo"])
    else:
        shape = shapes[1] if kernel == "grad_weight" else shapes[0]
    nothing = not math.prod(shape)
    if kernel == "grad_input":  # no output pixel reads x: zeros, not nothing
        nothing = nothing or not (math.prod(shapes[1]) and geo["Ho"] * geo["Wo"])
    return Plan(geo, (*shape_key(geo, dtype), "channels_last" if channels_last else "other"),
                timed=variant_timing(work, mode, interpreted),
                autotune=config is None and autotuning(work, mode, interpreted),
                shape=shape, nothing=nothing)


def make_step(kernel: str, variant: str, plan: Plan, const: dict[str, Any],
              config: tuple[int, int, int] | None) -> Step:
    """The Step of `variant` of `kernel` at `plan`'s shape, given its constexprs: autotuned when
    the plan says so, else at `config` or the variant's default block size ("nchw":
    default_config, the channels-last ones: cl_default_config, flattened pixels only)."""
    geo = plan.geo
    rows, cols = (geo["H"], geo["W"]) if kernel == "grad_input" else (geo["Ho"], geo["Wo"])
    args = (rows * cols, geo["B"], geo["C"], geo["H"], geo["W"], geo["Ho"], geo["Wo"], geo["G"],
            geo["CPG"], geo["sh"], geo["sw"], geo["ph"], geo["pw"], geo["dh"], geo["dw"])
    record = (kernel, variant, plan.key[:-1])

    def grid(meta: dict[str, Any]) -> tuple[int, int, int]:
        return launch_config(kernel, rows, cols, geo["B"], geo["G"], geo["CPG"],
                             int(meta["BLOCK_P"]), int(meta.get("TILE_W", 0))).grid

    if plan.autotune:
        return Step(args, const, grid, None, "autotune", record)
    nchw = variant == "nchw"
    if config is None:
        cfg = default_config(rows, cols) if nchw else cl_default_config(rows * cols)
    else:
        cfg = config if nchw else (config[0], config[1], 0)
    fixed = {**const, "BLOCK_P": cfg[0], "num_warps": cfg[1]}
    if nchw:  # the channels-last kernels have no 2-D tiles
        fixed["TILE_W"] = cfg[2]
    return Step(args, fixed, grid(fixed), cfg, "given" if config else "default", record)

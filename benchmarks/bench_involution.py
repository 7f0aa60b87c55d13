"""Benchmark the bundled involution's Triton kernels against the unfold reference (issue 29).

At the RedNet-50 stage shapes (the involution that replaces each bottleneck's 3x3 conv: C = 64,
128, 256, 512 at 56, 28, 14, 7 pixels, K = 7, G = C/16, stride 1, batch 64) it measures, per
dtype, in one run (medians; on CUDA `triton.testing.do_bench`):
  * forward+backward of the custom Function with the current kernels ("new"), with the first
    kernels of issue 24 ("v1", gradlab/kernels/involution_triton_v1.py) and of the unfold-based
    autograd reference;
  * each kernel alone (forward, grad_input, grad_weight), new and v1, against docs/gpu.md's model;
  * the host's milliseconds per forward+backward ("host ms": back-to-back calls, synchronised
    before the first only, so on a GPU the time Python, autograd and the launches take; where
    it is close to the timed forward+backward, the shape is host-bound);
  * memory: the CUDA peak above the inputs during forward+backward (on CPU: the bytes saved);
  * the error of the new kernels against a float64 reference on the first image;
  * the block sizes the autotuner chose (gradlab.kernels.involution_triton.chosen_configs);
then the bundled bench cases of specs/involution.yaml (stride 2, dilation) per phase, and the
goals table of issue 29.

`--predict` prints, without running anything, the model docs/gpu.md quotes (same shapes, same
formulas: tests/test_gpu_command.py checks the doc against it).

    python3 benchmarks/bench_involution.py --predict
    python3 benchmarks/bench_involution.py --device cuda --dtype float32 --dtype float16 --goals
    python3 benchmarks/bench_involution.py --device cpu --batch 1 --shape stage4_c512_7
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.benchmark import Timer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from gradlab import bench
from gradlab.ops.involution import involution, involution_reference

if TYPE_CHECKING:
    from gradlab.kernels.involution_shapes import InvolutionShape

ROOT = Path(__file__).resolve().parents[1]
BENCH_SPEC = ROOT / "specs" / "involution.yaml"

#: Peak DRAM bandwidth by device-name fragment, GB/s (vendor datasheets); first match wins, so a
#: longer fragment comes before its prefix ("GH200" before "H200", "H100 PCIe" before "H100").
PEAK_GBPS = (
    ("GH200 144G", 4900.0),  # HBM3e
    ("GH200", 4000.0),  # HBM3 (96 GB)
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5 ("NVIDIA H100 80GB HBM3")
    ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100", 1555.0),  # 40 GB, SXM4 and PCIe
    ("L40S", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("V100", 900.0),
    ("T4", 320.0),
)

#: Issue 29's goals.  (1) float32 fwd+bwd at most the official CuPy kernels' H200 figures / 1.3
#: (issue 29's table: 1.71, 0.93, 0.91, 1.06 ms at stages 1-4).
OFFICIAL_H200_MS = {"stage1_c64_56": 1.71, "stage2_c128_28": 0.93, "stage3_c256_14": 0.91,
                    "stage4_c512_7": 1.06}
OFFICIAL_FACTOR = 1.3
#: (2) float16 and bfloat16 at least this much faster than float32 at every stage (issue 41;
#: issue 29 asked it of the two larger stages only).
HALF_SPEEDUP_GOAL = 1.6
LARGER_STAGES = tuple(OFFICIAL_H200_MS)
HALF_DTYPES = ("float16", "bfloat16")
#: (3) fwd+bwd at least this many times faster than the unfold reference, in these dtypes.
SPEEDUP_GOAL = 8.0
SPEEDUP_DTYPES = ("float32", "float16")
#: (4) the bundled bench cases of specs/involution.yaml faster than the reference in each phase.
PHASES = ("forward", "backward", "fwd+bwd")

#: Timing batch: the RedNet-50 training batch per GPU at its largest.
BATCH = 64
#: do_bench's warm-up and measuring time per call, ms (each median is over rep / time runs).
WARMUP_MS = 10
REP_MS = 60

# -- the model (docs/gpu.md): loads issued and L1 wavefronts, not DRAM alone ------------------

#: The GPU of the prediction: H200 SXM (the first run's), 132 SMs at 1.98 GHz, 4.8 TB/s HBM3e.
PREDICT_GPU = "H200 SXM"
SMS = 132
CLOCK_HZ = 1.98e9
PREDICT_GBPS = 4800.0
#: Fraction of peak DRAM bandwidth a streaming kernel reaches.
DRAM_EFFICIENCY = 0.8
#: L1 serves one 128-byte line ("wavefront") per clock per SM.
L1_LINE = 128
#: Warp instructions issued per clock per SM (4 schedulers).
ISSUE_PER_CLK = 4
#: Instructions per gathered element and tap in the inner loops: the load, a 64-bit address add
#: (2), the multiply-add, the predicate.
INSTR_PER_TAP = 5
#: Seconds one launch costs at least (Python, autograd, Triton's launcher).
LAUNCH_S = 10e-6
WARP = 32


#: The dilation of the benchmark's layers (InvolutionShape has none: 'same' padding at 1).
DILATION = 1


@dataclass(frozen=True)
class Shape:
    """One RedNet-50 stage's involution, by the name this benchmark's tables give it; the layer
    and its arithmetic (G = C/16, 'same' padding, output size) are the GPU command's
    (gradlab.kernels.involution_shapes.InvolutionShape, at batch 1)."""

    name: str
    layer: InvolutionShape

    def geometry(self) -> tuple[int, int, int]:
        return (self.layer.stride, self.layer.padding, DILATION)

    def inputs(self, batch: int, dtype: torch.dtype, device: str,
               layout: str = "contiguous") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, w (leaves requiring grad) and a grad_output; x and grad_output in channels-last
        memory when `layout` says so (w, 6-D, has no such format)."""
        layer = replace(self.layer, batch=batch)
        o = layer.out_size
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        x = torch.randn(layer.x_shape, dtype=dtype, device=device).contiguous(memory_format=fmt)
        w = torch.randn(layer.w_shape, dtype=dtype, device=device)
        go = torch.randn(batch, layer.channels, o, o, dtype=dtype, device=device).contiguous(
            memory_format=fmt)
        return x.requires_grad_(), w.requires_grad_(), go

    def record(self) -> dict[str, Any]:
        """The shape as the JSON output records it."""
        c = self.layer.channels
        return {"name": self.name, "channels": c, "size": self.layer.size, "k": self.layer.kernel,
                "stride": self.layer.stride, "dilation": DILATION,
                "group_channels": c // self.layer.groups}


def rednet50() -> tuple[Shape, ...]:
    """RedNet-50's four stage layers (gradlab.kernels.involution_shapes.stage_shapes), named
    stageN_cC_H.  Imported here, not at the top: an environment (TRITON_INTERPRET) set before
    the first import of gradlab.kernels still counts."""
    from gradlab.kernels.involution_shapes import stage_shapes

    return tuple(Shape(f"stage{i}_c{s.channels}_{s.size}", s)
                 for i, s in enumerate(stage_shapes(1), 1))


def stride2_layers() -> tuple[Shape, ...]:
    """RedNet-50's stride-2 layers (the first involution of stages 2-4: K = 7 on the stage
    before's width), named stageN_s2_cC_H; timed beside the stages, never modelled."""
    from gradlab.kernels.involution_shapes import layer_shapes

    return tuple(Shape(f"stage{i}_s2_c{s.channels}_{s.size}", s)
                 for i, s in enumerate((s for s in layer_shapes(1) if s.stride == 2), 2))


def all_shapes() -> tuple[Shape, ...]:
    """The shapes a run may time: the four stages, then the stride-2 layers."""
    return (*rednet50(), *stride2_layers())


@dataclass(frozen=True)
class Traffic:
    """Ideal DRAM bytes (each tensor read or written once per kernel) and FLOPs of one layer."""

    fwd_bytes: int  # custom forward: read x, w; write out
    fwd_flops: int  # K² multiply-adds per output element
    custom_bytes: int  # custom forward + backward (three kernels)
    reference_bytes: int  # unfold reference forward + backward
    total_flops: int  # forward + grad_input + grad_weight: 3 x the forward's


def traffic(shape: Shape, batch: int, itemsize: int) -> Traffic:
    """The byte and FLOP counts of one layer at stride 1 (element counts x itemsize)."""
    layer = shape.layer
    pixels = batch * layer.size * layer.size
    x = out = pixels * layer.channels
    w = pixels * layer.groups * layer.kernel ** 2
    cols = out * layer.kernel ** 2  # the unfolded input, and every [B, G, C/G, K², L] product
    custom = 3 * (x + w + out)  # three kernels reading/writing x, w, out once; no zero-fills
    reference = (x + 2 * cols + w + 2 * cols + out) + (out + w + cols) + \
        (out + cols + 2 * cols + w) + (2 * x + cols)
    flops = 2 * layer.kernel ** 2 * out
    return Traffic(fwd_bytes=(x + w + out) * itemsize, fwd_flops=flops,
                   custom_bytes=custom * itemsize, reference_bytes=reference * itemsize,
                   total_flops=3 * flops)


def lines_per_warp_load(width: int, itemsize: int) -> float:
    """128-byte lines one warp's gather touches: 32 consecutive pixels of a flattened block
    fall into 1 + 32/width row pieces, each shifted by the tap, so each spans about one line
    more than its bytes fill."""
    return WARP * itemsize / L1_LINE + 1 + WARP / width


@dataclass(frozen=True)
class KernelModel:
    """One kernel's predicted bounds, seconds."""

    kernel: str
    gathers: float  # gathered elements (element x tap)
    l1_s: float
    issue_s: float
    dram_s: float

    @property
    def seconds(self) -> float:
        return max(self.l1_s, self.issue_s, self.dram_s, LAUNCH_S)

    @property
    def bound(self) -> str:
        named = {"L1": self.l1_s, "issue": self.issue_s, "DRAM": self.dram_s,
                 "launch": LAUNCH_S}
        return max(named, key=named.__getitem__)


def kernel_models(shape: Shape, batch: int, itemsize: int) -> list[KernelModel]:
    """forward, grad_input, grad_weight at stride 1: each gathers K² elements per element of
    its tile (x; grad_output for grad_input), plus the per-pixel w row (shared by the group's
    channels; gathered in grad_input), and moves x, w and out-sized tensors through DRAM once."""
    layer = shape.layer
    taps = layer.kernel ** 2
    elems = batch * layer.channels * layer.size ** 2
    w_elems = batch * layer.groups * taps * layer.size ** 2
    lines = lines_per_warp_load(layer.size, itemsize)
    dram = (2 * elems + w_elems) * itemsize / (PREDICT_GBPS * 1e9 * DRAM_EFFICIENCY)
    out = []
    for kernel, w_gathered in (("forward", False), ("grad_input", True),
                               ("grad_weight", False)):
        gathers = elems * taps
        wavefronts = gathers / WARP * lines + w_elems / WARP * (
            lines if w_gathered else WARP * itemsize / L1_LINE)
        instr = (gathers + w_elems) * INSTR_PER_TAP / WARP
        out.append(KernelModel(kernel, gathers, wavefronts / (SMS * CLOCK_HZ),
                               instr / (SMS * ISSUE_PER_CLK * CLOCK_HZ), dram))
    return out


def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def prediction_table(dtypes: tuple[str, ...] = ("float32", "float16"),
                     batch: int = BATCH) -> str:
    """The model as a Markdown table (docs/gpu.md quotes it verbatim)."""
    lines = [
        f"Predicted on {PREDICT_GPU} ({SMS} SMs at {CLOCK_HZ / 1e9:.2f} GHz, "
        f"{PREDICT_GBPS / 1000:.1f} TB/s at {DRAM_EFFICIENCY:.0%}), batch {batch}, stride 1: "
        f"per kernel the largest of L1 time (one {L1_LINE}-byte line per clock per SM), issue "
        f"time ({INSTR_PER_TAP} instructions per gathered element, {ISSUE_PER_CLK} per clock "
        f"per SM), DRAM time and one launch ({LAUNCH_S * 1e6:.0f} µs).",
        "",
        "| shape | dtype | lines/gather | forward µs | grad_input µs | grad_weight µs | bound "
        "| fwd+bwd ms | goal (1) ms |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for dtype in dtypes:
        for shape in rednet50():
            models = kernel_models(shape, batch, itemsize(dtype))
            total = sum(m.seconds for m in models)
            goal = OFFICIAL_H200_MS[shape.name] / OFFICIAL_FACTOR
            lines.append(
                f"| {shape.name} | {dtype} | "
                f"{lines_per_warp_load(shape.layer.size, itemsize(dtype)):.2f} | "
                + " | ".join(f"{m.seconds * 1e6:.0f}" for m in models)
                + f" | {models[0].bound} | {total * 1e3:.3f} | {goal:.2f} |")
    return "\n".join(lines)


def peak_gbps(device_name: str) -> tuple[float | None, str]:
    """(peak GB/s, where it came from) for a CUDA device name; None for a GPU not listed."""
    for fragment, gbps in PEAK_GBPS:
        if fragment in device_name:
            return gbps, f"datasheet figure for {fragment!r}"
    return None, f"unknown GPU {device_name!r}: no peak bandwidth listed"


# -- the official kernels, loaded at run time from outside this repository --------------------

#: Environment variable naming the official involution kernels (Li et al.'s CuPy code, e.g. a
#: checkout of github.com/d-li14/involution): a Python file, or a folder searched for
#: OFFICIAL_FILES.  They are never vendored into gradlab; the run skips them, saying so, when
#: the variable is unset or the file does not load (it needs cupy, and its imports).
OFFICIAL_ENV = "GRADLAB_OFFICIAL_INVOLUTION"
OFFICIAL_FILES = ("involution_cuda.py", "cls/mmcls/models/utils/involution_cuda.py",
                  "det/mmdet/models/utils/involution_cuda.py")
#: The function the file must define: (input, weight, bias=None, stride, padding, dilation)
#: with weight [B, G, K, K, Ho, Wo], as gradlab's involution takes it.
OFFICIAL_ATTRS = ("_involution_cuda", "involution_cuda")


@contextlib.contextmanager
def official_imports() -> Iterator[None]:
    """What the official file needs from 2021's libraries, where today's lack it: its
    `from mmcv.cnn import ConvModule` (only its nn.Module wrapper uses it, which the benchmark
    does not) gets a stand-in while the file loads, and cupy >= 13, which dropped
    `cupy.cuda.compile_with_cache`, gets it back as RawModule (what it became).  Installed
    packages are left as they are."""
    import types

    stand_ins: dict[str, ModuleType] = {}
    try:
        import mmcv.cnn  # noqa: F401
    except ImportError:
        cnn = types.ModuleType("mmcv.cnn")
        cnn.ConvModule = None  # type: ignore[attr-defined]
        stand_ins = {"mmcv": types.ModuleType("mmcv"), "mmcv.cnn": cnn}
        stand_ins["mmcv"].cnn = cnn  # type: ignore[attr-defined]
    try:
        import cupy
    except ImportError:  # the file's own import then says so
        cupy = None
    if cupy is not None and not hasattr(cupy.cuda, "compile_with_cache"):
        cupy.cuda.compile_with_cache = lambda code, **_: cupy.RawModule(code=code)
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)


def load_official(location: str | None) -> tuple[Callable[..., torch.Tensor] | None, str]:
    """(the official involution as fn(x, w, stride, padding, dilation), where it came from) or
    (None, why it is skipped): one line either way."""
    if not location:
        return None, f"official kernels: skipped ({OFFICIAL_ENV} is not set)"
    path = Path(location).expanduser()
    if path.is_dir():
        path = next((path / f for f in OFFICIAL_FILES if (path / f).is_file()), path)
    if not path.is_file():
        return None, (f"official kernels: skipped ({OFFICIAL_ENV}={location}: no file, nor "
                      f"any of {', '.join(OFFICIAL_FILES)} in that folder)")
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location("gradlab_official_involution", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        with official_imports():
            spec.loader.exec_module(module)
    except Exception as exc:  # a third-party file: any failure skips it
        return None, f"official kernels: skipped ({path} does not load: {exc!r:.200})"
    fn = next((getattr(module, a) for a in OFFICIAL_ATTRS if hasattr(module, a)), None)
    if fn is None:
        return None, f"official kernels: skipped ({path} defines none of {OFFICIAL_ATTRS})"

    def official(x: torch.Tensor, w: torch.Tensor, s: Any, p: Any, d: Any) -> torch.Tensor:
        out: torch.Tensor = fn(x, w, stride=s, padding=p, dilation=d)
        return out

    return official, f"official kernels: {path}"


# -- measuring ---------------------------------------------------------------------------------

#: Time with triton.testing.do_bench on CUDA (the fake-GPU test turns it off).
USE_DO_BENCH = True
LAUNCHERS = ("involution_forward", "involution_grad_input", "involution_grad_weight")


def kernel_modules(names: tuple[str, ...]) -> dict[str, ModuleType]:
    """The kernel sets timed, by name: "new" (gradlab's), "v1" (issue 24's first kernels)."""
    import gradlab.kernels.involution_triton as new
    import gradlab.kernels.involution_triton_v1 as v1

    return {n: {"new": new, "v1": v1}[n] for n in names}


def _plain(launcher: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Another kernel set's launcher as the Function calls the current ones: their switches and
    layout-cache keywords dropped (v1 takes neither)."""
    def call(*args: Any, switches: Any = None, layouts: Any = None) -> torch.Tensor:
        return launcher(*args)
    return call


@contextlib.contextmanager
def kernels_in_function(module: ModuleType) -> Iterator[None]:
    """The custom Function runs `module`'s three launchers inside the block."""
    import gradlab.kernels.involution_triton as kt

    chosen = {n: getattr(module, n) if module is kt else _plain(getattr(module, n))
              for n in LAUNCHERS}
    saved = {n: getattr(kt, n) for n in LAUNCHERS}
    for n, f in chosen.items():
        setattr(kt, n, f)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(kt, n, f)


def timed_ms(fn: Callable[[], object], device: str, min_run_time: float) -> float:
    """Median milliseconds of fn() after a warm-up call (compilation, autotuning)."""
    fn()
    if device == "cuda" and USE_DO_BENCH:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=WARMUP_MS, rep=REP_MS,
                                             return_mode="median"))
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median * 1e3)


#: Back-to-back calls per host-ms figure: enough that the clock's resolution and one slow call
#: hardly count, few enough that the GPU's launch queue (about a thousand kernels; a
#: forward+backward launches under 30) never fills, which would make the host wait for the GPU.
HOST_CALLS = 25


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def host_ms(fn: Callable[[], object], device: str, calls: int = HOST_CALLS) -> float:
    """Wall milliseconds per call of `calls` back-to-back calls after a warm-up call,
    synchronised before the first and never inside the loop: on a GPU the host's own time per
    call (Python, autograd, the launches), below the timed figure where the GPU is the bound."""
    fn()
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    _synchronize(device)  # the queued work, untimed
    return elapsed / calls * 1e3


def fwd_bwd(fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor,
            go: torch.Tensor, geo: tuple[int, int, int]) -> Callable[[], object]:
    return lambda: torch.autograd.grad(fn(x, w, *geo), (x, w), go)


def implementations(mods: dict[str, ModuleType],
                    official: Callable[..., torch.Tensor] | None = None) -> dict[str, Any]:
    """name -> (function, context) for the reference, each kernel set in the Function and the
    official kernels when loaded."""
    impls: dict[str, Any] = {"reference": (involution_reference, contextlib.nullcontext)}
    for name, mod in mods.items():
        impls[name] = (involution, lambda m=mod: kernels_in_function(m))
    if official is not None:
        impls["official"] = (official, contextlib.nullcontext)
    return impls


def impl_host_ms(impls: dict[str, Any], x: torch.Tensor, w: torch.Tensor, go: torch.Tensor,
                 geo: tuple[int, int, int], device: str, names: set[str]) -> dict[str, float]:
    """host_ms of each implementation's forward+backward among `names` (those that ran)."""
    out = {}
    for key in (k for k in impls if k in names):
        fn, ctx = impls[key]
        with ctx():
            out[key] = host_ms(fwd_bwd(fn, x, w, go, geo), device)
    return out


def peak_memory(fn: Callable[[], object], device: str) -> int:
    """CUDA: peak bytes allocated above what was there during fn(); CPU: bytes saved."""
    if device != "cuda":
        return bench.saved_bytes(fn)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def errors(x: torch.Tensor, w: torch.Tensor, go: torch.Tensor,
           geo: tuple[int, int, int]) -> dict[str, float]:
    """max |new - float64| / max |float64| of out, grad x, grad w on the first image (the
    new kernels at the configs they are timed with)."""
    out = involution(x, w, *geo)
    got = (out, *torch.autograd.grad(out, (x, w), go))
    x64, w64 = (t[:1].detach().double().requires_grad_() for t in (x, w))
    ref = involution_reference(x64, w64, *geo)
    want = (ref, *torch.autograd.grad(ref, (x64, w64), go[:1].double()))
    return {name: float((a[:1].detach().double() - b.detach()).abs().max()
                        / b.detach().abs().max().clamp_min(1e-30))
            for name, a, b in zip(("out", "grad_x", "grad_w"), got, want, strict=True)}


def kernel_times(mods: dict[str, ModuleType], x: torch.Tensor, w: torch.Tensor,
                 go: torch.Tensor, geo: tuple[int, int, int], device: str,
                 min_run_time: float) -> dict[str, dict[str, float]]:
    """Each kernel set's forward, grad_input and grad_weight alone, ms."""
    xd, wd = x.detach(), w.detach()
    out: dict[str, dict[str, float]] = {}
    for name, m in mods.items():
        calls = {"forward": lambda m=m: m.involution_forward(xd, wd, *geo),
                 "grad_input": lambda m=m: m.involution_grad_input(go, wd, xd.shape, *geo),
                 "grad_weight": lambda m=m: m.involution_grad_weight(go, xd, wd.shape, *geo)}
        with torch.no_grad():
            out[name] = {k: timed_ms(f, device, min_run_time) for k, f in calls.items()}
    return out


def timed_or_error(fn: Callable[[], object], device: str, min_run_time: float,
                   name: str, failed: dict[str, str]) -> float | None:
    """timed_ms, or None with the error kept in `failed[name]` when the official kernels (a
    third party's code, e.g. without 16-bit support) raise; gradlab's own errors propagate."""
    if name != "official":
        return timed_ms(fn, device, min_run_time)
    try:
        return timed_ms(fn, device, min_run_time)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"[:200]
        return None


def measure(shape: Shape, dtype: str, batch: int, device: str, runs: int,
            min_run_time: float, mods: dict[str, ModuleType],
            per_kernel: bool, official: Callable[..., torch.Tensor] | None = None,
            layout: str = "contiguous") -> dict[str, Any]:
    """One shape and dtype: fwd+bwd ms of every implementation (alternating rounds), each
    kernel alone, memory, the new kernels' error, the model's prediction (stride 1)."""
    x, w, go = shape.inputs(batch, getattr(torch, dtype), device, layout)
    geo = shape.geometry()
    impls = implementations(mods, official)
    times: dict[str, list[float]] = {k: [] for k in impls}
    failed: dict[str, str] = {}
    for r in range(runs):  # alternate the order: drift (clocks, other load) favours none
        order = list(impls) if r % 2 == 0 else list(reversed(impls))
        for key in (k for k in order if k not in failed):
            fn, ctx = impls[key]
            with ctx():
                t = timed_or_error(fwd_bwd(fn, x, w, go, geo), device, min_run_time, key, failed)
            if t is not None:
                times[key].append(t)
    ms = {k: statistics.median(v) for k, v in times.items() if v}
    models = kernel_models(shape, batch, itemsize(dtype)) if shape.layer.stride == 1 else []
    row: dict[str, Any] = {
        "shape": shape.name, "dtype": dtype, "batch": batch, "ms": ms, "failed": failed,
        "host_ms": impl_host_ms(impls, x, w, go, geo, device, set(ms)),
        "model_ms": {m.kernel: m.seconds * 1e3 for m in models},
        "model_bound": {m.kernel: m.bound for m in models},
        "memory": {"new": peak_memory(fwd_bwd(involution, x, w, go, geo), device),
                   "reference": peak_memory(fwd_bwd(involution_reference, x, w, go, geo),
                                            device)},
    }
    if "new" in mods:
        with kernels_in_function(mods["new"]):
            row["errors"] = errors(x, w, go, geo)
    if per_kernel:
        row["kernel_ms"] = kernel_times(mods, x, w, go, geo, device, min_run_time)
        fwd = row["kernel_ms"].get("new", {}).get("forward")
        # DRAM bytes a forward moves / its time: how far from bandwidth-bound (traffic()
        # counts stride 1 only)
        if fwd and shape.layer.stride == 1:
            row["fwd_gbps"] = traffic(shape, batch, itemsize(dtype)).fwd_bytes / fwd / 1e6
    return row


# -- the bundled bench cases (specs/involution.yaml): stride 2, dilation, per phase -------------


def bundled_cases(path: Path = BENCH_SPEC) -> list[dict[str, Any]]:
    """The `bench:` cases of the involution spec: name, x and w shapes, stride/padding/dilation."""
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [{"name": c["name"], "x": tuple(c["args"][0]["shape"]),
             "w": tuple(c["args"][1]["shape"]), "geo": tuple(c["args"][2:5])}
            for c in doc.get("bench", [])]


def phase_ms(fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor,
             geo: tuple[int, int, int], device: str, min_run_time: float) -> dict[str, float]:
    """ms of forward (graph recorded), backward (retained graph) and both, each also as the
    host's ms per call ("<phase> host", host_ms: where the two phases' host figures add up to
    less than both's, the difference is not the phases' own work)."""
    out = fn(x, w, *geo)
    go = torch.randn_like(out)
    calls = {"forward": lambda: fn(x, w, *geo),
             "backward": lambda: torch.autograd.grad(out, (x, w), go, retain_graph=True),
             "fwd+bwd": fwd_bwd(fn, x, w, go, geo)}
    ms = {phase: timed_ms(call, device, min_run_time) for phase, call in calls.items()}
    return ms | {f"{phase} host": host_ms(call, device) for phase, call in calls.items()}


def measure_case(case: dict[str, Any], dtype: str, device: str, min_run_time: float,
                 mods: dict[str, ModuleType],
                 official: Callable[..., torch.Tensor] | None = None) -> dict[str, Any]:
    """ms of forward, backward and both per implementation, on one bundled case."""
    dt = getattr(torch, dtype)
    x = torch.randn(case["x"], dtype=dt, device=device, requires_grad=True)
    w = torch.randn(case["w"], dtype=dt, device=device, requires_grad=True)
    geo = case["geo"]
    ms: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    for name, (fn, ctx) in implementations(mods, official).items():
        with ctx():
            try:
                ms[name] = phase_ms(fn, x, w, geo, device, min_run_time)
            except Exception as exc:
                if name != "official":  # gradlab's own failures are the run's
                    raise
                failed[name] = f"{type(exc).__name__}: {exc}"[:200]
    row = {"case": case["name"], "dtype": dtype, "geometry": list(geo), "ms": ms,
           "failed": failed}
    if "new" in mods:  # the configs the autotuner chose for this geometry, checked
        with kernels_in_function(mods["new"]):
            row["errors"] = errors(x, w, torch.randn_like(involution(x, w, *geo)), geo)
    return row


# -- goals --------------------------------------------------------------------------------------


def goal(number: int, subject: str, value: float, target: float, higher: bool, applies: str
         ) -> dict[str, Any]:
    met = value >= target if higher else value <= target
    status = applies or ("met" if met else "not met")
    return {"goal": number, "subject": subject, "value": value, "target": target,
            "direction": ">=" if higher else "<=", "status": status}


def goals(rows: list[dict[str, Any]], cases: list[dict[str, Any]], device: str,
          device_name: str) -> list[dict[str, Any]]:
    """Issue 29's goals over one run's rows; speed goals apply on CUDA only."""
    na = "" if device == "cuda" else "n/a (a GPU goal)"
    out = []
    by = {(r["shape"], r["dtype"]): r for r in rows}
    for r in rows:
        new = r["ms"].get("new")
        if new is None or r.get("prior"):
            continue
        at_stage = r["shape"] in OFFICIAL_H200_MS
        if r["dtype"] == "float32" and at_stage:
            target = OFFICIAL_H200_MS[r["shape"]] / OFFICIAL_FACTOR
            gpu = "" if "H200" in device_name or not device_name else f" (on {device_name})"
            out.append(goal(1, f"{r['shape']} float32 fwd+bwd ms{gpu}", new, target, False, na))
        if r["dtype"] == "float32" and "official" in r["ms"]:  # measured in this very run
            out.append(goal(1, f"{r['shape']} float32 official (measured) / new", r["ms"][
                "official"] / new, OFFICIAL_FACTOR, True, na))
        if r["dtype"] in SPEEDUP_DTYPES and at_stage:
            out.append(goal(3, f"{r['shape']} {r['dtype']} x unfold reference",
                            r["ms"]["reference"] / new, SPEEDUP_GOAL, True, na))
        if not at_stage:  # a stride-2 layer: faster than the unfold reference
            out.append(goal(4, f"{r['shape']} {r['dtype']} fwd+bwd x reference",
                            r["ms"]["reference"] / new, 1.0, True, na))
        out.append(goal(5, f"{r['shape']} {r['dtype']} memory new/reference",
                        r["memory"]["new"] / max(r["memory"]["reference"], 1), 1.0, False, ""))
    for stage in LARGER_STAGES:
        f32 = by.get((stage, "float32"))
        for half in HALF_DTYPES:
            h = by.get((stage, half))
            if f32 and h and "new" in f32["ms"] and "new" in h["ms"]:
                out.append(goal(2, f"{stage} {half} x float32", f32["ms"]["new"] / h["ms"]["new"],
                                HALF_SPEEDUP_GOAL, True, na))
    for c in cases:
        if "new" in c["ms"]:
            out.extend(goal(4, f"{c['case']} {phase} x reference",
                            c["ms"]["reference"][phase] / c["ms"]["new"][phase], 1.0, True, na)
                       for phase in PHASES)
    return out


# -- words --------------------------------------------------------------------------------------


def f3(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.2f}x" if num and den else "-"


def variant_table(variants: list[dict[str, Any]]) -> list[str]:
    """The kernel variant each (kernel, shape, input layout) ran, how it was chosen, and every
    variant's time when they were timed (gradlab/kernels/involution_select.py)."""
    if not variants:
        return []
    names = sorted({n for v in variants for n in v["variant_ms"]})
    lines = ["", "### Kernel variant per shape (nchw, cl = channels last, cl_vec = channels last "
             "with the channel sum in one thread)", "",
             "| kernel | dtype | B | C | H | K | stride | dilation | input | variant | chosen by | "
             + " | ".join(f"{n} ms" for n in names) + " |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|" + "---:|" * len(names)]
    lines += [f"| {v['kernel']} | {v['dtype']} | {v['B']} | {v['C']} | {v['H']} | {v['KH']} | "
              f"{v['sh']} | {v['dh']} | {v['layout']} | **{v['variant']}** | {v['chosen_by']} | "
              + " | ".join(f3(v["variant_ms"].get(n)) for n in names) + " |" for v in variants]
    return lines


def markdown(rows: list[dict[str, Any]], cases: list[dict[str, Any]],
             table: list[dict[str, Any]], configs: list[dict[str, Any]], header: str,
             variants: list[dict[str, Any]] | None = None) -> str:
    """Every table of the run: stages, kernels, bundled cases, chosen configs, goals."""
    lines = [header, "", "### Forward + backward, ms (medians)", "",
             "| shape | dtype | new | new host | v1 | official | official host | reference "
             "| new vs v1 | official / new | reference / new | model | new MB | reference MB "
             "| max rel. error (out, gx, gw) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("prior"):
            continue
        ms = r["ms"]
        new, v1, off = ms.get("new"), ms.get("v1"), ms.get("official")
        err = r.get("errors")
        model = f"{sum(r['model_ms'].values()):.3f}" if r["model_ms"] else "-"
        host = r.get("host_ms", {})
        lines.append(
            f"| {r['shape']} | {r['dtype']} | {f3(new)} | {f3(host.get('new'))} | {f3(v1)} | "
            f"{f3(off)} | {f3(host.get('official'))} | "
            f"{f3(ms['reference'])} | {ratio(v1, new)} | {ratio(off, new)} | "
            f"{ratio(ms['reference'], new)} | {model} | {r['memory']['new'] / 1e6:.1f} | "
            f"{r['memory']['reference'] / 1e6:.1f} | "
            f"{', '.join(f'{v:.1e}' for v in err.values()) if err else '-'} |")
    if any("kernel_ms" in r for r in rows):
        lines += ["", "### Each kernel alone, ms (model: docs/gpu.md)", "",
                  "| shape | dtype | kernel | new | v1 | model | bound |",
                  "|---|---|---|---:|---:|---:|---|"]
        for r in rows:
            km = r.get("kernel_ms", {})
            for k in ("forward", "grad_input", "grad_weight") if km else ():
                lines.append(f"| {r['shape']} | {r['dtype']} | {k} | "
                             f"{f3(km.get('new', {}).get(k))} | {f3(km.get('v1', {}).get(k))} | "
                             f"{f3(r['model_ms'].get(k))} | {r['model_bound'].get(k, '-')} |")
    if cases:
        lines += ["", "### Bundled bench cases (specs/involution.yaml), ms", "",
                  "| case | dtype | stride, padding, dilation | phase | new | new host | v1 "
                  "| official | reference | reference / new | max rel. error (out, gx, gw) |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for c in cases:
            for phase in PHASES:
                new = c["ms"].get("new", {}).get(phase)
                ref = c["ms"]["reference"][phase]
                err = c.get("errors") if phase == "fwd+bwd" else None
                host = c["ms"].get("new", {}).get(f"{phase} host")
                lines.append(f"| {c['case']} | {c['dtype']} | {c['geometry']} | {phase} | "
                             f"{f3(new)} | {f3(host)} | {f3(c['ms'].get('v1', {}).get(phase))} | "
                             f"{f3(c['ms'].get('official', {}).get(phase))} | {f3(ref)} | "
                             f"{ratio(ref, new)} | "
                             f"{', '.join(f'{v:.1e}' for v in err.values()) if err else ''} |")
    lines += variant_table(variants or [])
    if configs:
        lines += ["", "### Block sizes the new kernels ran with", "",
                  "| kernel | variant | dtype | B | C | G | H | K | stride | dilation | BLOCK_P "
                  "| warps | TILE_W | chosen by |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {c['kernel']} | {c.get('variant', '-')} | {c['dtype']} | {c['B']} | "
                  f"{c['C']} | {c['G']} | {c['H']} | {c['KH']} | {c['sh']} | {c['dh']} | "
                  f"{c['BLOCK_P']} | {c['num_warps']} | {c['TILE_W']} | {c['chosen_by']} |"
                  for c in configs]
    lines += ["", "### Goals (issues 29 and 41)", "",
              "| goal | subject | value | target | status |", "|---:|---|---:|---|---|"]
    lines += [f"| {g['goal']} | {g['subject']} | {g['value']:.3f} | {g['direction']} "
              f"{g['target']:.3g} | {g['status']} |" for g in table]
    return "\n".join(lines)


def write_outputs(args: argparse.Namespace, result: dict[str, Any], table: str) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.csv:
        flat = [{"shape": r["shape"], "dtype": r["dtype"], "batch": r["batch"],
                 **{f"{k}_ms": v for k, v in r["ms"].items()},
                 **{f"{k}_host_ms": v for k, v in r.get("host_ms", {}).items()},
                 **{f"{s}_{k}_ms": v for s, d in r.get("kernel_ms", {}).items()
                    for k, v in d.items()},
                 **{f"model_{k}_ms": v for k, v in r["model_ms"].items()}}
                for r in result["rows"]]
        fields = list(dict.fromkeys(k for f in flat for k in f)) or ["shape"]
        with Path(args.csv).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(flat)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.plot:
        plot(result["rows"], args.plot)


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """fwd+bwd ms per stage and dtype: new, v1, reference (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['shape'].split('_')[0]}\n{r['dtype']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows)) * 1.5, 4))
    keys = [k for k in ("new", "v1", "reference") if any(k in r["ms"] for r in rows)]
    width = 0.8 / max(len(keys), 1)
    for i, k in enumerate(keys):
        ax.bar([j + i * width for j in range(len(rows))], [r["ms"].get(k, 0) for r in rows],
               width, label=k)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))], labels, fontsize=7)
    ax.set(yscale="log", ylabel="ms", title="involution forward+backward")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predict", action="store_true",
                        help="print the model's prediction (docs/gpu.md) and exit")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", action="append", choices=("float32", "float16", "bfloat16"),
                        help="repeatable (default: float32)")
    parser.add_argument("--shape", action="append", choices=[s.name for s in all_shapes()],
                        help="only these shapes (repeatable; default: the four stages and the "
                        "three stride-2 layers)")
    parser.add_argument("--layout", choices=("contiguous", "channels_last"),
                        default="contiguous", help="the memory format of x and grad_output "
                        "(channels_last: the channels-last kernels need no conversion)")
    parser.add_argument("--stages-only", action="store_true",
                        help="the four stage shapes, not the stride-2 layers")
    parser.add_argument("--official", default=os.environ.get(OFFICIAL_ENV),
                        help=f"the official kernels' file or folder (default: ${OFFICIAL_ENV}); "
                        "CUDA only, skipped with a line saying why when absent")
    parser.add_argument("--prior-json", help="an earlier run's --json: its rows count for the "
                        "goals (16-bit against float32 timed in another run)")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--repeats", type=int, default=1,
                        help="alternating rounds of fwd+bwd timing per implementation")
    parser.add_argument("--min-run-time", type=float, default=0.2,
                        help="CPU: seconds per blocked_autorange")
    parser.add_argument("--kernels", action="append", choices=("new", "v1"),
                        help="kernel sets in the Function (repeatable; default on CUDA: new "
                        "and v1, the issue-24 kernels; on CPU none: the Function's torch path)")
    parser.add_argument("--no-cases", action="store_true",
                        help="skip the bundled bench cases of specs/involution.yaml")
    parser.add_argument("--goals", action="store_true",
                        help="exit 1 when a goal that applies is not met")
    parser.add_argument("--json", help="also write everything as JSON here")
    parser.add_argument("--csv", help="also write the stage rows as CSV here")
    parser.add_argument("--markdown", help="also write the tables as Markdown here")
    parser.add_argument("--plot", help="also write a PNG of the times here (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not args.predict and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device")
    if args.batch < 1 or args.repeats < 1:
        parser.error("--batch and --repeats: expected at least 1")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement of the run, as one JSON-able dict."""
    dtypes = tuple(args.dtype or ("float32",))
    pool = rednet50() if args.stages_only else all_shapes()
    shapes = [s for s in pool if not args.shape or s.name in args.shape]
    names = tuple(args.kernels or (("new", "v1") if args.device == "cuda" else ()))
    mods = kernel_modules(names)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    official, official_note = (load_official(args.official) if args.device == "cuda" else
                               (None, "official kernels: skipped (CUDA only)"))
    print(f"torch {torch.__version__}, {args.device} ({name}), batch {args.batch}, kernels "
          f"{', '.join(names) or 'none (torch path)'}\n{official_note}", flush=True)
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            rows.append(measure(shape, dtype, args.batch, args.device, args.repeats,
                                args.min_run_time, mods, bool(mods), official, args.layout))
            ms = rows[-1]["ms"]
            print(f"  {shape.name} {dtype}: " + ", ".join(f"{k} {v:.3f} ms"
                                                         for k, v in ms.items()), flush=True)
            if args.json:  # row by row: a run stopped by its time box keeps what it measured
                Path(args.json).write_text(json.dumps({"partial": True, "rows": rows}) + "\n",
                                           encoding="utf-8")
    cases = [] if args.no_cases else [
        measure_case(c, "float32", args.device, args.min_run_time, mods, official)
        for c in bundled_cases()]
    configs: list[dict[str, Any]] = []
    variants: list[dict[str, Any]] = []
    if "new" in mods:
        configs = mods["new"].chosen_configs()
        variants = mods["new"].chosen_variants()
    prior = prior_rows(args.prior_json)
    return {"torch": torch.__version__, "device": args.device, "device_name": name,
            "batch": args.batch, "layout": args.layout, "kernels": list(names),
            "official": official_note,
            "rows": rows, "cases": cases, "configs": configs, "variants": variants,
            "goals": goals(prior + rows, cases, args.device, name),
            "shapes": [s.record() for s in shapes]}


def prior_rows(path: str | None) -> list[dict[str, Any]]:
    """The rows of an earlier run's JSON (--prior-json), marked prior: they count for goal 2
    (16-bit against float32 measured in another phase) and are not shown again."""
    if not path or not Path(path).is_file():  # that run failed before its first row
        return []
    rows: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    return [{**r, "prior": True} for r in rows]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.predict:
        print(prediction_table())
        return 0
    result = run(args)
    peak, _ = peak_gbps(result["device_name"])
    bw = "; ".join(f"{r['shape']} {r['dtype']} {r['fwd_gbps']:.0f} GB/s"
                   + (f" ({r['fwd_gbps'] / peak:.0%} of peak)" if peak else "")
                   for r in result["rows"] if "fwd_gbps" in r)
    header = (f"{result['device_name']}, torch {result['torch']}, batch {result['batch']}, "
              f"{result['layout']} inputs; "
              f"goal (1) compares with the official kernels' H200 figures / {OFFICIAL_FACTOR}; "
              f"goal (2): 16-bit against float32 at {', '.join(LARGER_STAGES)}; "
              "goal 5: peak memory at most the reference's."
              + (f" New forward kernel, DRAM bytes / time: {bw}." if bw else ""))
    table = markdown(result["rows"], result["cases"], result["goals"], result["configs"],
                     f"{header}\n\n{result['official']}", result["variants"])
    print(table)
    write_outputs(args, result, table)
    missed = [f"({g['goal']}) {g['subject']}" for g in result["goals"]
              if g["status"] == "not met"]
    print(f"goals not met: {', '.join(missed)}" if missed else "goals: all that apply met")
    return 1 if args.goals and missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the bundled involution Function against the unfold-based autograd involution.

At the RedNet-50 stage shapes (the involution that replaces each bottleneck's 3x3 conv: C = 64,
128, 256, 512 at 56, 28, 14, 7 pixels, K = 7, G = C/16, stride 1) it measures, per dtype:
  * forward+backward median time of both implementations (alternating) and the speedup;
  * the custom forward's achieved bandwidth (on CUDA: the Triton forward kernel alone): ideal
    bytes moved / median time, against the GPU's peak DRAM bandwidth (PEAK_GBPS, by device
    name; --peak-gbps for another GPU);
  * memory: the CUDA peak above the inputs during forward+backward (on CPU: the bytes saved for
    backward), custom against the reference;
and prints a table with the goals (issue 24) met or not.

`--predict` prints, without running anything, the roofline estimate docs/gpu.md quotes (same
shape table, same byte and FLOP formulas: tests/test_gpu_command.py checks the doc against it).

    python3 benchmarks/bench_involution.py --predict
    python3 benchmarks/bench_involution.py --device cuda --dtype float32 --dtype float16 --goals
    python3 benchmarks/bench_involution.py --device cpu --batch 1 --shape stage4_c512_7
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.benchmark import Timer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from gradlab import bench
from gradlab.ops.involution import involution, involution_reference

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

#: The goals of issue 24: forward+backward speedup over the unfold reference (float32, float16),
#: forward bandwidth as a fraction of peak (at the bandwidth-bound shapes), memory at most the
#: reference's.
SPEEDUP_GOAL = 3.0
SPEEDUP_DTYPES = ("float32", "float16")
BANDWIDTH_GOAL = 0.60

#: The prediction's GPU: H100 SXM5, 3.35 TB/s HBM3, 67 TFLOP/s float32 on the CUDA cores (the
#: kernels multiply-add in float32 whatever the input dtype, so 16-bit inputs get no faster math).
PREDICT_GPU = "H100 SXM5"
PREDICT_GBPS = 3350.0
PREDICT_TFLOPS = 67.0
#: Seconds one kernel launch costs at least (Python dispatch, autograd, Triton's launcher): a
#: shape whose data moves faster than this is launch-bound, whatever its bytes.
LAUNCH_S = 10e-6
#: The bandwidth goal applies where the forward's memory time is at least this many launches:
#: below it the launch, not DRAM, sets the time.
BOUND_LAUNCHES = 2.0
#: Kernels per forward+backward: custom = forward, zero-fill + grad_input, zero-fill +
#: grad_weight; reference = unfold, mul, sum, then mul (grad cols), mul + sum (grad w), zero-fill
#: + col2im (grad x).
CUSTOM_KERNELS = 5
REFERENCE_KERNELS = 8

#: Timing batch: the RedNet-50 training batch per GPU at its largest (issue 24: batch 1..64).
BATCH = 64


@dataclass(frozen=True)
class Shape:
    """One RedNet-50 involution layer: x [B, C, H, W], K x K kernels, G = C/16, stride 1."""

    name: str
    channels: int
    size: int
    k: int = 7

    @property
    def groups(self) -> int:
        return self.channels // 16

    @property
    def padding(self) -> int:
        return (self.k - 1) // 2  # same-size output at stride 1

    def geometry(self) -> tuple[int, int, int]:
        return (1, self.padding, 1)

    def inputs(self, batch: int, dtype: torch.dtype,
               device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, self.channels, self.size, self.size, dtype=dtype, device=device)
        w = torch.randn(batch, self.groups, self.k, self.k, self.size, self.size, dtype=dtype,
                        device=device)
        return x.requires_grad_(), w.requires_grad_()


REDNET50 = (
    Shape("stage1_c64_56", 64, 56),
    Shape("stage2_c128_28", 128, 28),
    Shape("stage3_c256_14", 256, 14),
    Shape("stage4_c512_7", 512, 7),
)


@dataclass(frozen=True)
class Traffic:
    """Ideal DRAM bytes (each tensor read or written once per kernel) and FLOPs of one layer."""

    fwd_bytes: int  # custom forward: read x, w; write out
    fwd_flops: int  # K² multiply-adds per output element
    custom_bytes: int  # custom forward + backward (CUSTOM_KERNELS)
    reference_bytes: int  # unfold reference forward + backward (REFERENCE_KERNELS)
    total_flops: int  # forward + grad_input + grad_weight: 3 x the forward's


def traffic(shape: Shape, batch: int, itemsize: int) -> Traffic:
    """The byte and FLOP counts of one layer (element counts x itemsize)."""
    pixels = batch * shape.size * shape.size  # stride 1: output pixels = input pixels
    x = out = pixels * shape.channels
    w = pixels * shape.groups * shape.k ** 2
    cols = out * shape.k ** 2  # the unfolded input, and every [B, G, C/G, K², L] product
    custom = 3 * (x + w + out) + x + w  # three kernels reading/writing x, w, out; two zero-fills
    # forward: unfold (read x, write cols), mul (read cols, w; write product), sum (read product,
    # write out); backward: grad cols = go * w, grad w = sum over C/G of go * cols (product
    # written and read), col2im (zero-fill x, read grad cols, write grad x)
    reference = (x + 2 * cols + w + 2 * cols + out) + (out + w + cols) + \
        (out + cols + 2 * cols + w) + (2 * x + cols)
    flops = 2 * shape.k ** 2 * out
    return Traffic(fwd_bytes=(x + w + out) * itemsize, fwd_flops=flops,
                   custom_bytes=custom * itemsize, reference_bytes=reference * itemsize,
                   total_flops=3 * flops)


def roofline_s(nbytes: int, flops: int, kernels: int, gbps: float, efficiency: float) -> float:
    """Predicted seconds: the slower of memory and compute, and never under the launches."""
    return max(nbytes / (gbps * 1e9 * efficiency), flops / (PREDICT_TFLOPS * 1e12),
               kernels * LAUNCH_S)


def bandwidth_bound(t: Traffic, gbps: float) -> bool:
    """Whether the forward's time is set by DRAM: memory time over BOUND_LAUNCHES launches."""
    memory_s = t.fwd_bytes / (gbps * 1e9 * BANDWIDTH_GOAL)
    return memory_s >= BOUND_LAUNCHES * LAUNCH_S and memory_s >= t.fwd_flops / (
        PREDICT_TFLOPS * 1e12)


def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def prediction_table(dtypes: tuple[str, ...] = SPEEDUP_DTYPES, batch: int = BATCH) -> str:
    """The roofline estimate as a Markdown table (docs/gpu.md quotes it verbatim)."""
    lines = [
        f"Predicted on {PREDICT_GPU} ({PREDICT_GBPS / 1000:.2f} TB/s, {PREDICT_TFLOPS:.0f} "
        f"TFLOP/s float32), batch {batch}, both implementations at {BANDWIDTH_GOAL:.0%} of peak "
        f"bandwidth, at least {LAUNCH_S * 1e6:.0f} µs per kernel launch.",
        "",
        "| shape | dtype | fwd MB | fwd GFLOP | flop/byte | fwd µs | fwd+bwd MB | reference MB "
        "| fwd+bwd µs | reference µs | speedup | bandwidth-bound |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for dtype in dtypes:
        for shape in REDNET50:
            t = traffic(shape, batch, itemsize(dtype))
            fwd = roofline_s(t.fwd_bytes, t.fwd_flops, 1, PREDICT_GBPS, BANDWIDTH_GOAL)
            custom = roofline_s(t.custom_bytes, t.total_flops, CUSTOM_KERNELS, PREDICT_GBPS,
                                BANDWIDTH_GOAL)
            ref = roofline_s(t.reference_bytes, t.total_flops, REFERENCE_KERNELS, PREDICT_GBPS,
                             BANDWIDTH_GOAL)
            lines.append(
                f"| {shape.name} | {dtype} | {t.fwd_bytes / 1e6:.1f} | {t.fwd_flops / 1e9:.2f} "
                f"| {t.fwd_flops / t.fwd_bytes:.2f} | {fwd * 1e6:.0f} | "
                f"{t.custom_bytes / 1e6:.0f} | {t.reference_bytes / 1e6:.0f} | "
                f"{custom * 1e6:.0f} | {ref * 1e6:.0f} | {ref / custom:.1f}x | "
                f"{'yes' if bandwidth_bound(t, PREDICT_GBPS) else 'no (launch-bound)'} |")
    return "\n".join(lines)


def peak_gbps(device_name: str) -> tuple[float | None, str]:
    """(peak GB/s, where it came from) for a CUDA device name; None for a GPU not listed."""
    for fragment, gbps in PEAK_GBPS:
        if fragment in device_name:
            return gbps, f"datasheet figure for {fragment!r}"
    return None, f"unknown GPU {device_name!r}: no peak bandwidth listed, pass --peak-gbps"


def median_s(stmt: Callable[[], object], runs: int, min_run_time: float) -> float:
    """Median seconds of stmt() over `runs` blocked_autorange medians (Timer syncs CUDA)."""
    stmt()  # warm-up: Triton compilation, the allocator
    timer = Timer(stmt="stmt()", globals={"stmt": stmt}, num_threads=torch.get_num_threads())
    return statistics.median(timer.blocked_autorange(min_run_time=min_run_time).median
                             for _ in range(runs))


def peak_memory(fn: Callable[..., torch.Tensor], shape: Shape, batch: int, dtype: torch.dtype,
                device: str) -> int:
    """CUDA: peak bytes allocated above the inputs during forward+backward; CPU: saved bytes."""
    x, w = shape.inputs(batch, dtype, device)
    go = torch.randn(batch, shape.channels, shape.size, shape.size, dtype=dtype, device=device)
    if device != "cuda":
        return bench.saved_bytes(lambda: fn(x, w, *shape.geometry()))
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.autograd.grad(fn(x, w, *shape.geometry()), (x, w), go)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def measure(shape: Shape, dtype: str, batch: int, device: str, runs: int,
            min_run_time: float) -> dict[str, Any]:
    """One row: times (s), forward bandwidth (GB/s), memory (bytes) of both implementations."""
    dt = getattr(torch, dtype)
    x, w = shape.inputs(batch, dt, device)
    go = torch.randn(batch, shape.channels, shape.size, shape.size, dtype=dt, device=device)
    geo = shape.geometry()
    impls = {"custom": involution, "reference": involution_reference}
    times: dict[str, list[float]] = {"custom": [], "reference": []}
    for r in range(runs):  # alternate the order: drift (clocks, other load) favours neither
        for key in ("custom", "reference") if r % 2 == 0 else ("reference", "custom"):
            def step(fn: Callable[..., torch.Tensor] = impls[key]) -> object:
                return torch.autograd.grad(fn(x, w, *geo), (x, w), go)

            times[key].append(median_s(step, 1, min_run_time))
    forward: Callable[..., torch.Tensor] = involution
    if device == "cuda":  # the Triton kernel alone: the bandwidth is the kernel's
        from gradlab.kernels.involution_triton import involution_forward as forward
    with torch.no_grad():
        fwd_s = median_s(lambda: forward(x, w, *geo), runs, min_run_time)
    t = traffic(shape, batch, itemsize(dtype))
    custom, reference = statistics.median(times["custom"]), statistics.median(times["reference"])
    return {"shape": shape.name, "dtype": dtype, "batch": batch, "custom_s": custom,
            "reference_s": reference, "speedup": reference / custom, "fwd_s": fwd_s,
            "fwd_bytes": t.fwd_bytes, "fwd_gbps": t.fwd_bytes / fwd_s / 1e9,
            "custom_memory": peak_memory(involution, shape, batch, dt, device),
            "reference_memory": peak_memory(involution_reference, shape, batch, dt, device)}


def goals(row: dict[str, Any], peak: float | None, peak_note: str, device: str) -> dict[str, str]:
    """Each goal: 'met', 'not met', or 'n/a (why)' for this row (speed goals: on CUDA only)."""
    out = {}
    if device != "cuda":
        out["speedup"] = "n/a (a GPU goal)"
    elif row["dtype"] in SPEEDUP_DTYPES:
        out["speedup"] = "met" if row["speedup"] >= SPEEDUP_GOAL else "not met"
    else:
        out["speedup"] = f"n/a (goal for {', '.join(SPEEDUP_DTYPES)})"
    shape = next(s for s in REDNET50 if s.name == row["shape"])
    t = traffic(shape, int(row["batch"]), itemsize(str(row["dtype"])))
    if peak is None:
        out["bandwidth"] = f"n/a ({peak_note})"
    elif not bandwidth_bound(t, peak):
        out["bandwidth"] = "n/a (launch-bound shape)"
    else:
        out["bandwidth"] = "met" if row["fwd_gbps"] >= BANDWIDTH_GOAL * peak else "not met"
    out["memory"] = "met" if row["custom_memory"] <= row["reference_memory"] else "not met"
    return out


def predicted(row: dict[str, Any], peak: float) -> tuple[float, float]:
    """The roofline's forward+backward seconds (custom, reference) for a row at `peak` GB/s."""
    shape = next(s for s in REDNET50 if s.name == row["shape"])
    t = traffic(shape, int(row["batch"]), itemsize(str(row["dtype"])))
    return (roofline_s(t.custom_bytes, t.total_flops, CUSTOM_KERNELS, peak, BANDWIDTH_GOAL),
            roofline_s(t.reference_bytes, t.total_flops, REFERENCE_KERNELS, peak,
                       BANDWIDTH_GOAL))


def plot(rows: list[dict[str, Any]], peak: float | None, path: str) -> None:
    """Speedup and forward bandwidth (fraction of peak) per shape and dtype, with the goals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['shape'].split('_')[0]}\n{r['dtype']}" for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(6.0, 0.9 * len(rows)) * 2, 4))
    left.bar(labels, [r["speedup"] for r in rows])
    left.axhline(SPEEDUP_GOAL, color="k", linestyle="--", label=f"goal {SPEEDUP_GOAL:g}x")
    left.set(title="forward+backward speedup over the unfold reference", ylabel="x")
    left.legend()
    if peak:
        right.bar(labels, [r["fwd_gbps"] / peak for r in rows])
        right.axhline(BANDWIDTH_GOAL, color="k", linestyle="--",
                      label=f"goal {BANDWIDTH_GOAL:.0%}")
        right.set(title=f"forward bandwidth / peak ({peak:.0f} GB/s)", ylabel="fraction")
        right.legend()
    else:
        right.bar(labels, [r["fwd_gbps"] for r in rows])
        right.set(title="forward bandwidth (peak unknown)", ylabel="GB/s")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(rows: list[dict[str, Any]], peak: float | None, peak_note: str) -> str:
    """The measured table, with the ratio to peak and the goals."""
    peak_txt = f"{peak:.0f} GB/s ({peak_note})" if peak else peak_note
    lines = [f"Peak bandwidth: {peak_txt}. Goals: fwd+bwd >= {SPEEDUP_GOAL:g}x the reference "
             f"({', '.join(SPEEDUP_DTYPES)}), forward >= {BANDWIDTH_GOAL:.0%} of peak at the "
             "bandwidth-bound shapes, memory <= the reference's.", "",
             "| shape | dtype | custom ms | predicted | reference ms | predicted | speedup "
             "| fwd ms | fwd GB/s | of peak | memory MB | reference MB | speedup goal "
             "| bandwidth goal | memory goal |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for row in rows:
        ratio = f"{row['fwd_gbps'] / peak:.0%}" if peak else "-"
        g = row["goals"]
        pc, pr = (predicted(row, peak) if peak else (None, None))
        lines.append(
            f"| {row['shape']} | {row['dtype']} | {row['custom_s'] * 1e3:.3f} | "
            f"{f'{pc * 1e3:.3f}' if pc else '-'} | {row['reference_s'] * 1e3:.3f} | "
            f"{f'{pr * 1e3:.3f}' if pr else '-'} | {row['speedup']:.1f}x | "
            f"{row['fwd_s'] * 1e3:.3f} | {row['fwd_gbps']:.4g} | {ratio} | "
            f"{row['custom_memory'] / 1e6:.1f} | "
            f"{row['reference_memory'] / 1e6:.1f} | {g['speedup']} | {g['bandwidth']} | "
            f"{g['memory']} |")
    return "\n".join(lines)


def write_outputs(args: argparse.Namespace, rows: list[dict[str, Any]], meta: dict[str, Any],
                  table: str) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n",
                                   encoding="utf-8")
    if args.csv:
        flat = [{k: v for k, v in r.items() if k != "goals"} |
                {f"goal_{k}": v for k, v in r["goals"].items()} for r in rows]
        with Path(args.csv).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(flat[0]) if flat else ["shape"])
            writer.writeheader()
            writer.writerows(flat)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.plot:
        plot(rows, meta["peak_gbps"], args.plot)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predict", action="store_true",
                        help="print the roofline prediction (docs/gpu.md) and exit")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", action="append", choices=("float32", "float16", "bfloat16"),
                        help="repeatable (default: float32)")
    parser.add_argument("--shape", action="append", choices=[s.name for s in REDNET50],
                        help="only these shapes (repeatable; default: all four stages)")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating rounds of timing per implementation (median reported)")
    parser.add_argument("--min-run-time", type=float, default=0.2,
                        help="seconds per blocked_autorange")
    parser.add_argument("--peak-gbps", type=float, default=None,
                        help="the GPU's peak DRAM bandwidth, GB/s (default: by device name)")
    parser.add_argument("--goals", action="store_true",
                        help="exit 1 when a goal that applies is not met")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--csv", help="also write the rows as CSV here")
    parser.add_argument("--markdown", help="also write the table as Markdown here")
    parser.add_argument("--plot", help="also write a PNG of speedups and bandwidth here "
                        "(needs matplotlib)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not args.predict and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device")
    if args.batch < 1 or args.repeats < 1:
        parser.error("--batch and --repeats: expected at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.predict:
        print(prediction_table())
        return 0
    dtypes = tuple(args.dtype or ("float32",))
    shapes = [s for s in REDNET50 if not args.shape or s.name in args.shape]
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    if args.peak_gbps:
        peak, note = args.peak_gbps, "--peak-gbps"
    elif args.device == "cuda":
        peak, note = peak_gbps(name)
    else:
        peak, note = None, "CPU: no peak bandwidth"
    print(f"torch {torch.__version__}, {args.device} ({name}), batch {args.batch}, "
          f"{args.repeats} alternating rounds, min_run_time {args.min_run_time}s")
    rows: list[dict[str, Any]] = []
    for dtype in dtypes:
        for shape in shapes:
            row = measure(shape, dtype, args.batch, args.device, args.repeats, args.min_run_time)
            rows.append(row | {"goals": goals(row, peak, note, args.device)})
            print(f"  {shape.name} {dtype}: speedup {row['speedup']:.2f}x", flush=True)
    table = markdown(rows, peak, note)
    print(table)
    meta = {"torch": torch.__version__, "device": args.device, "device_name": name,
            "peak_gbps": peak, "peak_source": note,
            "shapes": [asdict(s) | {"groups": s.groups} for s in shapes]}
    write_outputs(args, rows, meta, table)
    missed = [f"{r['shape']} {r['dtype']} {k}" for r in rows for k, v in r["goals"].items()
              if v == "not met"]
    print(f"goals not met: {', '.join(missed)}" if missed else "goals: all that apply met")
    return 1 if args.goals and missed else 0


if __name__ == "__main__":
    sys.exit(main())

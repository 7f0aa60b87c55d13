"""Benchmark the bundled involution Function against its unfold reference.

For a RedNet-like layer and a stride-2 layer it prints
  * bytes saved for backward (saved_tensors_hooks, each storage counted once) at batch 8, whatever
    --batch is: counting needs one forward, no timing;
  * the median forward+backward time of each implementation, measured alternately;
  * on CUDA, the forward kernel's achieved bandwidth at a bandwidth-bound size.

Every Timer gets --threads (torch.utils.benchmark.Timer runs with 1 thread unless told), and the
thread count printed is the one the measurements report they ran with.

    python3 benchmarks/bench_involution.py --device cpu --dtype float32 --batch 2 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.benchmark import Timer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from gradlab import bench
from gradlab.ops.involution import involution, involution_reference

#: Saved-bytes figures are reported at this batch (the RedNet-like layer's own) whatever --batch.
SAVED_BYTES_BATCH = 8

#: Peak DRAM bandwidth by device-name fragment, GB/s (vendor datasheets); first match wins.
PEAK_GBPS = (
    ("H200", 4800.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # SXM5, HBM3
    ("A100-SXM4-80GB", 2039.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("A10G", 600.0),
    ("T4", 320.0),
)


@dataclass(frozen=True)
class Layer:
    """One involution layer: x [B, C, H, W], G groups, K×K kernels, stride, padding."""

    name: str
    channels: int
    size: int
    groups: int
    k: int
    stride: int
    padding: int

    @property
    def out_size(self) -> int:
        return (self.size + 2 * self.padding - (self.k - 1) - 1) // self.stride + 1

    def inputs(self, batch: int, dtype: torch.dtype,
               device: str) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, self.channels, self.size, self.size, dtype=dtype, device=device)
        w = torch.randn(batch, self.groups, self.k, self.k, self.out_size, self.out_size,
                        dtype=dtype, device=device)
        return x.requires_grad_(), w.requires_grad_()

    def geometry(self) -> tuple[int, int, int]:
        return (self.stride, self.padding, 1)


LAYERS = (
    Layer("rednet_k7_g4", channels=64, size=56, groups=4, k=7, stride=1, padding=3),
    Layer("stride2_k3_g4", channels=64, size=56, groups=4, k=3, stride=2, padding=1),
)
IMPLS: dict[str, Callable[..., torch.Tensor]] = {
    "custom": involution,
    "reference": involution_reference,
}


def saved_bytes(fn: Callable[..., torch.Tensor], *args: object) -> int:
    """Bytes autograd keeps for backward of fn(*args), each storage counted once."""
    return bench.saved_bytes(lambda: fn(*args))


def fwd_bwd_medians(layer: Layer, batch: int, dtype: torch.dtype, device: str, repeats: int,
                    min_run_time: float, threads: int) -> tuple[dict[str, float], set[int]]:
    """Median seconds of forward+backward per implementation, alternating which runs first, and
    the thread counts the measurements ran with."""
    x, w = layer.inputs(batch, dtype, device)
    geo = layer.geometry()
    go = torch.randn(batch, layer.channels, layer.out_size, layer.out_size, dtype=dtype,
                     device=device)
    timers = {}
    for name, fn in IMPLS.items():
        def step(fn: Callable[..., torch.Tensor] = fn) -> None:
            torch.autograd.grad(fn(x, w, *geo), (x, w), go)

        step()  # warm-up: Triton compilation, allocator
        timers[name] = Timer(stmt="step()", globals={"step": step}, label=layer.name,
                             description=name, num_threads=threads)
    samples: dict[str, list[float]] = {name: [] for name in IMPLS}
    used: set[int] = set()
    names = list(IMPLS)
    for r in range(repeats):
        # Alternate the order so drift (thermal, other load) does not favour one side.
        for name in names if r % 2 == 0 else names[::-1]:
            m = timers[name].blocked_autorange(min_run_time=min_run_time)
            samples[name].append(m.median)
            used.add(m.num_threads)
    return {name: statistics.median(v) for name, v in samples.items()}, used


def peak_gbps(device_name: str) -> tuple[float | None, str]:
    """(peak GB/s, where it came from) for a CUDA device name."""
    for fragment, gbps in PEAK_GBPS:
        if fragment in device_name:
            return gbps, f"datasheet figure for {fragment!r}"
    return None, "unknown device: pass --peak-gbps"


#: Bandwidth-bound forward: K² multiply-adds per output element against reading w (K² values per
#: pixel and group) once: about 5 flop/byte in float32, far under an H100's compute/bandwidth
#: ridge (~20).  Batch 32 moves ~0.5 GB in float32, so launch overhead is negligible.
BANDWIDTH_LAYER = Layer("bandwidth_c256_g16_k7", channels=256, size=56, groups=16, k=7, stride=1,
                        padding=3)
BANDWIDTH_BATCH = 32


def forward_bandwidth(dtype: torch.dtype, device: str, min_run_time: float, threads: int,
                      layer: Layer = BANDWIDTH_LAYER,
                      batch: int = BANDWIDTH_BATCH) -> dict[str, float]:
    """GB/s of the Triton forward kernel alone, counting x + w read and out written once."""
    x, w = layer.inputs(batch, dtype, device)
    x, w = x.detach(), w.detach()
    from gradlab.kernels.involution_triton import involution_forward

    out = involution_forward(x, w, *layer.geometry())
    moved = x.nbytes + w.nbytes + out.nbytes
    t = Timer(stmt="f(x, w, *g)", globals={"f": involution_forward, "x": x, "w": w,
                                           "g": layer.geometry()}, num_threads=threads)
    seconds = t.blocked_autorange(min_run_time=min_run_time).median
    return {"batch": batch, "channels": layer.channels, "groups": layer.groups, "k": layer.k,
            "size": layer.size, "bytes": moved, "seconds": seconds, "gbps": moved / seconds / 1e9}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16", "float64"),
                        default="float32")
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating rounds of timing per implementation (median reported)")
    parser.add_argument("--batch", type=int, default=8, help="batch for timing (saved bytes: 8)")
    parser.add_argument("--min-run-time", type=float, default=1.0,
                        help="seconds per blocked_autorange")
    parser.add_argument("--no-timing", action="store_true", help="saved bytes only")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads for every measurement (default: the "
                        "current count)")
    parser.add_argument("--peak-gbps", type=float, default=None,
                        help="device peak DRAM bandwidth, GB/s (CUDA; default: by device name)")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads: expected at least 1")
    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)  # the saved-bytes forwards and the warm-up calls too
    where = f"{torch.cuda.get_device_name()}, " if device == "cuda" else ""
    n = torch.get_num_threads()
    print(f"torch {torch.__version__}, device {device} ({where}{n} thread{'s' * (n != 1)}), "
          f"dtype {args.dtype}")

    print(f"\nbytes saved for backward at batch {SAVED_BYTES_BATCH} (each storage once)")
    for layer in LAYERS:
        x, w = layer.inputs(SAVED_BYTES_BATCH, dtype, device)
        custom = saved_bytes(involution, x, w, *layer.geometry())
        reference = saved_bytes(involution_reference, x, w, *layer.geometry())
        print(f"  {layer.name:15s} custom {custom / 2**20:9.2f} MiB   reference "
              f"{reference / 2**20:9.2f} MiB   reference/custom {reference / custom:6.2f}x")
        del x, w

    if args.no_timing:
        return 0
    print(f"\nforward+backward median at batch {args.batch} ({args.repeats} alternating rounds, "
          f"blocked_autorange min_run_time={args.min_run_time}s)")
    used: set[int] = set()
    for layer in LAYERS:
        med, threads_used = fwd_bwd_medians(layer, args.batch, dtype, device, args.repeats,
                                            args.min_run_time, threads)
        used |= threads_used
        print(f"  {layer.name:15s} custom {med['custom'] * 1e3:9.2f} ms   reference "
              f"{med['reference'] * 1e3:9.2f} ms   reference/custom "
              f"{med['reference'] / med['custom']:6.2f}x")
    print(f"  timed with {' and '.join(map(str, sorted(used)))} thread{'s' * (used != {1})} "
          "(the count the measurements report)")

    if device == "cuda":
        bw = forward_bandwidth(dtype, device, args.min_run_time, threads)
        print(f"\nforward kernel bandwidth: x [{bw['batch']}, {bw['channels']}, {bw['size']}, "
              f"{bw['size']}], G={bw['groups']}, K={bw['k']}, stride 1, padding "
              f"{BANDWIDTH_LAYER.padding}")
        print("  bytes = (x.numel() + w.numel() + out.numel()) * element size "
              f"= {bw['bytes'] / 1e6:.1f} MB (each read or written once at best)")
        gbps_peak, source = (args.peak_gbps, "--peak-gbps") if args.peak_gbps else peak_gbps(
            torch.cuda.get_device_name())
        line = f"  {bw['seconds'] * 1e3:.3f} ms -> {bw['gbps']:.0f} GB/s"
        if gbps_peak:
            line += f" = {bw['gbps'] / gbps_peak:.1%} of {gbps_peak:.0f} GB/s peak ({source})"
        else:
            line += f" ({source})"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The host (Python) cost of one involution forward+backward on the Triton path, launches stubbed.

On a GPU the small shapes are host-bound (docs/gpu.md, "What the second GPU run measured": RedNet
stage 4 took 0.640 ms forward+backward while its three kernels took 0.239).  This measures what
the CPU can: microseconds per `torch.autograd.grad(involution(x, w, ...), (x, w), go)` with every
Triton launch replaced by a stub that only evaluates the launch's grid, against the floor of an
empty autograd Function that makes the same output allocations.  Medians over interleaved rounds
(each round times every scenario once, in alternating order, so drift favours none).

The scenarios are the GPU run's (`GRADLAB_INVOLUTION_AUTOTUNE=variants`: default block sizes),
each from contiguous and from channels-last inputs: RedNet stage 4, whose variants the GPU times
once per shape (the clock here is a stub that makes "cl" fastest, as the H200 chose at every
RedNet shape), and the bundled stride-2 K=3 case, untimed (below AUTOTUNE_MIN_WORK: the input
layout decides).  Small CPU tensors (SCENARIOS says how they are cut); the `meta` device would
avoid the copies but its dispatch alone costs several times a CPU tensor's.

Before/after: each `--src` names a checkout whose gradlab runs; several are loaded side by side
and timed in the same interleaved rounds (so the machine's load changes all alike), e.g.

    mkdir /tmp/old && git archive 06a0815 gradlab | tar -x -C /tmp/old
    python benchmarks/bench_involution_host.py --src /tmp/old --src .

The clock is this process's CPU time (`--clock wall` for wall time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

os.environ["GRADLAB_INVOLUTION_TRITON"] = "1"  # the Triton path on CPU tensors
os.environ.setdefault("GRADLAB_INVOLUTION_AUTOTUNE", "variants")
os.environ.pop("TRITON_INTERPRET", None)  # the interpreter turns variant timing off
os.environ.pop("GRADLAB_INVOLUTION_VARIANT", None)

import torch

ROOT = Path(__file__).resolve().parents[1]

#: Milliseconds the stub clock gives each variant: "cl" fastest (the H200's choice everywhere).
STUB_MS = {"nchw": 2.0, "cl": 1.0, "cl_vec": 1.5}


@dataclass(frozen=True)
class Scenario:
    """One timed call: x [B, C, H, W], G groups, K x K taps, stride/padding/dilation, layout,
    and whether the variants are timed (the GPU times them from AUTOTUNE_MIN_WORK on)."""

    name: str
    x_shape: tuple[int, int, int, int]
    groups: int
    k: int
    geo: tuple[int, int, int]
    layout: str
    timed: bool

    def inputs(self, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, c, h, wd = self.x_shape
        s, p, d = self.geo
        ho = (h + 2 * p - d * (self.k - 1) - 1) // s + 1
        wo = (wd + 2 * p - d * (self.k - 1) - 1) // s + 1
        fmt = torch.channels_last if self.layout == "channels_last" else torch.contiguous_format
        x = torch.randn(self.x_shape, device=device).contiguous(memory_format=fmt)
        w = torch.randn(b, self.groups, self.k, self.k, ho, wo, device=device)
        go = torch.randn(b, c, ho, wo, device=device).contiguous(memory_format=fmt)
        return x.requires_grad_(), w.requires_grad_(), go


#: The host path does not depend on the batch or the number of groups (only the variant timing
#: does: `timed` keeps the GPU run's), so both are cut to keep the CPU's copies and allocations
#: small: RedNet-50 stage 4 (B 64, C 512, G 32, 7x7, K 7) as B 1, C 32, G 2 (16 channels a
#: group, as RedNet's), timed as there; the bundled stride2_k3_g4 (B 8, C 64, 56x56, K 3,
#: stride 2) as B 1, 14x14, untimed as there (below AUTOTUNE_MIN_WORK).
SCENARIOS = tuple(
    Scenario(name, shape, g, k, geo, layout, timed)
    for name, shape, g, k, geo, timed in (
        ("stage4 (C 16/group, 7x7, K 7)", (1, 32, 7, 7), 2, 7, (1, 3, 1), True),
        ("stride2_k3_g4 (14x14)", (1, 64, 14, 14), 4, 3, (2, 1, 1), False))
    for layout in ("contiguous", "channels_last"))


class _StubLaunch:
    """Stands in for one jitted kernel: `kernel[grid](*args, **meta)` evaluates the grid and
    notes the variant it belongs to (the stub clock's input)."""

    ran: ClassVar[list[str]] = []

    def __init__(self, variant: str) -> None:
        self.variant = variant

    def __getitem__(self, grid: Callable[[dict[str, Any]], Any]) -> Callable[..., None]:
        def launch(*args: Any, **meta: Any) -> None:
            if callable(grid):  # a tuple when the launch's block size is fixed
                grid({"BLOCK_P": meta.get("BLOCK_P", 64), "TILE_W": meta.get("TILE_W", 0)})
            _StubLaunch.ran.append(self.variant)
        return launch


def stub_clock(run: Callable[[], object]) -> float:
    """The variant selector's clock: STUB_MS of the variant `run` launched."""
    _StubLaunch.ran.clear()
    run()
    return STUB_MS[_StubLaunch.ran[-1]]


def stub_launches(kt: Any, kcl: Any) -> None:
    """Every jitted kernel of both kernel modules a stub; the variant clock a fixed table."""
    for key in list(kt._JIT):
        kt._JIT[key] = _StubLaunch("nchw")
    for key in list(kcl._JIT):
        kcl._JIT[key] = _StubLaunch(key[1])
    kcl.time_ms = stub_clock


class _Empty(torch.autograd.Function):
    """The floor: the same outputs allocated, nothing computed."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, out_like: torch.Tensor
                ) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.empty_like(out_like)

    @staticmethod
    def backward(ctx: Any, go: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(w), None


#: What each scenario times: forward+backward, its floor, and the two phases alone (forward
#: with the graph recorded; backward through a retained graph), as bench_involution.py's cases,
#: of the Function and of the floor (whether the phases add up is autograd's as much as ours).
PARTS = ("fwd+bwd", "floor", "forward", "backward", "floor forward", "floor backward")


def calls(sc: Scenario) -> dict[str, Callable[[], object]]:
    """The scenario's forward+backward, its empty-Function floor and the phases alone."""
    from gradlab.kernels import involution_launch as il
    from gradlab.ops.involution import involution

    x, w, go = sc.inputs("cpu")
    geo = sc.geo
    min_work = 0 if sc.timed else 1 << 62

    def both() -> object:
        il.AUTOTUNE_MIN_WORK = min_work
        return torch.autograd.grad(involution(x, w, *geo), (x, w), go)

    def floor() -> object:
        return torch.autograd.grad(_Empty.apply(x, w, go), (x, w), go)

    def forward() -> object:
        il.AUTOTUNE_MIN_WORK = min_work
        return involution(x, w, *geo)

    kept: list[torch.Tensor] = []

    def backward() -> object:
        il.AUTOTUNE_MIN_WORK = min_work
        if not kept:
            kept.append(involution(x, w, *geo))
        return torch.autograd.grad(kept[0], (x, w), go, retain_graph=True)

    empty = _Empty.apply(x, w, go)
    return dict(zip(PARTS, (both, floor, forward, backward, lambda: _Empty.apply(x, w, go),
                            lambda: torch.autograd.grad(empty, (x, w), go, retain_graph=True)),
                    strict=True))


#: The clocks: this process's CPU time (the default: on a shared machine another process's load
#: hardly moves it, as it does wall time), or wall time.
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def per_call_us(fn: Callable[[], object], n: int, clock: Callable[[], float]) -> float:
    """Mean microseconds per call over n back-to-back calls."""
    t0 = clock()
    for _ in range(n):
        fn()
    return (clock() - t0) / n * 1e6


class Checkout:
    """One checkout's gradlab, loaded beside the others: its modules are swapped into
    sys.modules before each of its rounds (the Function imports its kernels at call time)."""

    def __init__(self, src: Path) -> None:
        for name in [m for m in sys.modules if m == "gradlab" or m.startswith("gradlab.")]:
            del sys.modules[name]
        sys.path.insert(0, str(src))
        try:
            import gradlab
            from gradlab.kernels import involution_triton as kt
            from gradlab.kernels import involution_triton_cl as kcl

            stub_launches(kt, kcl)
            self.fns = {(i, part): f for i, sc in enumerate(SCENARIOS)
                        for part, f in calls(sc).items()}
        finally:
            sys.path.remove(str(src))
        self.where = Path(gradlab.__file__).parent
        self.modules = {m: mod for m, mod in sys.modules.items()
                        if m == "gradlab" or m.startswith("gradlab.")}
        self.variants = kt.chosen_variants

    def enter(self) -> None:
        sys.modules.update(self.modules)


def measure(checkouts: list[Checkout], rounds: int, n: int, clock: Callable[[], float]
            ) -> list[list[dict[str, Any]]]:
    """Median us of every part of every scenario of every checkout, over interleaved rounds
    (each round times everything once, the order reversed every other round)."""
    keys = [(c, k) for c in range(len(checkouts)) for k in checkouts[c].fns]
    for c, k in keys:  # first calls: the variant timing, warm caches
        checkouts[c].enter()
        checkouts[c].fns[k]()
        checkouts[c].fns[k]()
    times: dict[Any, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        for c, k in keys if r % 2 == 0 else reversed(keys):
            checkouts[c].enter()
            times[(c, k)].append(per_call_us(checkouts[c].fns[k], n, clock))
    return [[{"shape": sc.name, "layout": sc.layout,
              **{part: statistics.median(times[(c, (i, part))]) for part in PARTS}}
             for i, sc in enumerate(SCENARIOS)] for c in range(len(checkouts))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (median)")
    ap.add_argument("--calls", type=int, default=100, help="back-to-back calls per round")
    ap.add_argument("--clock", default="cpu", choices=tuple(CLOCKS),
                    help="process CPU time (default) or wall time")
    ap.add_argument("--src", action="append", type=Path,
                    help="a checkout whose gradlab runs (repeatable: each is timed in the same "
                         "interleaved rounds; default: this one)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    checkouts = [Checkout(p.resolve()) for p in args.src or [ROOT]]
    results = measure(checkouts, args.rounds, args.calls, CLOCKS[args.clock])
    print(f"{args.rounds} interleaved rounds x {args.calls} calls, medians, microseconds per "
          f"call ({args.clock} time)")
    for checkout, rows in zip(checkouts, results, strict=True):
        print(f"\ngradlab: {checkout.where}\n")
        print("| shape | layout | fwd+bwd | empty Function | fwd+bwd above it | forward | "
              "backward | empty forward | empty backward |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['shape']} | {r['layout']} | {r['fwd+bwd']:.1f} | {r['floor']:.1f} | "
                  f"{r['fwd+bwd'] - r['floor']:.1f} | {r['forward']:.1f} | "
                  f"{r['backward']:.1f} | {r['floor forward']:.1f} | "
                  f"{r['floor backward']:.1f} |")
        chosen = sorted({(v["kernel"], v["variant"], v["chosen_by"])
                         for v in checkout.variants()})
        print("\nvariants run:", ", ".join(f"{k} {v} ({how})" for k, v, how in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())

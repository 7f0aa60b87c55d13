"""gradlab.check against torch's gradcheck, side by side: time ratios and a scaling table.

    python benchmarks/bench_check.py [--rounds 5] [--sizes 1e2 1e4 1e5 1e6] [--memory]
    python benchmarks/bench_check.py --rounds 5 --shapes 100x100 316x316 [--warm-heap]
    python benchmarks/bench_check.py --edges [--rounds 5]   # what the edges check adds

Interleaved rounds (every mode once per round, in a seeded random order), medians, one intra-op
thread for every mode, each run from a trimmed heap (as a fresh process would start).  Modes
per op (exp, conv2d) and input size: `--sizes` gives total input elements (exp's input is 1-D),
`--shapes` 2-D (or any-D) shapes such as `100x100`: exp's input has that shape, conv2d (whose
image is already 2-D) gets as many elements in all.  With `--shapes` alone no `--sizes` run.

- `gradlab`: `gradlab.check(fn, args, reference=ref)` with defaults: forward and gradients
  against the reference, the contract, every variant, the jacobian and second_order checks.
- `gradlab probes`: only the jacobian check, in probe (fast) mode, no variants.
- `torch fast`: `gradcheck(fast_mode=True)` + `gradgradcheck(fast_mode=True)`.
- `torch batched`: the same with `check_batched_grad=True` on both (the nearest torch gets to
  gradlab's default coverage: the bundled Functions have no jvp, so `check_forward_ad` would
  fail them, and nothing in torch runs layout or value variants).
- `torch matching`: what matches gradlab's coverage (issue 30): `gradcheck(fast_mode=True,
  check_batched_grad=True)`, `check_forward_ad=True` where the Function has a jvp (neither
  bundled one does), and `gradgradcheck(fast_mode=True)`.
- `torch fast 1st`: `gradcheck(fast_mode=True)` alone (what probe-only mode is measured against).
- `torch slow`: `gradcheck` + `gradgradcheck` (slow mode), only where its dense Jacobians fit
  (`--slow-max` elements: it runs out of memory far earlier than the others).

Targets (issue 13): gradlab / torch fast <= 2 from 1e4 elements, <= 5 at the bundled specs'
small sizes; gradlab probes / torch fast 1st <= 1.2.  `--memory` adds each mode's peak RSS
growth over the run (sampled every 0.5 ms by a thread), in a fresh process per cell; `--calls`
how many times each mode calls the Function's forward and backward.

`--targets` (issue 40's restatement of issue 30's item 9) times gradlab and torch matching per
cell (exp and conv2d at 1e4, 1e5 and 1e6 elements) in interleaved rounds; each gradlab run
is also split (its rows' seconds, see SPLIT) into the part torch's matching check does too,
the variants (no counterpart in torch) and the rest.  Medians (and min-max) of each, against
the targets: the matching part <= 1.0x torch matching (MATCHING_TARGET), the whole check
<= 2.0x (WHOLE_TARGET); and the process `gradlab list` <= 2x one importing typer, rich and
yaml (`--suite` adds issue 30's bundled suite / a process importing torch, <= 1.5x).  Where a
cell of `--why` (default exp 1e4) it shows, missed or met, where the time goes: the Function's calls
and the seconds inside them per mode, gradlab's seconds per check, and cProfile's top
functions for one gradlab.check (benchmarks/check_costs.py).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import time_check  # noqa: E402
from check_costs import counted_timed, per_check_seconds, profile_top  # noqa: E402

import gradlab  # noqa: E402
from gradlab.bench.heap import libc  # noqa: E402
from gradlab.model import CHECKS, OPT_IN_CHECKS  # noqa: E402
from gradlab.ops.conv2d import Conv2dFunction  # noqa: E402
from gradlab.ops.exp import Exp  # noqa: E402

#: glibc, for malloc_trim (None elsewhere: runs then start from whatever heap is left).
LIBC = libc()
#: --warm-heap: each run starts from the heap the run before it left (see trimmed_heap).
WARM_HEAP = False

MODES = ("gradlab", "gradlab probes", "torch fast", "torch batched", "torch matching",
         "torch fast 1st", "torch slow")
#: --targets: the in-process modes it times, and the processes (label: command line).
TARGET_MODES = ("gradlab", "torch matching")
PROCESSES = {
    "gradlab list": [sys.executable, "-m", "gradlab", "list"],
    "import typer,rich,yaml": [sys.executable, "-c", "import typer, rich, yaml"],
    "suite": [],  # time_check.run_once: `gradlab check specs/`
    "import torch": [sys.executable, "-c", "import torch"],
}
#: --targets: (numerator, denominator, target) of each process ratio; the second only with
#: --suite (issue 30's; a run of the whole bundled suite per round).
PROCESS_RATIOS = (("gradlab list", "import typer,rich,yaml", 2.0), ("suite", "import torch", 1.5))
#: --targets (issue 40): gradlab's matching part / torch matching, and its whole check / torch
#: matching (torch's gradcheck(fast_mode, check_batched_grad) + gradgradcheck(fast_mode); the
#: bundled Functions have no jvp, so check_forward_ad is off).
MATCHING_TARGET = 1.0
WHOLE_TARGET = 2.0
#: The bundled specs' small cases are of this size (elements over all inputs).
SMALL = 100


#: An input size: exp's input shape; conv2d uses only its element count.
Size = tuple[int, ...]


def numel(size: Size) -> int:
    out = 1
    for d in size:
        out *= d
    return out


def label(size: Size) -> str:
    """`1e+04` for a 1-D size (as --sizes gave it), `100x100` for a shape."""
    return f"{size[0]:.0e}" if len(size) == 1 else "x".join(map(str, size))


def make_args(op: str, size: Size | int
              ) -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    """(Function.apply, reference, float64 args): exp's input of shape `size`, conv2d's
    inputs with about numel(size) elements in all."""
    size = (size,) if isinstance(size, int) else size
    n = numel(size)
    gen = torch.Generator().manual_seed(0)
    if op == "exp":
        x = torch.randn(*size, generator=gen, dtype=torch.float64, requires_grad=True)
        return Exp.apply, torch.exp, [x]
    # conv2d: C channels, a square image, a CxCx3x3 weight; the image holds most elements
    c = 4 if n < 1e4 else 8
    side = max(3, round((max(n - 9 * c * c, 9 * c) / c) ** 0.5))
    x = torch.randn(1, c, side, side, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(c, c, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return Conv2dFunction.apply(x, w, None, 1, 1, 1, 1)

    def ref(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, None, 1, 1, 1, 1)

    return fn, ref, [x, w]


def run_mode(mode: str, op: str, n: Size | int) -> Any:
    """One run of `mode` (gradlab's returns its report); raises if the check itself fails (a
    benchmark of a failing check would time the wrong thing)."""
    fn, ref, args = make_args(op, n)
    if mode == "gradlab":
        report = gradlab.check(fn, args, reference=ref, name=op)
        assert report.passed, [r for r in report.rows if r.status != "pass"][:3]
        return report
    elif mode == "gradlab no edges":  # the defaults without the edges check (--edges)
        report = gradlab.check(fn, args, reference=ref, name=op,
                               checks=[c for c in CHECKS if c not in ("edges", *OPT_IN_CHECKS)])
        assert report.passed
        return report
    elif mode == "gradlab probes":
        report = gradlab.check(fn, args, reference=ref, name=op, checks=["jacobian"],
                               variants=False, mode="fast")
        assert report.passed
    elif mode == "torch fast":
        assert gradcheck(fn, args, fast_mode=True) and gradgradcheck(fn, args, fast_mode=True)
    elif mode == "torch batched":
        assert gradcheck(fn, args, fast_mode=True, check_batched_grad=True) and gradgradcheck(
            fn, args, fast_mode=True, check_batched_grad=True)
    elif mode == "torch matching":
        assert gradcheck(fn, args, fast_mode=True, check_batched_grad=True,
                         check_forward_ad=has_jvp(op))
        assert gradgradcheck(fn, args, fast_mode=True)
    elif mode == "torch fast 1st":
        assert gradcheck(fn, args, fast_mode=True)
    else:
        assert gradcheck(fn, args) and gradgradcheck(fn, args)
    return None


def has_jvp(op: str) -> bool:
    """Whether the op's Function defines a jvp (forward-mode AD) of its own."""
    cls = Exp if op == "exp" else Conv2dFunction
    return cls.jvp is not torch.autograd.Function.jvp


def call_counts(op: str, n: Size) -> dict[str, dict[str, int]]:
    """{mode: {"forward": calls, "backward": calls}} of one run of every mode but slow."""
    out = {}
    cls = Exp if op == "exp" else Conv2dFunction
    for mode in MODES[:-1]:
        with counted_timed(cls) as calls:  # the counts only: its seconds are --why's
            run_mode(mode, op, n)
        out[mode] = {kind: int(calls[kind]) for kind in ("forward", "backward")}
    return out


def trimmed_heap() -> None:
    """Free what earlier runs left: garbage, and the heap's free memory back to the system.

    Each timed run then starts from the same state, as in a fresh process.  Without it a run
    reuses, without page faults, the memory the run before it freed, so a mode's time depends
    on which mode ran before it: at exp 1e6 gradlab read 0.325 s after itself and 0.370 s after
    torch's check (which frees less), torch's check 0.181 s and 0.186 s.  From a trimmed heap
    both pay their page faults: 0.456-0.470 s and 0.280-0.289 s.  `--warm-heap` skips it.
    """
    gc.collect()
    if LIBC is not None and not WARM_HEAP:
        LIBC.malloc_trim(0)


def timed(mode: str, op: str, n: Size) -> float:
    return timed_report(mode, op, n)[0]


def timed_report(mode: str, op: str, n: Size) -> tuple[float, Any]:
    """(seconds, gradlab's report or None) of one run from a trimmed heap."""
    trimmed_heap()
    t0 = time.perf_counter()
    report = run_mode(mode, op, n)
    return time.perf_counter() - t0, report


def peak_rss_growth(run: Callable[[], None], every_s: float = 0.0005) -> float:
    """Peak resident memory (MiB) above the start while `run` runs, sampled from
    /proc/self/statm by a thread (torch's CPU allocations are invisible to tracemalloc, and
    ru_maxrss keeps the import's own peak)."""
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        return int(Path("/proc/self/statm").read_text(encoding="ascii").split()[1]) * page

    start, peak, done = rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(every_s)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        run()
    finally:
        done.set()
        watcher.join()
    return max(0, max(peak[0], rss()) - start) / 2**20


def memory_cell(mode: str, op: str, n: Size) -> float:
    """Peak RSS growth (MiB) of one run of `mode`, in a fresh process (what one run frees,
    the allocator may keep: a process of its own per cell)."""
    code = (f"import sys; sys.argv=['x']; sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
            "import bench_check as b, torch\n"
            "torch.set_num_threads(1)\n"
            f"b.run_mode('gradlab probes', {op!r}, 16)\n"  # warm: imports, first calls
            f"print(b.peak_rss_growth(lambda: b.run_mode({mode!r}, {op!r}, {n})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.split()[-1])


def process_wall(label: str) -> float:
    """Wall seconds of one process of PROCESSES (the suite: time_check's default run)."""
    if label == "suite":
        wall, code, verdict = time_check.run_once([])
        assert code == 0, verdict
        return wall
    t0 = time.perf_counter()
    subprocess.run(PROCESSES[label], check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t0


#: --targets' split of one gradlab run: the part torch's matching check also does (its
#: gradcheck, gradgradcheck, check_batched_grad and check_forward_ad), the variants (layouts,
#: grad_outputs, requires_grad subsets, value edge cases: what torch has no counterpart for),
#: and the rest (the base run against the reference, the other capabilities, autocast).
SPLIT = {"jacobian": "matching", "second_order": "matching", "forward_ad": "matching",
         "batched_grad": "matching"}


def split_seconds(report: Any) -> dict[str, float]:
    """{part: seconds} of one gradlab report (SPLIT's parts), from its rows' seconds: a
    variant's forward, gradient and contract rows share theirs (counted once); every other
    check's row has its own."""
    parts = {"matching": 0.0, "variants": 0.0, "rest": 0.0}
    seen: set[tuple[str, str, str]] = set()
    for r in report.rows:
        key = (r.dtype, r.variant, "" if r.check in ("forward", "gradient", "contract")
               else r.check)
        if key in seen:
            continue
        seen.add(key)
        part = SPLIT.get(r.check) or SPLIT.get(r.variant) or (
            "rest" if r.variant == "base" or r.check in ("capabilities", "autocast")
            else "variants")
        parts[part] += r.seconds
    return parts


def spread(v: list[float]) -> str:
    """`median (min-max)` of a cell's rounds."""
    return f"{statistics.median(v):.4f} ({min(v):.4f}-{max(v):.4f})"


def targets(rounds: int, ops: list[str], sizes: list[Size], suite: bool,
            why: list[tuple[str, Size]]) -> None:
    """Issue 40's targets, from `rounds` interleaved rounds of every cell (see --targets)."""
    # processes run as a user's would: from cached bytecode (this environment may set
    # PYTHONDONTWRITEBYTECODE, which makes every process compile gradlab from source)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    procs = [k for k in PROCESSES if suite or k not in ("suite", "import torch")]
    for k in procs:  # warm-up: bytecode written, files in the page cache
        process_wall(k)
    cells: list[tuple[str, Size, str]] = [(op, n, m) for op in ops for n in sizes
                                          for m in TARGET_MODES]
    for op, n, m in cells:  # warm-up: imports, first-call costs
        if n == sizes[0]:
            run_mode(m, op, n)
    keys: list[Any] = [*cells, *procs]
    times: dict[Any, list[float]] = {k: [] for k in keys}
    parts: dict[Any, dict[str, list[float]]] = {c: defaultdict(list) for c in cells}
    rng = random.Random(0)
    for r in range(rounds):
        order = keys[:]
        rng.shuffle(order)
        for k in order:
            if isinstance(k, str):
                times[k].append(process_wall(k))
                continue
            seconds, report = timed_report(k[2], k[0], k[1])
            times[k].append(seconds)
            for part, v in (split_seconds(report).items() if report else ()):
                parts[k][part].append(v)
            if report:  # what no row's seconds hold: set-up, the driver, the report
                parts[k]["outside"].append(seconds - sum(split_seconds(report).values()))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    print(f"issue 40's targets: medians (min-max) over {rounds} interleaved rounds, in-process "
          f"modes on 1 thread, {'warm' if WARM_HEAP else 'trimmed'} heap, torch "
          f"{torch.__version__}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "cores; the parts are each gradlab run's own rows' seconds")
    missed = report_cells(cells, times, parts)
    for num, den, goal in PROCESS_RATIOS:
        if num in times:
            a, b = statistics.median(times[num]), statistics.median(times[den])
            print(f"{num} {spread(times[num])} s / {den} {spread(times[den])} s = "
                  f"{a / b:.2f}x  target {goal}{'' if a / b <= goal else '  MISSED'}")
    for op, n in why:
        where_it_goes(op, n, (op, n) in missed)


def report_cells(cells: list[tuple[str, Size, str]], times: dict[Any, list[float]],
                 parts: dict[Any, dict[str, list[float]]]) -> set[tuple[str, Size]]:
    """Print each cell's whole and split against the targets; the (op, size) that miss."""
    print(f"{'op':<7}{'size':>7}{'torch matching s':>26}{'gradlab s':>26}{'/torch':>8}"
          f"{'matching part s':>26}{'/torch':>8}{'variants s':>11}{'rest s':>9}"
          f"{'no row s':>10}")
    missed = set()
    for op, n, _ in cells[::len(TARGET_MODES)]:
        ours, theirs = times[(op, n, "gradlab")], times[(op, n, "torch matching")]
        split = parts[(op, n, "gradlab")]
        whole = statistics.median(ours) / statistics.median(theirs)
        match = statistics.median(split["matching"]) / statistics.median(theirs)
        if whole > WHOLE_TARGET or match > MATCHING_TARGET:
            missed.add((op, n))
        print(f"{op:<7}{label(n):>7}{spread(theirs):>26}{spread(ours):>26}{whole:>7.2f}x"
              f"{spread(split['matching']):>26}{match:>7.2f}x"
              f"{statistics.median(split['variants']):>11.4f}"
              f"{statistics.median(split['rest']):>9.4f}"
              f"{statistics.median(split['outside']):>10.4f}")
    print(f"targets: gradlab / torch matching <= {WHOLE_TARGET}x, its matching part <= "
          f"{MATCHING_TARGET}x; missed: "
          + (", ".join(f"{op} {label(n)}" for op, n in sorted(missed)) or "none"))
    return missed


def where_it_goes(op: str, n: Size, missed: bool) -> None:
    """A cell's time: the Function's calls per mode, gradlab's seconds per check, and
    cProfile's top functions of one gradlab.check (one more run each, not interleaved)."""
    cls = Exp if op == "exp" else Conv2dFunction
    print(f"\nwhere {op} {label(n)}'s time goes ({'missed' if missed else 'met'} its targets; "
          "one more run per mode, not interleaved):")
    for mode in TARGET_MODES:
        with counted_timed(cls) as calls:
            seconds, report = timed_report(mode, op, n)
        inside = calls["forward s"] + calls["backward s"]
        print(f"  {mode:<15}{seconds:.4f} s: forward {calls['forward']:.0f} calls "
              f"{calls['forward s']:.4f} s, backward {calls['backward']:.0f} calls "
              f"{calls['backward s']:.4f} s; outside the Function {seconds - inside:.4f} s")
        if report is not None:
            checks = per_check_seconds(report)
            print("  gradlab's seconds per check: " + ", ".join(
                f"{k} {v:.4f}" for k, v in checks.items()))
    print(f"  cProfile, one gradlab.check of {op} {label(n)}, by cumulative time:")
    print(profile_top(lambda: run_mode("gradlab", op, n)))


#: Issue 39: the default check may cost at most 20% more than before its new parts (the edges).
EDGES_TARGET = 1.2


def edges_cost(rounds: int, ops: list[str], sizes: list[Size]) -> None:
    """gradlab's defaults against the same without the edges check, interleaved, medians."""
    modes = ("gradlab", "gradlab no edges")
    cells = [(op, n, m) for op in ops for n in sizes for m in modes]
    for op, n, m in cells:  # warm-up: imports, first-call costs
        run_mode(m, op, n)
    times: dict[tuple[str, Size, str], list[float]] = {c: [] for c in cells}
    rng = random.Random(0)
    for r in range(rounds):
        order = cells[:]
        rng.shuffle(order)
        for c in order:
            times[c].append(timed(c[2], c[0], c[1]))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    print(f"median seconds over {rounds} interleaved rounds, 1 thread, torch {torch.__version__}")
    print(f"{'op':<7}{'size':>9}{'gradlab':>12}{'no edges':>12}{'ratio':>8}  target")
    for op in ops:
        for n in sizes:
            a = statistics.median(times[(op, n, "gradlab")])
            b = statistics.median(times[(op, n, "gradlab no edges")])
            met = "met" if a / b <= EDGES_TARGET else "MISSED"
            print(f"{op:<7}{label(n):>9}{a:>12.3f}{b:>12.3f}{a / b:>8.2f}  <= {EDGES_TARGET}: "
                  f"{met}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", type=float, nargs="+",
                        help="total input elements (default 1e2 1e4 1e5 1e6 without --shapes)")
    parser.add_argument("--shapes", nargs="+", default=[],
                        help="input shapes such as 100x100 316x316 (exp: that shape)")
    parser.add_argument("--ops", nargs="+", default=["exp", "conv2d"])
    parser.add_argument("--slow-max", type=float, default=5e3,
                        help="largest size torch's slow mode is run at")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--json", type=Path, help="write the medians here too")
    parser.add_argument("--calls", action="store_true",
                        help="also count the Function's forward and backward calls per mode")
    parser.add_argument("--warm-heap", action="store_true",
                        help="do not trim the heap before each timed run")
    parser.add_argument("--targets", action="store_true",
                        help="only issue 40's targets (sizes default to 1e4 1e5 1e6)")
    parser.add_argument("--suite", action="store_true",
                        help="--targets: also the bundled suite / importing torch")
    parser.add_argument("--edges", action="store_true",
                        help="only what the default edges check costs: gradlab against gradlab "
                             "without it (issue 39: at most EDGES_TARGET more)")
    parser.add_argument("--why", nargs="*", default=["exp:1e4"],
                        help="--targets: op:size cells whose time is broken down if they miss")
    args = parser.parse_args()
    global WARM_HEAP
    WARM_HEAP = args.warm_heap
    torch.set_num_threads(1)
    if args.edges:
        edges_cost(args.rounds, args.ops, [(int(s),) for s in args.sizes or [SMALL, 1e4, 1e5]])
        return
    if args.targets:
        why = [(w.split(":")[0], (int(float(w.split(":")[1])),)) for w in args.why]
        targets(args.rounds, args.ops, [(int(s),) for s in args.sizes or [1e4, 1e5, 1e6]],
                args.suite, why)
        return
    flat = args.sizes if args.sizes or args.shapes else [SMALL, 1e4, 1e5, 1e6]
    sizes: list[Size] = ([(int(s),) for s in flat or []]
                         + [tuple(int(d) for d in s.split("x")) for s in args.shapes])
    cells = [(op, n, m) for op in args.ops for n in sizes for m in MODES
             if m != "torch slow" or numel(n) <= args.slow_max]
    for op, n, m in cells:  # warm-up: imports, first-call costs
        if n == sizes[0]:
            run_mode(m, op, n)
    times: dict[tuple[str, Size, str], list[float]] = {c: [] for c in cells}
    rng = random.Random(0)
    for r in range(args.rounds):
        order = cells[:]
        rng.shuffle(order)
        for c in order:
            times[c].append(timed(c[2], c[0], c[1]))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {c: statistics.median(v) for c, v in times.items()}
    print(f"median seconds over {args.rounds} interleaved rounds, 1 thread, "
          f"{'warm' if WARM_HEAP else 'trimmed'} heap, torch {torch.__version__}")
    head = (f"{'op':<7}{'size':>9}" + "".join(f"{m:>15}" for m in MODES)
            + f"{'check/fast':>11}{'check/batched':>14}{'check/matching':>15}{'probes/1st':>11}")
    print(head)
    for op in args.ops:
        for n in sizes:
            row = f"{op:<7}{label(n):>9}"
            for m in MODES:
                row += f"{med[(op, n, m)]:>15.4f}" if (op, n, m) in med else f"{'-':>15}"
            ratio = med[(op, n, "gradlab")] / med[(op, n, "torch fast")]
            batched = med[(op, n, "gradlab")] / med[(op, n, "torch batched")]
            matching = med[(op, n, "gradlab")] / med[(op, n, "torch matching")]
            probes = med[(op, n, "gradlab probes")] / med[(op, n, "torch fast 1st")]
            row += f"{ratio:>10.2f}x{batched:>13.2f}x{matching:>14.2f}x{probes:>10.2f}x"
            print(row)
    if args.memory:
        print("\npeak RSS growth, MiB (one run per cell, a fresh process each)")
        print(f"{'op':<7}{'size':>9}" + "".join(f"{m:>15}" for m in MODES))
        for op in args.ops:
            for n in sizes:
                row = f"{op:<7}{label(n):>9}"
                for m in MODES:
                    row += (f"{memory_cell(m, op, n):>15.1f}" if (op, n, m) in med
                            else f"{'-':>15}")
                print(row)
    if args.calls:
        print("\nthe custom Function's forward / backward calls in one run "
              f"(at {label(sizes[-1])})")
        print(f"{'op':<7}" + "".join(f"{m:>16}" for m in MODES[:-1]))
        for op in args.ops:
            counts = call_counts(op, sizes[-1])
            print(f"{op:<7}" + "".join(f"{c['forward']:>9} / {c['backward']:<4}"
                                       for c in counts.values()))
    if args.json:
        args.json.write_text(json.dumps(
            {f"{op}/{label(n)}/{m}": v for (op, n, m), v in med.items()}, indent=1))


if __name__ == "__main__":
    main()

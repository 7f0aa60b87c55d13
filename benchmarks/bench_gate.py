"""Does `gradlab compare` cry wolf on a noisy machine, and does it catch a real 20% slowdown?

For the bundled `exp` op's bench case (2048x2048 float32, a few ms a call) it runs --pairs
back-to-back pairs of benches of the same code, and as many pairs whose second bench's custom
Function is 20% slower: each forward and backward call busy-waits 0.2x its own duration, in
the custom Function only (the reference, torch.exp, is untouched).  Each pair goes through the
bench JSON files and `gradlab compare`'s logic (gradlab.bench.compare) at --threshold, and the
script prints how many pairs were flagged (same code: 0 of N required; slowed: N of N) and the
ratio changes behind the verdicts.

    python3 benchmarks/bench_gate.py [--pairs 10] [--threshold 10] [--threads 1]

Benches run with one intra-op thread by default: on a machine with as many cores as threads and
another busy job, a parallel region waits for its second thread's time slice, and every sample
reads the scheduler's period (8 ms for a 1.4 ms exp on this 2-core machine) whatever the code
does, so no statistic can see a 20% change.  Timings on a shared machine move; the script
prints what it saw and never retries to get a better number.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not

from gradlab import bench  # noqa: E402
from gradlab.bench.compare import CompareRow  # noqa: E402
from gradlab.model import Target  # noqa: E402
from gradlab.ops.exp import Exp  # noqa: E402
from gradlab.render.benchfile import read_bench_json, write_bench_reports  # noqa: E402
from gradlab.spec import resolve  # noqa: E402

#: The injected slowdown: every custom forward and backward call lasts this much longer.
SLOWDOWN = 0.20
OP, CASE = "exp", "4M"


def busy_wait(seconds: float) -> None:
    """Spin for `seconds` (a sleep overshoots by tens of µs, a fifth of a short call's 20%)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def slowed(base: type[torch.autograd.Function], factor: float) -> Callable[..., Any]:
    """`base`'s apply, each forward and backward stretched by `factor` x its own duration."""

    class Slowed(base):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            start = time.perf_counter()
            out = base.forward(ctx, *args)
            busy_wait(factor * (time.perf_counter() - start))
            return out

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            start = time.perf_counter()
            out = base.backward(ctx, *grads)
            busy_wait(factor * (time.perf_counter() - start))
            return out

    return Slowed.apply


def bench_via_file(target: Target, options: bench.BenchOptions, folder: Path) -> Any:
    """One bench, written as `gradlab bench` writes it and read back as `gradlab compare` does."""
    report = bench.run([target], options)
    return read_bench_json(write_bench_reports(report, folder)[1])


def pair_line(kind: str, i: int, rows: list[CompareRow], seconds: float) -> str:
    changes = " ".join(f"{c.phase.replace('forward', 'fwd').replace('backward', 'bwd')} "
                       f"{c.change_pct:+5.1f}%{'!' if c.regression else ' '}"
                       for c in rows if c.change_pct is not None)
    moved = [m for m in (c.absolute_change_pct for c in rows) if m is not None]
    resampled = sum(1 for c in rows if "resampled" in c.note)
    return (f"  {kind:9s} pair {i + 1:2d}: {'REGRESSION' if bench.regressions(rows) else 'ok':10s}"
            f" ratio change: {changes}  | custom medians moved {min(moved):+6.1f}% .. "
            f"{max(moved):+6.1f}%{f' | {resampled} resampled' if resampled else ''}"
            f"  ({seconds:.0f} s)")


def spread(values: list[float]) -> str:
    return (f"min {min(values):+6.1f}%  median {statistics.median(values):+6.1f}%  "
            f"max {max(values):+6.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=bench.DEFAULT_THRESHOLD)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--max-time", type=float, default=1.0)
    parser.add_argument("--keep-files", type=Path, default=None,
                        help="keep the bench JSON/CSV files here (default: a temporary folder)")
    args = parser.parse_args()

    (target,) = [t for t in resolve(OP) if any(c.name == CASE for c in t.op.bench_cases)]
    slow = replace(target, op=replace(target.op, function=slowed(Exp, SLOWDOWN)))
    options = bench.BenchOptions(cases=(CASE,), dtypes=("float32",), devices=("cpu",),
                                 min_time=args.min_time, max_time=args.max_time,
                                 threads=args.threads)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.threads} intra-op "
          f"thread(s), load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{OP}/{CASE} float32 cpu, --min-time {args.min_time:g} --max-time "
          f"{args.max_time:g}, threshold {args.threshold:g}% on the custom/reference ratio")
    start = time.perf_counter()
    results: dict[str, list[list[CompareRow]]] = {"same code": [], "slowed": []}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep_files or scratch
        for i in range(args.pairs):
            # Interleaved, so the machine's load over the run hits both kinds alike.
            for kind, second in (("same code", target), ("slowed", slow)):
                t0 = time.perf_counter()
                stem = f"{i}-{kind.replace(' ', '-')}"
                old = bench_via_file(target, options, Path(tmp, f"{stem}-old"))
                new = bench_via_file(second, options, Path(tmp, f"{stem}-new"))
                rows = bench.compare(old, new, args.threshold)
                results[kind].append(rows)
                print(pair_line(kind, i, rows, time.perf_counter() - t0), flush=True)
    return summary(results, args.pairs, args.threshold, time.perf_counter() - start)


def summary(results: dict[str, list[list[CompareRow]]], pairs: int, threshold: float,
            seconds: float) -> int:
    """Print the table; 0 when no same-code pair and every slowed pair was flagged."""
    flagged = {k: sum(1 for rows in v if bench.regressions(rows)) for k, v in results.items()}
    ok_same, ok_slow = flagged["same code"] == 0, flagged["slowed"] == pairs
    print(f"\n{'pairs':>5}  {'kind':22s} {'flagged':>9}  {'required':>9}  verdict")
    print(f"{pairs:>5}  {'same code':22s} {flagged['same code']:>3} of {pairs:<3}  "
          f"{'0 of ' + str(pairs):>9}  {'PASS' if ok_same else 'FAIL'}  (false regressions)")
    print(f"{pairs:>5}  {f'custom {SLOWDOWN:.0%} slower':22s} {flagged['slowed']:>3} of "
          f"{pairs:<3}  {f'{pairs} of {pairs}':>9}  {'PASS' if ok_slow else 'FAIL'}  "
          "(true regressions)")
    print(f"\nchange of the custom/reference ratio, per phase over all pairs (threshold "
          f"+{threshold:g}%):")
    for kind, runs in results.items():
        for phase in bench.PHASES:
            values = [c.change_pct for rows in runs for c in rows
                      if c.phase == phase and c.change_pct is not None]
            hits = sum(1 for rows in runs for c in rows if c.phase == phase and c.regression)
            print(f"  {kind:9s} {phase:17s} {spread(values)}   flagged in {hits} of {len(runs)}")
    # Where a threshold can sit: above every significant same-code change, below the largest
    # significant change of every slowed pair.
    same = [c.change_pct for rows in results["same code"] for c in rows
            if c.significant and c.change_pct is not None]
    caught = [max((c.change_pct for c in rows if c.significant and c.change_pct is not None),
                  default=0.0) for rows in results["slowed"]]
    print(f"significant changes (interval excludes 1): same code at most "
          f"{max(same, default=0.0):+.1f}%; slowed, each pair's largest: at least "
          f"{min(caught):+.1f}%")
    for kind, runs in results.items():
        moved = [m for rows in runs for c in rows if (m := c.absolute_change_pct) is not None]
        print(f"absolute custom medians, {kind}: {spread(moved)} (shown, not gated)")
    print(f"{seconds:.0f} s in all; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if ok_same and ok_slow else 1


if __name__ == "__main__":
    sys.exit(main())

"""The bench run: which cases, dtypes and devices, and each phase warmed up, sampled, summarised.

The custom Function and its reference, in every phase, are sampled in the same rounds of one
sample each in a seeded random order, so slow drift and other jobs' time slices hit both alike
(and every phase alike), and the speedup (reference median / custom median) gets a paired
bootstrap confidence interval.
Everything here returns data; gradlab.render shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from typing import Any

import torch

from gradlab import ops
from gradlab.bench.heap import steady_heap
from gradlab.bench.impl import Impl
from gradlab.bench.options import BenchOptions
from gradlab.bench.phase import (
    CUSTOM,
    MAX_RESAMPLES,
    REFERENCE,
    CaseBench,
    first_line,
    measure,
    release,
)
from gradlab.bench.stats import (
    CONFIDENCE,
    CONTRADICTION_SLACK,
    GATE_QUANTILE,
    MIN_SAMPLES_FLOOR,
    NOISY_IQR_RATIO,
)
from gradlab.bench.timing import BLOCK_TIME, Clock, Sync
from gradlab.cases import case_seed, materialize
from gradlab.model import Case, OpDef, Target
from gradlab.results.bench import BenchError, BenchReport, BenchRow
from gradlab.results.status import ERROR, PASS, SKIP
from gradlab.torchstate import intra_op_threads

#: The note of a row whose phase Ctrl-C stopped before its first sampling round.
WARMED_UP_ONLY = "interrupted before its first round: first call and saved bytes only"


def bench_cases(op: OpDef, names: Sequence[str] | None = None) -> tuple[Case, ...]:
    """The op's bench cases (its check cases when it has none), optionally only `names`."""
    cases = op.bench_cases or op.cases
    return tuple(c for c in cases if c.name in names) if names else cases


def bench_dtypes(target: Target, options: BenchOptions) -> tuple[str, ...]:
    """--dtype if given; else the declared dtypes without float64, or float64 if that is all.

    Specs list float64 for the numerical checks; a benchmark in float64 is rarely what anyone
    runs in practice, so `gradlab bench specs/` times float32 for the bundled specs.
    """
    if options.dtypes:
        return options.dtypes
    declared = target.dtypes or target.op.dtypes
    fast = tuple(d for d in declared if d != "float64")
    return fast or declared[:1]


def bench_devices(target: Target, options: BenchOptions) -> tuple[str, ...]:
    """--device if given; else the spec's devices; else cpu."""
    return options.devices or target.devices or ("cpu",)


def plan(targets: Sequence[Target], options: BenchOptions
         ) -> Iterator[tuple[Target, Case, str, str]]:
    """The (target, case, dtype, device) items of a run, in order."""
    for t in targets:
        for case in bench_cases(t.op, options.cases):
            for device in bench_devices(t, options):
                for dtype in bench_dtypes(t, options):
                    yield t, case, dtype, device


def default_sync(device: str) -> Sync:
    """torch.cuda.synchronize on CUDA (kernels run asynchronously), a no-op on CPU."""
    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def bench_case(op: OpDef, case: Case, dtype: str, device: str, options: BenchOptions, *,
               clock: Clock = time.perf_counter, sync: Sync | None = None) -> list[BenchRow]:
    """Every phase of the custom Function and its reference on one case, dtype and device.

    A crash fails the rows it touches (status error, note says why); the rest still run.
    """
    return [r for rows in iter_bench_case(op, case, dtype, device, options, clock=clock,
                                          sync=sync) for r in rows]


def _skip_reason(op: OpDef, device: str) -> str:
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "CUDA is not available"
    if device.split(":")[0] not in op.devices:
        return f"{op.name} does not run on {device}"
    return ""


def iter_bench_case(op: OpDef, case: Case, dtype: str, device: str, options: BenchOptions, *,
                    clock: Clock = time.perf_counter, sync: Sync | None = None
                    ) -> Iterator[list[BenchRow]]:
    """bench_case, one phase's rows at a time, after every phase was sampled (phase.measure);
    an interrupted case yields the rows of the rounds it finished."""
    op = ops.resolved(op)  # the op's own callables are timed, not a proxy's call
    names = [CUSTOM] if op.reference is None else [CUSTOM, REFERENCE]
    fns = {CUSTOM: op.function, REFERENCE: op.reference}

    def row(impl: str, phase: str, **kw: Any) -> BenchRow:
        return BenchRow(op.name, case.name, dtype, device, impl, phase, **kw)

    skip = _skip_reason(op, device)
    if skip:
        for p in options.phases:  # one list per phase, as below (progress counts phases)
            yield [row(i, p, status=SKIP, note=skip) for i in names]
        return
    seed = case_seed(options.seed, op.name, case.name)
    try:
        base = materialize(case, dtype, device, seed)
    except Exception as exc:
        for p in options.phases:
            yield [row(i, p, status=ERROR, note=f"cannot make inputs: {first_line(exc)}")
                   for i in names]
        return
    impls = {}
    for name in names:
        fn = fns[name]
        assert fn is not None
        # The reference gets its own leaf copy with the same values: grads never mix.
        impls[name] = Impl(fn, base if name == CUSTOM else base.clone(), grad_seed=seed + 1)
    bench = CaseBench(impls, device, options, clock, sync or default_sync(device), row)
    try:
        measure(bench, options.phases)
    except KeyboardInterrupt:
        # the rows sampled before it (phase.measure keeps every finished round), and those
        # only warmed up: their first call and saved bytes were measured, nothing else
        for rows, _ in bench.measured.values():
            for r in rows.values():
                if r.status == PASS and not r.n and r.first_call_s is not None:
                    r.status, r.note = SKIP, WARMED_UP_ONLY
            kept = [r for r in rows.values() if r.n or r.status != PASS]
            if kept:
                yield kept
        raise
    for phase in options.phases:
        yield list(bench.measured[phase][0].values())


def run(targets: Sequence[Target], options: BenchOptions | None = None, *,
        clock: Clock = time.perf_counter, sync: Sync | None = None,
        on_step: Callable[[str], None] | None = None) -> BenchReport:
    """Bench every case of every target; `on_step(label)` is told after each phase.

    Ctrl-C stops the run and returns the rows measured so far (report.interrupted is set).
    """
    from gradlab.envinfo import environment, timing_distortions

    options = options or BenchOptions()
    items = list(plan(targets, options))
    if options.cases and not items:
        raise BenchError(f"--case: no bench case named {', '.join(options.cases)}")
    devices = sorted({d for _, _, _, d in items})
    env_device = next((d for d in devices if d.startswith("cuda")), "cpu")
    # CPU timings on a heap whose state the order of earlier allocations does not decide
    steady = options.steady_heap and steady_heap()
    with intra_op_threads(options.threads):
        # the environment is read inside: it records the thread count the run uses
        report = BenchReport(env=environment(seed=options.seed, device=env_device)
                             | {"timing_distortions": "; ".join(timing_distortions())},
                             settings=settings_dict(options) | {"steady_heap": steady})
        try:
            for t, case, dtype, device in items:
                label = f"{t.op.name}/{case.name}/{dtype}/{device}"
                for rows in iter_bench_case(t.op, case, dtype, device, options, clock=clock,
                                            sync=sync):
                    report.rows.extend(rows)
                    if on_step is not None:
                        on_step(f"{label} {rows[0].phase}")
                release(device)
        except KeyboardInterrupt:
            report.interrupted = True
    return report


def total_steps(targets: Sequence[Target], options: BenchOptions) -> int:
    """How many times `run` calls on_step (for a progress bar)."""
    return sum(1 for _ in plan(targets, options)) * len(options.phases)


def settings_dict(options: BenchOptions) -> dict[str, Any]:
    """The options that shape the numbers, as recorded in every report."""
    d = asdict(options)
    d.update(noisy_iqr_ratio=NOISY_IQR_RATIO, confidence=CONFIDENCE, block_time=BLOCK_TIME,
             min_samples_floor=MIN_SAMPLES_FLOOR, contradiction_slack=CONTRADICTION_SLACK,
             max_resamples=MAX_RESAMPLES, gate_quantile=GATE_QUANTILE)
    return d

"""The bench run: which cases, dtypes and devices, and each phase warmed up, sampled, summarised.

The custom Function and its reference are sampled alternately, in rounds of one sample each in
a seeded random order (A B, B A, ...), so slow drift and other jobs' time slices hit both alike,
and the speedup (reference median / custom median) gets a paired bootstrap confidence interval.
Everything here returns data; gradlab.render shows it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from gradlab.bench.impl import BACKWARD_PHASES, PHASES, Impl
from gradlab.bench.memory import cuda_peak, input_bytes, saved_bytes
from gradlab.bench.stats import (
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    CONTRADICTION_SLACK,
    MIN_SAMPLES_FLOOR,
    NOISY_IQR_RATIO,
    exceeds_whole,
    median_ratio,
    summarize,
)
from gradlab.bench.timing import (
    BLOCK_TIME,
    DEFAULT_MAX_TIME,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_MIN_TIME,
    DEFAULT_WARMUP_TIME,
    Clock,
    Sync,
    Task,
    graph_block_cap,
    sample_interleaved,
    warm_up,
)
from gradlab.cases import case_seed, materialize
from gradlab.model import Case, OpDef, Target
from gradlab.results.bench import BenchError, BenchReport, BenchRow
from gradlab.results.status import ERROR, PASS, SKIP
from gradlab.torchstate import intra_op_threads

#: The two implementations of a bench case (the `impl` column).
CUSTOM, REFERENCE = "custom", "reference"
#: The phase every other phase is a part of: none can take longer (beyond noise).
WHOLE = "forward_backward"
#: A phase whose median exceeds the whole's is sampled again up to this many times (a burst of
#: load from another job rarely lasts through two more samplings; a bound keeps the cost known).
MAX_RESAMPLES = 2


@dataclass(frozen=True)
class BenchOptions:
    """Run-wide settings; dtypes/devices None fall back to the spec's (see bench_dtypes)."""

    dtypes: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    #: only the bench cases with these names.
    cases: tuple[str, ...] | None = None
    min_time: float = DEFAULT_MIN_TIME
    min_samples: int = DEFAULT_MIN_SAMPLES
    max_time: float = DEFAULT_MAX_TIME
    warmup_time: float = DEFAULT_WARMUP_TIME
    #: torch.set_num_threads for the run (None: leave as it is); recorded in the environment.
    threads: int | None = None
    seed: int = 0
    resamples: int = BOOTSTRAP_RESAMPLES
    phases: tuple[str, ...] = PHASES


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


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
    """bench_case, one phase's rows at a time (so an interrupted run keeps finished phases)."""
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
            yield [row(i, p, status=ERROR, note=f"cannot make inputs: {_first_line(exc)}")
                   for i in names]
        return
    impls = {}
    for name in names:
        fn = fns[name]
        assert fn is not None
        # The reference gets its own leaf copy with the same values: grads never mix.
        impls[name] = Impl(fn, base if name == CUSTOM else base.clone(), grad_seed=seed + 1)
    bench = _CaseBench(impls, device, options, clock, sync or default_sync(device), row)
    for phase in options.phases:
        rows = _bench_phase(bench, phase)
        # Once the whole is measured, check the parts measured so far (and each later one);
        # a part resampled here is one already yielded: its rows change in place.
        if phase == WHOLE:
            for part in [p for p in bench.measured if p != WHOLE]:
                _settle(bench, part)
        elif WHOLE in bench.measured:
            _settle(bench, phase)
        yield rows


@dataclass
class _CaseBench:
    """What the phases of one case, dtype and device share."""

    impls: dict[str, Impl]
    device: str
    options: BenchOptions
    clock: Clock
    sync: Sync
    row: Callable[[str, str], BenchRow]
    #: saved bytes per implementation: one forward with grad tells all three grad phases.
    saved: dict[str, int] = field(default_factory=dict)
    #: samplings so far: each draws its rounds' order from its own seed.
    samplings: int = 0
    #: per phase measured: its rows and the live tasks that sampled them (to sample again).
    measured: dict[str, tuple[dict[str, BenchRow], dict[str, tuple[Task, int]]]] = field(
        default_factory=dict)


def _bench_phase(bench: _CaseBench, phase: str) -> list[BenchRow]:
    """Warm up, measure memory, sample alternately and summarise one phase."""
    rows = {name: bench.row(name, phase) for name in bench.impls}
    live: dict[str, tuple[Task, int]] = {}
    for name in bench.impls:
        prepared = _prepare(bench, name, phase, rows[name])
        if prepared is not None:
            live[name] = prepared
    if live:
        _sample(bench, rows, live)
    _speedup(rows, bench.options)
    bench.measured[phase] = (rows, live)
    return list(rows.values())


def _contradicts(rows: Mapping[str, BenchRow], whole: Mapping[str, BenchRow]) -> float | None:
    """The largest part / whole median ratio beyond CONTRADICTION_SLACK, else None."""
    worst = None
    for name, r in rows.items():
        w = whole.get(name)
        if (w is not None and r.status == PASS and w.status == PASS and r.median_s is not None
                and w.median_s and exceeds_whole(r.median_s, w.median_s)):
            worst = max(worst or 0.0, r.median_s / w.median_s)
    return worst


def _settle(bench: _CaseBench, phase: str) -> None:
    """Sample `phase` again while a median of it exceeds the same implementation's median of the
    whole (a burst of load, not the code), up to MAX_RESAMPLES times; the note says so."""
    rows, live = bench.measured[phase]
    whole = bench.measured[WHOLE][0]
    now = first = _contradicts(rows, whole)
    if first is None or not live:
        return
    tries = 0
    while now is not None and tries < MAX_RESAMPLES:
        tries += 1
        for name in live:
            r = rows[name]
            r.note, r.speedup, r.speedup_low, r.speedup_high, r.significant = (
                "", None, None, None, None)
        _sample(bench, rows, live)
        _speedup(rows, bench.options)
        now = _contradicts(rows, whole)
    note = f"resampled {tries}x: its median was {first:.2f}x {WHOLE}'s"
    if now is not None:
        note += f", still {now:.2f}x"
    for name in live:
        rows[name].resampled = tries
        rows[name].note = "; ".join(filter(None, [rows[name].note, note]))


def _prepare(bench: _CaseBench, name: str, phase: str, r: BenchRow) -> tuple[Task, int] | None:
    """The phase's Task and block size, after warm-up and memory; None when it crashed."""
    impl = bench.impls[name]
    try:
        task = impl.task(phase)
        r.first_call_s, number = warm_up(task, bench.clock, bench.sync,
                                         bench.options.warmup_time)
        if phase == "forward":
            r.saved_bytes = 0  # nothing is saved under no_grad
        else:
            if name not in bench.saved:
                bench.saved[name] = saved_bytes(impl.call)
            r.saved_bytes = bench.saved[name]
        if phase in BACKWARD_PHASES:
            number = min(number, graph_block_cap((r.saved_bytes or 0)
                                                 + input_bytes(impl.pool[0])))
        if bench.device.startswith("cuda"):
            r.peak_mem_bytes = cuda_peak(task, bench.device, bench.sync)
        return task, number
    except Exception as exc:
        r.status, r.note = ERROR, _first_line(exc)
        _release(bench.device)
        return None


def _sample(bench: _CaseBench, rows: Mapping[str, BenchRow],
            live: Mapping[str, tuple[Task, int]]) -> None:
    """Sample the live implementations alternately and fill their rows."""
    options = bench.options
    try:
        samples = sample_interleaved([t for t, _ in live.values()],
                                     [n for _, n in live.values()],
                                     min_time=options.min_time, min_samples=options.min_samples,
                                     max_time=options.max_time, clock=bench.clock,
                                     sync=bench.sync,
                                     order_seed=options.seed * 1_000_003 + bench.samplings)
        bench.samplings += 1
    except Exception as exc:
        # Which implementation raised is not known here: both rows carry the error.
        for name in live:
            rows[name].status, rows[name].note = ERROR, f"while sampling: {_first_line(exc)}"
        _release(bench.device)
        return
    for (name, (_, number)), s in zip(live.items(), samples, strict=True):
        r, st = rows[name], summarize(s)
        r.median_s, r.iqr_s, r.min_s, r.n = st.median, st.iqr, st.min, st.n
        r.number, r.noisy, r.samples_s = number, st.noisy, list(s)
        if st.n < options.min_samples:
            r.note = f"only {st.n} samples (--max-time {options.max_time:g} s reached)"


def _speedup(rows: Mapping[str, BenchRow], options: BenchOptions) -> None:
    """Set the custom row's speedup (reference / custom medians) and its paired interval."""
    c, r = rows.get(CUSTOM), rows.get(REFERENCE)
    if c is None or r is None or c.status != PASS or r.status != PASS:
        return
    ratio = median_ratio(r.samples_s, c.samples_s, paired=True, resamples=options.resamples,
                         seed=options.seed)
    if ratio is None:
        return
    c.speedup, c.speedup_low, c.speedup_high = ratio.value, ratio.low, ratio.high
    c.significant = ratio.significant
    if not ratio.significant:
        c.note = "; ".join(filter(None, [c.note, "no significant difference"]))


def _release(device: str) -> None:
    """Free what a crashed call left behind (an OOM must not fail the next case too)."""
    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run(targets: Sequence[Target], options: BenchOptions | None = None, *,
        clock: Clock = time.perf_counter, sync: Sync | None = None,
        on_step: Callable[[str], None] | None = None) -> BenchReport:
    """Bench every case of every target; `on_step(label)` is told after each phase.

    Ctrl-C stops the run and returns the rows measured so far (report.interrupted is set).
    """
    from gradlab.envinfo import environment

    options = options or BenchOptions()
    items = list(plan(targets, options))
    if options.cases and not items:
        raise BenchError(f"--case: no bench case named {', '.join(options.cases)}")
    devices = sorted({d for _, _, _, d in items})
    env_device = next((d for d in devices if d.startswith("cuda")), "cpu")
    with intra_op_threads(options.threads):
        # the environment is read inside: it records the thread count the run uses
        report = BenchReport(env=environment(seed=options.seed, device=env_device),
                             settings=settings_dict(options))
        try:
            for t, case, dtype, device in items:
                label = f"{t.op.name}/{case.name}/{dtype}/{device}"
                for rows in iter_bench_case(t.op, case, dtype, device, options, clock=clock,
                                            sync=sync):
                    report.rows.extend(rows)
                    if on_step is not None:
                        on_step(f"{label} {rows[0].phase}")
                _release(device)
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
             max_resamples=MAX_RESAMPLES)
    return d

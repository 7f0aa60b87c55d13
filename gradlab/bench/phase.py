"""One case's phases: warm-up and memory per phase, then every phase sampled in the same rounds,
summaries, and a phase that contradicts the others sampled again.

All phases of both implementations are sampled in one set of rounds (one sample of each task a
round, in a seeded random order) until they measured min_time on average (timing.
sample_interleaved's pooled rule: about what sampling them one after the other cost).  A burst
of other load then falls on every phase alike instead of on the one phase being sampled while
it lasted: sampled one after the other, two same-code benches beside a looping test suite once
read forward +13.5% and backward +15.5% while forward_grad (the same forward code) and
forward_backward held, and compare called it a regression.  Each task keeps its own block size
(timing.block_size): blocks stretched to last alike put four backward graphs in memory at once,
and one same-code pair then read backward +105% (page faults of a heap in another state).

No part of a call can take longer than the whole: a forward, forward_grad or backward median
above the same implementation's forward_backward median, or a forward_backward whose
custom/reference ratio lies outside those of its two parts (forward_grad and backward), is a
burst of other load, not the code.  Such a phase is sampled again (both implementations, in
rounds again), up to MAX_RESAMPLES times; its rows say so, and one that still contradicts is
marked `contradicted`, which compare does not judge.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from gradlab.bench.impl import BACKWARD_PHASES, Impl
from gradlab.bench.memory import cuda_peak, input_bytes, saved_bytes
from gradlab.bench.options import BenchOptions
from gradlab.bench.stats import (
    exceeds_whole,
    low_ratio,
    median_ratio,
    outside_range,
    summarize,
)
from gradlab.bench.timing import (
    Clock,
    Sync,
    Task,
    graph_block_cap,
    sample_interleaved,
    warm_up,
)
from gradlab.results.bench import PARTS, WHOLE, BenchRow
from gradlab.results.status import ERROR, PASS

#: The two implementations of a bench case (the `impl` column).
CUSTOM, REFERENCE = "custom", "reference"
#: A contradicting phase is sampled again up to this many times (a burst of load from another
#: job rarely lasts through two more samplings; a bound keeps the cost known).
MAX_RESAMPLES = 2


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


@dataclass
class CaseBench:
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


def measure(bench: CaseBench, phases: Sequence[str]) -> None:
    """Warm up every phase, sample them all in the same rounds, and settle (see the module);
    the rows are in bench.measured.  A KeyboardInterrupt while sampling leaves the rows of
    the rounds finished so far before it goes on up."""
    for phase in phases:
        rows = {name: bench.row(name, phase) for name in bench.impls}
        live: dict[str, tuple[Task, int]] = {}
        for name in bench.impls:
            prepared = _prepare(bench, name, phase, rows[name])
            if prepared is not None:
                live[name] = prepared
        bench.measured[phase] = (rows, live)
    _sample_jointly(bench)
    for rows, _ in bench.measured.values():
        _speedup(rows, bench.options)
    settle(bench)


def settle(bench: CaseBench) -> None:
    """Resample what contradicts the others (see the module): parts above the whole first,
    then a whole whose ratio lies outside its parts'."""
    def above(x: float) -> str:
        return f"its median was {x:.2f}x {WHOLE}'s"

    def outside(x: float) -> str:
        return f"its custom/reference ratio was {x:.2f}x outside those of {' and '.join(PARTS)}"

    if WHOLE not in bench.measured:
        return
    for part in [p for p in bench.measured if p != WHOLE]:
        _resample_while(bench, part, partial(_above_whole, bench, part), above)
    _resample_while(bench, WHOLE, partial(_ratio_outside_parts, bench), outside)


class _Raised(Exception):
    """A task of a joint sampling raised: which one, and what."""

    def __init__(self, index: int, exc: Exception):
        super().__init__(str(exc))
        self.index, self.exc = index, exc


def _tagged(index: int, task: Task) -> Task:
    """`task`, its exceptions tagged with its index in the joint sampling."""
    def setup(k: int) -> Any:
        try:
            return task.setup(k)
        except Exception as exc:
            raise _Raised(index, exc) from exc

    def run(state: Any) -> None:
        try:
            task.run(state)
        except Exception as exc:
            raise _Raised(index, exc) from exc
    return Task(setup=setup, run=run)


def _sample_jointly(bench: CaseBench) -> None:
    """Sample every live task of every phase in the same rounds and fill their rows.

    A task that raises fails its own row (the others are sampled again without it)."""
    entries = [(phase, name) for phase, (_, live) in bench.measured.items() for name in live]
    while entries:
        tasks = [_tagged(i, bench.measured[p][1][n][0]) for i, (p, n) in enumerate(entries)]
        into: list[list[float]] = [[] for _ in entries]
        try:
            _sample_tasks(bench, tasks, [bench.measured[p][1][n][1] for p, n in entries], into,
                          pooled=True)
        except _Raised as raised:
            phase, name = entries.pop(raised.index)
            rows, live = bench.measured[phase]
            rows[name].status = ERROR
            rows[name].note = f"while sampling: {first_line(raised.exc)}"
            del live[name]
            release(bench.device)
            continue
        except KeyboardInterrupt:
            _fill_partial(bench, entries, into)
            raise
        for (phase, name), s in zip(entries, into, strict=True):
            rows, live = bench.measured[phase]
            _fill(rows[name], s, live[name][1], bench.options)
        return


def _sample_tasks(bench: CaseBench, tasks: Sequence[Task], numbers: Sequence[int],
                  into: list[list[float]], pooled: bool = False) -> None:
    options = bench.options
    seed = options.seed * 1_000_003 + bench.samplings
    bench.samplings += 1
    sample_interleaved(tasks, numbers, min_time=options.min_time,
                       min_samples=options.min_samples, max_time=options.max_time,
                       clock=bench.clock, sync=bench.sync, order_seed=seed, into=into,
                       pooled=pooled)


def _fill_partial(bench: CaseBench, entries: Sequence[tuple[str, str]],
                  into: Sequence[list[float]]) -> None:
    """After an interrupt: rows from the rounds every task of a phase finished, however few
    (one round is a measurement too; the statistics say n and give no interval under
    stats.MIN_INTERVAL_SAMPLES); a phase with no finished round keeps no samples."""
    by_phase: dict[str, list[tuple[str, list[float]]]] = {}
    for (phase, name), s in zip(entries, into, strict=True):
        by_phase.setdefault(phase, []).append((name, s))
    for phase, named in by_phase.items():
        rounds = min(len(s) for _, s in named)
        if rounds == 0:
            continue
        rows, live = bench.measured[phase]
        for name, s in named:
            _fill(rows[name], s[:rounds], live[name][1], bench.options,
                  few=f"interrupted after {rounds} rounds")
        _speedup(rows, bench.options)


def _fill(r: BenchRow, samples: Sequence[float], number: int, options: BenchOptions,
          few: str | None = None) -> None:
    """A row's summary from its samples; `few`: why they may be fewer than asked for (the
    sampling's own stopping rule when None)."""
    st = summarize(samples)
    r.median_s, r.iqr_s, r.min_s, r.n = st.median, st.iqr, st.min, st.n
    r.number, r.noisy, r.samples_s = number, st.noisy, list(samples)
    if few is not None:
        r.note = "; ".join(filter(None, [r.note, few]))
    elif st.n < options.min_samples:
        r.note = f"only {st.n} samples (--max-time {options.max_time:g} s reached)"


def _above_whole(bench: CaseBench, phase: str) -> float | None:
    """The largest part / whole median ratio beyond CONTRADICTION_SLACK, else None."""
    rows, whole = bench.measured[phase][0], bench.measured[WHOLE][0]
    worst = None
    for name, r in rows.items():
        w = whole.get(name)
        if (w is not None and r.status == PASS and w.status == PASS and r.median_s is not None
                and w.median_s and exceeds_whole(r.median_s, w.median_s)):
            worst = max(worst or 0.0, r.median_s / w.median_s)
    return worst


def _gate_ratio(bench: CaseBench, phase: str) -> float | None:
    rows = bench.measured[phase][0] if phase in bench.measured else {}
    c, r = rows.get(CUSTOM), rows.get(REFERENCE)
    if c is None or r is None or c.status != PASS or r.status != PASS:
        return None
    return low_ratio(c.samples_s, r.samples_s)


def _ratio_outside_parts(bench: CaseBench) -> float | None:
    """How far the whole's custom/reference ratio lies outside its parts' (None: inside)."""
    whole, parts = _gate_ratio(bench, WHOLE), [_gate_ratio(bench, p) for p in PARTS]
    if whole is None or any(p is None for p in parts):
        return None
    return outside_range(whole, [p for p in parts if p is not None])


def _resample_while(bench: CaseBench, phase: str, contradiction: Callable[[], float | None],
                    words: Callable[[float], str]) -> None:
    """Sample `phase` again while `contradiction()` says by how much it contradicts the others,
    up to MAX_RESAMPLES times; note it on the rows, and mark them if it still does."""
    rows, live = bench.measured[phase]
    now = first = contradiction()
    if first is None or not live:
        return
    tries = 0
    while now is not None and tries < MAX_RESAMPLES:
        tries += 1
        for name in live:
            r = rows[name]
            r.note, r.speedup, r.speedup_low, r.speedup_high, r.significant = (
                "", None, None, None, None)
        try:
            _sample(bench, rows, live)
        except KeyboardInterrupt:
            # the rows keep the samples of the sampling before this one
            _speedup(rows, bench.options)
            for name in live:
                rows[name].note = "; ".join(filter(None, [rows[name].note,
                                                          "interrupted while resampling"]))
            raise
        _speedup(rows, bench.options)
        now = contradiction()
    note = f"resampled {tries}x: {words(first)}"
    if now is not None:
        note += f"; still {now:.2f}x"
    for name in live:
        rows[name].resampled += tries
        rows[name].contradicted = now is not None
        rows[name].note = "; ".join(filter(None, [rows[name].note, note]))


def _prepare(bench: CaseBench, name: str, phase: str, r: BenchRow) -> tuple[Task, int] | None:
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
        r.status, r.note = ERROR, first_line(exc)
        release(bench.device)
        return None


def _sample(bench: CaseBench, rows: Mapping[str, BenchRow],
            live: Mapping[str, tuple[Task, int]]) -> None:
    """Sample one phase's live implementations again, alternately, and fill their rows."""
    into: list[list[float]] = [[] for _ in live]
    try:
        _sample_tasks(bench, [t for t, _ in live.values()], [n for _, n in live.values()], into)
    except Exception as exc:
        # Which implementation raised is not known here: both rows carry the error.
        for name in live:
            rows[name].status, rows[name].note = ERROR, f"while sampling: {first_line(exc)}"
        release(bench.device)
        return
    for (name, (_, number)), s in zip(live.items(), into, strict=True):
        _fill(rows[name], s, number, bench.options)


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
    if ratio.low is None:
        said = f"n={ratio.n}: too few samples for a confidence interval"
    else:
        said = "" if ratio.significant else "no significant difference"
    c.note = "; ".join(filter(None, [c.note, said]))


def release(device: str) -> None:
    """Free what a crashed call left behind (an OOM must not fail the next case too)."""
    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()

"""One case's phases: warm-up, memory, sampling in rounds, summary, and a phase that
contradicts the others sampled again.

No part of a call can take longer than the whole: a forward, forward_grad or backward median
above the same implementation's forward_backward median, or a forward_backward whose
custom/reference ratio lies outside those of its two parts (forward_grad and backward), is a
burst of other load, not the code.  Such a phase is sampled again (both implementations, in
rounds again), up to MAX_RESAMPLES times; its rows say so, and one that still contradicts is
marked `contradicted`, which compare does not judge.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

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
from gradlab.bench.timing import Clock, Sync, Task, graph_block_cap, sample_interleaved, warm_up
from gradlab.results.bench import BenchRow
from gradlab.results.status import ERROR, PASS

#: The two implementations of a bench case (the `impl` column).
CUSTOM, REFERENCE = "custom", "reference"
#: The phase every other phase is a part of: none can take longer (beyond noise).
WHOLE = "forward_backward"
#: The parts whose costs add up to the whole's.
PARTS = ("forward_grad", "backward")
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


def bench_phase(bench: CaseBench, phase: str) -> list[BenchRow]:
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


def settle(bench: CaseBench, phase: str) -> None:
    """After `phase` was measured: resample what contradicts the others (see the module)."""
    def above(x: float) -> str:
        return f"its median was {x:.2f}x {WHOLE}'s"

    def outside(x: float) -> str:
        return f"its custom/reference ratio was {x:.2f}x outside those of {' and '.join(PARTS)}"

    if phase == WHOLE:
        for part in [p for p in bench.measured if p != WHOLE]:
            _resample_while(bench, part, partial(_above_whole, bench, part), above)
        _resample_while(bench, WHOLE, partial(_ratio_outside_parts, bench), outside)
    elif WHOLE in bench.measured:
        _resample_while(bench, phase, partial(_above_whole, bench, phase), above)


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
        _sample(bench, rows, live)
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
            rows[name].status, rows[name].note = ERROR, f"while sampling: {first_line(exc)}"
        release(bench.device)
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


def release(device: str) -> None:
    """Free what a crashed call left behind (an OOM must not fail the next case too)."""
    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()

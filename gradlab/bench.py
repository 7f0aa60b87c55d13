"""Phase-aware timing and memory of custom Functions against their autograd references.

For each bench case, the custom Function (`op.function`) and its reference (`op.reference`) are
timed in four phases:

    forward           the call under torch.no_grad()
    forward_grad      the call with grad enabled (it records the graph and saves tensors)
    backward          backward alone, with a fixed random grad_output, on a fresh graph per call
                      built outside the timed region
    forward_backward  the call and its backward

The two implementations are sampled alternately (A B A B ...) so slow drift of the machine hits
both alike, and the speedup (reference median / custom median) gets a bootstrap confidence
interval.  Everything here returns data; `gradlab.benchreport` renders it.  The clock and the
device synchronisation are parameters, so tests drive the statistics with a fake clock.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, case_seed, materialize
from gradlab.errors import GradlabError
from gradlab.jacobian import flat_outputs
from gradlab.model import Case, OpDef, Target
from gradlab.torchstate import intra_op_threads

Clock = Callable[[], float]
Sync = Callable[[], None]

PHASES = ("forward", "forward_grad", "backward", "forward_backward")
CUSTOM, REFERENCE = "custom", "reference"
OK, ERROR, SKIP = "ok", "error", "skip"

#: Per phase and implementation, sampling goes on until this much time was measured...
DEFAULT_MIN_TIME = 0.2
#: ...and at least this many samples were taken (enough for a median and quartiles that mean
#: something, and for a bootstrap interval that is not just the extreme values).
DEFAULT_MIN_SAMPLES = 10
#: Except: once one implementation has spent this long in a phase, sampling stops as soon as
#: MIN_SAMPLES_FLOOR samples are in.  Without it a 1 s-per-call reference (modconv's) costs
#: minutes per case; such rows are marked in their note.  0 turns the cap off.
DEFAULT_MAX_TIME = 1.0
#: The fewest samples a phase ever stops at: a median of 3 still ignores one outlier.
MIN_SAMPLES_FLOOR = 3
#: Hard cap on samples per phase (it also stops a clock that never advances).
MAX_SAMPLES = 10_000
#: Untimed warm-up after the (separately reported) first call, per implementation and phase:
#: lets caches, allocators and the CPU clock settle.  Skipped when the first call took longer.
DEFAULT_WARMUP_TIME = 0.05
#: ...and at least this many calls after the first, however long they take: the allocator (glibc
#: adapts its mmap threshold to the sizes freed) and oneDNN's primitive cache settle over the
#: first few calls; without them a 60 ms conv backward measured 13% apart between two runs.
WARMUP_MIN_CALLS = 3
#: A sample times a block of calls lasting at least this long (a call of 5 µs is timed 200 at a
#: time), so the clock's resolution and the per-sample Python overhead stay below 1%.
BLOCK_TIME = 1e-3
#: The largest block (backward phases keep one graph and one copy of the inputs per call).
MAX_BLOCK = 1000
#: Backward phases hold a block's graphs and input copies at once: a block stays under this many
#: bytes of them (saved tensors + inputs per call), so a fast kernel that saves hundreds of MB
#: is timed a few calls at a time rather than filling the device.
MAX_BLOCK_BYTES = 1 << 30
#: A row is `noisy` when IQR / median exceeds this: beyond 10% the median itself moves by a few
#: percent between runs, more than the differences a benchmark is usually asked to resolve.
NOISY_IQR_RATIO = 0.10
#: Bootstrap resamples and confidence level of the speedup (and compare) intervals: 2000
#: resamples put the 2.5% / 97.5% percentiles within about 1% of their limit.
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
#: Default regression threshold of `compare`, in percent.
DEFAULT_THRESHOLD = 5.0

#: The columns of a bench row, in order (CSV adds the environment columns after these; the raw
#: samples go to the JSON only).
COLUMNS = ("op", "case", "dtype", "device", "impl", "phase", "status", "median_s", "iqr_s",
           "min_s", "n", "number", "noisy", "speedup", "speedup_low", "speedup_high",
           "significant", "saved_bytes", "peak_mem_bytes", "first_call_s", "note")


class BenchError(GradlabError):
    """A bench run or comparison cannot go on (bad options, unreadable result file)."""


# ---------------------------------------------------------------------------------------------
# Statistics (pure functions of the samples)


@dataclass(frozen=True)
class Stats:
    """Summary of one implementation's samples in one phase (seconds per call)."""

    median: float
    q1: float
    q3: float
    min: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def noisy(self) -> bool:
        """IQR / median above NOISY_IQR_RATIO."""
        return self.median > 0 and self.iqr / self.median > NOISY_IQR_RATIO


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    if not sorted_values:
        raise ValueError("no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Stats:
    """Median, quartiles, min and count of `samples`.

    >>> s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    >>> (s.median, s.iqr, s.min, s.n)
    (3.0, 2.0, 1.0, 5)
    """
    v = sorted(samples)
    return Stats(median=quantile(v, 0.5), q1=quantile(v, 0.25), q3=quantile(v, 0.75),
                 min=v[0], n=len(v))


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], *, paired: bool,
                    resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(num) / median(den).

    paired: resample the same positions of both (samples taken alternately, A B A B, pair up
    so slow drift cancels); otherwise each side is resampled on its own (two separate runs).
    """
    import numpy as np

    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if paired and len(a) != len(b):
        raise ValueError("paired bootstrap needs as many samples on both sides")
    rng = np.random.default_rng(seed)
    ratios = []
    # Chunks bound the index matrix to a few million entries however many samples there are.
    chunk = max(1, 4_000_000 // max(len(a), len(b), 1))
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        ia = rng.integers(0, len(a), size=(k, len(a)))
        ib = ia if paired else rng.integers(0, len(b), size=(k, len(b)))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios.append(np.median(a[ia], axis=1) / np.median(b[ib], axis=1))
    r = np.concatenate(ratios)
    tail = (1.0 - confidence) / 2 * 100
    lo, hi = np.percentile(r, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its bootstrap interval; significant when it excludes 1."""

    value: float
    low: float
    high: float
    significant: bool


def median_ratio(num: Sequence[float], den: Sequence[float], *, paired: bool,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Ratio | None:
    """median(num) / median(den) with its interval; None when a median is not positive."""
    mn, md = summarize(num).median, summarize(den).median
    if not (mn > 0 and md > 0):
        return None
    lo, hi = bootstrap_ratio(num, den, paired=paired, resamples=resamples, seed=seed)
    # Fewer than MIN_SAMPLES_FLOOR samples: the interval is a couple of values, claim nothing.
    enough = min(len(num), len(den)) >= MIN_SAMPLES_FLOOR
    return Ratio(mn / md, lo, hi, enough and (lo > 1.0 or hi < 1.0))


# ---------------------------------------------------------------------------------------------
# Timing (clock and sync injected)


@dataclass(frozen=True)
class Task:
    """One implementation in one phase.

    `setup(k)` prepares k calls outside the timed region (e.g. builds k graphs for backward) and
    returns a state; `run(state)` makes the k calls and is the only thing timed.
    """

    setup: Callable[[int], Any]
    run: Callable[[Any], None]


def time_block(task: Task, number: int, clock: Clock, sync: Sync) -> float:
    """Seconds per call of one block of `number` calls (setup untimed, sync on both sides)."""
    state = task.setup(number)
    sync()
    start = clock()
    task.run(state)
    sync()
    elapsed = clock() - start
    del state
    return elapsed / number


def block_size(seconds_per_call: float) -> int:
    """Calls per sample so that a sample lasts at least BLOCK_TIME."""
    if seconds_per_call <= 0:
        return MAX_BLOCK
    return max(1, min(MAX_BLOCK, math.ceil(BLOCK_TIME / seconds_per_call)))


def graph_block_cap(bytes_per_call: int) -> int:
    """The most calls a backward-phase block may hold (MAX_BLOCK_BYTES of graphs and inputs)."""
    return max(1, min(MAX_BLOCK, MAX_BLOCK_BYTES // max(bytes_per_call, 1)))


def warm_up(task: Task, clock: Clock, sync: Sync,
            warmup_time: float = DEFAULT_WARMUP_TIME) -> tuple[float, int]:
    """Time the first call on its own, warm up, and pick a block size: (first_call_s, number)."""
    first = time_block(task, 1, clock, sync)
    spent, last, calls = 0.0, first, 0
    while spent < warmup_time or calls < WARMUP_MIN_CALLS:
        last = time_block(task, 1, clock, sync)
        spent += max(last, 1e-9)  # a clock that does not move must not loop forever
        calls += 1
    return first, block_size(last)


def sample_interleaved(tasks: Sequence[Task], numbers: Sequence[int], *,
                       min_time: float = DEFAULT_MIN_TIME,
                       min_samples: int = DEFAULT_MIN_SAMPLES,
                       max_time: float = DEFAULT_MAX_TIME,
                       clock: Clock = time.perf_counter, sync: Sync = lambda: None,
                       max_samples: int = MAX_SAMPLES) -> list[list[float]]:
    """Sample the tasks alternately (A B A B ...) until the stopping rule holds for all.

    Each sample is seconds per call of a block of `numbers[i]` calls.  Stops when every task has
    min_samples samples and min_time measured, or (max_time > 0) when one task has spent
    max_time and every task has MIN_SAMPLES_FLOOR samples, or at max_samples.
    """
    samples: list[list[float]] = [[] for _ in tasks]
    spent = [0.0] * len(tasks)
    while True:
        for i, task in enumerate(tasks):
            s = time_block(task, numbers[i], clock, sync)
            samples[i].append(s)
            spent[i] += s * numbers[i]
        n = len(samples[0])
        if n >= max_samples:
            break
        if n >= min_samples and min(spent) >= min_time:
            break
        if max_time > 0 and n >= MIN_SAMPLES_FLOOR and max(spent) >= max_time:
            break
    return samples


# ---------------------------------------------------------------------------------------------
# Memory


def saved_bytes(call: Callable[[], Any]) -> int:
    """Bytes autograd saves for backward while `call()` runs, each storage counted once.

    Counted through saved_tensors_hooks, so it sees ctx.save_for_backward and the tensors
    built-in ops save; tensors stashed as plain ctx attributes are invisible to it.  A saved view
    counts its whole storage; two saved views of one storage count it once.
    """
    storages: dict[tuple[str, int], int] = {}

    def pack(t: Tensor) -> Tensor:
        try:
            st = t.untyped_storage()
            # Keyed by address: every saved tensor stays alive until the count is done, so an
            # address cannot be reused by another storage meanwhile.
            storages[(str(t.device), st.data_ptr())] = st.nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse)
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.enable_grad():
        out = call()
    del out
    return sum(storages.values())


def cuda_peak(task: Task, device: str, sync: Sync) -> int:
    """Peak CUDA memory allocated by one call beyond what was allocated before it (setup done)."""
    state = task.setup(1)
    sync()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    task.run(state)
    sync()
    peak = torch.cuda.max_memory_allocated(device) - base
    del state
    return int(peak)


# ---------------------------------------------------------------------------------------------
# The four phases of one implementation


def input_bytes(inputs: Inputs) -> int:
    """Bytes of the tensors among the inputs (each storage once)."""
    tensors = [t for t in (*inputs.args, *inputs.kwargs.values()) if isinstance(t, Tensor)]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in tensors}.values())


def _grad_leaves(inputs: Inputs) -> list[Tensor]:
    tensors = [*inputs.args, *inputs.kwargs.values()]
    return [t for t in tensors if isinstance(t, Tensor) and t.requires_grad]


def differentiable_outputs(out: Any) -> list[Tensor]:
    """The floating outputs that require grad (what backward starts from)."""
    return [t for t in flat_outputs(out) if t.requires_grad]


class Impl:
    """One implementation on one case's inputs: builds the Task of each phase.

    Backward phases need fresh leaves for every call of a block (so .grad is written, not
    accumulated): the case's own inputs serve the first call, copies made once serve the rest,
    and every .grad is reset to None in the (untimed) setup.
    """

    def __init__(self, fn: Callable[..., Any], inputs: Inputs, grad_seed: int):
        self.fn = fn
        self.pool = [inputs]
        self.grad_seed = grad_seed
        self._grads: list[Tensor] | None = None

    def call(self, inputs: Inputs | None = None) -> Any:
        inputs = inputs or self.pool[0]
        return self.fn(*inputs.args, **inputs.kwargs)

    def grad_outputs(self, outs: Sequence[Tensor]) -> list[Tensor]:
        """A fixed random grad_output per differentiable output (seeded, drawn once)."""
        if self._grads is None:
            gen = torch.Generator().manual_seed(self.grad_seed)
            self._grads = [torch.randn(o.shape, generator=gen, dtype=torch.float64)
                           .to(dtype=o.dtype, device=o.device) for o in outs]
        return self._grads

    def _fresh(self, k: int) -> list[Inputs]:
        while len(self.pool) < k:
            self.pool.append(self.pool[0].clone())
        for inputs in self.pool[:k]:
            for t in _grad_leaves(inputs):
                t.grad = None
        return self.pool[:k]

    def _graph(self, inputs: Inputs) -> tuple[list[Tensor], list[Tensor]]:
        with torch.enable_grad():
            outs = differentiable_outputs(self.call(inputs))
        if not outs:
            raise BenchError("no output requires grad: nothing to run backward from")
        return outs, self.grad_outputs(outs)

    def task(self, phase: str) -> Task:
        """The Task that times `phase`; each call's result is released inside the timed region,
        as torch.utils.benchmark.Timer does."""
        if phase in ("forward", "forward_grad"):
            grad = phase == "forward_grad"

            def run_forward(k: int) -> None:
                with torch.set_grad_enabled(grad):
                    for _ in range(k):
                        self.call()
            return Task(setup=lambda k: k, run=run_forward)
        if phase == "backward":
            def setup_backward(k: int) -> list[tuple[list[Tensor], list[Tensor]]]:
                return [self._graph(inputs) for inputs in self._fresh(k)]

            def run_backward(graphs: list[tuple[list[Tensor], list[Tensor]]]) -> None:
                for outs, grads in graphs:
                    torch.autograd.backward(outs, grads)
            return Task(setup=setup_backward, run=run_backward)
        if phase == "forward_backward":
            if self._grads is None:  # the grad_outputs' shapes come from one untimed call
                self._graph(self.pool[0])

            def run_forward_backward(pool: list[Inputs]) -> None:
                with torch.enable_grad():
                    for inputs in pool:
                        outs = differentiable_outputs(self.call(inputs))
                        torch.autograd.backward(outs, self.grad_outputs(outs))
            return Task(setup=self._fresh, run=run_forward_backward)
        raise ValueError(f"unknown phase {phase!r}")


# ---------------------------------------------------------------------------------------------
# Rows, options and the run


@dataclass
class BenchRow:
    """One implementation in one phase of one case, dtype and device."""

    op: str
    case: str
    dtype: str
    device: str
    impl: str
    phase: str
    status: str = OK
    median_s: float | None = None
    iqr_s: float | None = None
    min_s: float | None = None
    n: int = 0
    #: calls per sample (a sample is the mean of a block of calls).
    number: int = 1
    noisy: bool = False
    #: on custom rows: reference median / custom median (> 1: the custom Function is faster).
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    #: the speedup's interval excludes 1.
    significant: bool | None = None
    saved_bytes: int | None = None
    #: CUDA only: peak allocated by one call beyond what was allocated before it.
    peak_mem_bytes: int | None = None
    first_call_s: float | None = None
    note: str = ""
    #: seconds per call, in the order taken (JSON only).
    samples_s: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.op, self.case, self.dtype, self.device, self.impl, self.phase)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchReport:
    """All rows of a bench run, its settings and the environment it ran in."""

    rows: list[BenchRow] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    #: Ctrl-C stopped the run: the rows measured so far are all there is.
    interrupted: bool = False

    @property
    def errors(self) -> list[BenchRow]:
        return [r for r in self.rows if r.status == ERROR]

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame: COLUMNS, then the environment columns."""
        import pandas as pd

        frame = pd.DataFrame.from_records([{c: getattr(r, c) for c in COLUMNS}
                                           for r in self.rows], columns=list(COLUMNS))
        for k, v in self.env.items():
            frame[k] = v
        return frame


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


def iter_bench_case(op: OpDef, case: Case, dtype: str, device: str, options: BenchOptions, *,
                    clock: Clock = time.perf_counter, sync: Sync | None = None
                    ) -> Iterator[list[BenchRow]]:
    """bench_case, one phase's rows at a time (so an interrupted run keeps finished phases)."""
    sync = sync or default_sync(device)
    names = [CUSTOM] if op.reference is None else [CUSTOM, REFERENCE]
    fns = {CUSTOM: op.function, REFERENCE: op.reference}

    def row(impl: str, phase: str, **kw: Any) -> BenchRow:
        return BenchRow(op.name, case.name, dtype, device, impl, phase, **kw)

    skip = ""
    if device.startswith("cuda") and not torch.cuda.is_available():
        skip = "CUDA is not available"
    elif device.split(":")[0] not in op.devices:
        skip = f"{op.name} does not run on {device}"
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
    saved: dict[str, int | None] = {}
    for phase in options.phases:
        yield _bench_phase(impls, phase, device, options, clock, sync, saved, row)


def _bench_phase(impls: Mapping[str, Impl], phase: str, device: str, options: BenchOptions,
                 clock: Clock, sync: Sync, saved: dict[str, int | None],
                 row: Callable[..., BenchRow]) -> list[BenchRow]:
    """Warm up, measure memory, sample alternately and summarise one phase."""
    rows = {name: row(name, phase) for name in impls}
    live: dict[str, tuple[Task, int]] = {}
    for name, impl in impls.items():
        r = rows[name]
        try:
            task = impl.task(phase)
            r.first_call_s, number = warm_up(task, clock, sync, options.warmup_time)
            if phase == "forward":
                r.saved_bytes = 0  # nothing is saved under no_grad
            else:
                if name not in saved:  # one forward with grad tells all three grad phases
                    saved[name] = saved_bytes(impl.call)
                r.saved_bytes = saved[name]
            if phase in ("backward", "forward_backward"):
                number = min(number, graph_block_cap((r.saved_bytes or 0)
                                                     + input_bytes(impl.pool[0])))
            if device.startswith("cuda"):
                r.peak_mem_bytes = cuda_peak(task, device, sync)
            live[name] = (task, number)
        except Exception as exc:
            r.status, r.note = ERROR, _first_line(exc)
            _release(device)
    if live:
        try:
            samples = sample_interleaved([t for t, _ in live.values()],
                                         [n for _, n in live.values()],
                                         min_time=options.min_time,
                                         min_samples=options.min_samples,
                                         max_time=options.max_time, clock=clock, sync=sync)
        except Exception as exc:
            # Which implementation raised is not known here: both rows carry the error.
            for name in live:
                rows[name].status, rows[name].note = ERROR, f"while sampling: {_first_line(exc)}"
            _release(device)
        else:
            for (name, (_, number)), s in zip(live.items(), samples, strict=True):
                r, st = rows[name], summarize(s)
                r.median_s, r.iqr_s, r.min_s, r.n = st.median, st.iqr, st.min, st.n
                r.number, r.noisy, r.samples_s = number, st.noisy, list(s)
                if st.n < options.min_samples:
                    r.note = f"only {st.n} samples (--max-time {options.max_time:g} s reached)"
    _speedup(rows, options)
    return list(rows.values())


def _speedup(rows: Mapping[str, BenchRow], options: BenchOptions) -> None:
    """Set the custom row's speedup (reference / custom medians) and its paired interval."""
    c, r = rows.get(CUSTOM), rows.get(REFERENCE)
    if c is None or r is None or c.status != OK or r.status != OK:
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
             min_samples_floor=MIN_SAMPLES_FLOOR)
    return d


# ---------------------------------------------------------------------------------------------
# Comparing two runs


@dataclass
class CompareRow:
    """One row present in either run: medians, change and whether it is a regression."""

    op: str
    case: str
    dtype: str
    device: str
    impl: str
    phase: str
    old_median_s: float | None = None
    new_median_s: float | None = None
    #: (new / old - 1) * 100: positive is slower.
    change_pct: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    #: the interval of new / old excludes 1.
    significant: bool = False
    #: significant and slower by more than the threshold.
    regression: bool = False
    note: str = ""


def compare(old: BenchReport, new: BenchReport, threshold: float = DEFAULT_THRESHOLD, *,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[CompareRow]:
    """Match rows by (op, case, dtype, device, impl, phase) and judge each change.

    A regression is a slowdown beyond `threshold` percent whose bootstrap interval of the
    new / old median ratio (each run resampled on its own) excludes 1.
    """
    old_rows = {r.key: r for r in old.rows}
    new_rows = {r.key: r for r in new.rows}
    keys = list(old_rows) + [k for k in new_rows if k not in old_rows]
    out = []
    for key in keys:
        c = CompareRow(*key)
        o, n = old_rows.get(key), new_rows.get(key)
        if o is None or n is None:
            c.note = "only in new" if o is None else "only in old"
            c.old_median_s = o.median_s if o else None
            c.new_median_s = n.median_s if n else None
            out.append(c)
            continue
        c.old_median_s, c.new_median_s = o.median_s, n.median_s
        if o.status != OK or n.status != OK or not o.samples_s or not n.samples_s:
            c.note = f"not comparable (old {o.status}, new {n.status})"
            out.append(c)
            continue
        ratio = median_ratio(n.samples_s, o.samples_s, paired=False, resamples=resamples,
                             seed=seed)
        if ratio is None:
            c.note = "a median is zero"
            out.append(c)
            continue
        c.change_pct = (ratio.value - 1.0) * 100
        c.ratio_low, c.ratio_high, c.significant = ratio.low, ratio.high, ratio.significant
        c.regression = ratio.significant and c.change_pct > threshold
        if ratio.significant and c.change_pct < -threshold:
            c.note = "faster"
        elif c.regression:
            c.note = "REGRESSION"
        elif not ratio.significant:
            c.note = "no significant difference"
        out.append(c)
    return out


#: Environment fields that make two runs' timings incomparable when they differ.
ENV_KEYS = ("torch_version", "cuda_version", "cudnn_version", "device_name", "num_threads",
            "cudnn_benchmark", "cudnn_deterministic", "tf32_matmul", "tf32_cudnn",
            "float32_matmul_precision")


def env_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for the ENV_KEYS that differ between two runs."""
    return [(k, old.get(k), new.get(k)) for k in ENV_KEYS if old.get(k) != new.get(k)]


__all__ = ["PHASES", "BenchOptions", "BenchReport", "BenchRow", "CompareRow", "bench_case",
           "bootstrap_ratio", "compare", "run", "sample_interleaved", "saved_bytes",
           "summarize"]

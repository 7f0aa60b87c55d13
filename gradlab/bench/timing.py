"""Timing of blocks of calls and the alternating sampler (the clock and the sync are injected).

Tests drive everything here with a fake clock; nothing here imports torch.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gradlab.bench.stats import MIN_SAMPLES_FLOOR

Clock = Callable[[], float]
Sync = Callable[[], None]

#: Per phase and implementation (on average over a case's, when sampled together), sampling
#: goes on until this much time was measured...
DEFAULT_MIN_TIME = 0.2
#: ...and at least this many samples were taken (enough for a median and quartiles that mean
#: something, and for a bootstrap interval that is not just the extreme values).
DEFAULT_MIN_SAMPLES = 10
#: Except: once one implementation has spent this long in a phase, sampling stops as soon as
#: MIN_SAMPLES_FLOOR samples are in.  Without it a 1 s-per-call reference (modconv's) costs
#: minutes per case; such rows are marked in their note.  0 turns the cap off.
DEFAULT_MAX_TIME = 1.0
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
                       max_samples: int = MAX_SAMPLES,
                       order_seed: int | None = None,
                       into: list[list[float]] | None = None,
                       pooled: bool = False) -> list[list[float]]:
    """Sample the tasks in rounds, one sample of each a round, until the stopping rule holds.

    Each sample is seconds per call of a block of `numbers[i]` calls; samples[i][k] is task i's
    sample of round k, so the samples of a round pair up.  order_seed: each round's order is
    shuffled by a random.Random(order_seed) (None: always A B).  A fixed order can lock into step
    with another job's time slices: on a shared core, a 4 ms preemption landed in the first
    sample of most rounds and read the custom Function 1.9x slower than its equal reference.
    Stops when every task has min_samples samples and min_time measured, or (max_time > 0)
    when one task has spent max_time and every task has MIN_SAMPLES_FLOOR samples, or at
    max_samples.  into: the lists to append to (the caller keeps what an interrupt cut off).
    pooled: min_time is what the tasks measured on average, not each (the phases of a case
    sampled as one measurement: the cheapest phase must not make every other run on until it
    has measured min_time too).
    """
    samples: list[list[float]] = into if into is not None else [[] for _ in tasks]
    spent = [0.0] * len(tasks)
    order = list(range(len(tasks)))
    rng = random.Random(order_seed) if order_seed is not None else None
    while True:
        if rng is not None:
            rng.shuffle(order)
        for i in order:
            task = tasks[i]
            s = time_block(task, numbers[i], clock, sync)
            samples[i].append(s)
            spent[i] += s * numbers[i]
        n = len(samples[0])
        if n >= max_samples:
            break
        if n >= min_samples and (sum(spent) / len(spent) if pooled else min(spent)) >= min_time:
            break
        if max_time > 0 and n >= MIN_SAMPLES_FLOOR and max(spent) >= max_time:
            break
    return samples

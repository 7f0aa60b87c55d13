"""The settings of a bench run (plain data; gradlab.bench.runner reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from gradlab.bench.impl import PHASES
from gradlab.bench.stats import BOOTSTRAP_RESAMPLES
from gradlab.bench.timing import (
    DEFAULT_MAX_TIME,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_MIN_TIME,
    DEFAULT_WARMUP_TIME,
)


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
    #: fix the allocator's thresholds for the process first (gradlab.bench.heap): freed memory
    #: is kept for reuse, so a call's page faults do not depend on the calls before it.
    steady_heap: bool = True

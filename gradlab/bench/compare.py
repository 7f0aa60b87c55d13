"""Comparing two bench runs row by row, and the environment fields that make them incomparable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gradlab.bench.stats import BOOTSTRAP_RESAMPLES, median_ratio
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.status import PASS

#: Default regression threshold of `compare`, in percent.
DEFAULT_THRESHOLD = 5.0

#: Environment fields that make two runs' timings incomparable when they differ.
ENV_KEYS = ("torch_version", "cuda_version", "cudnn_version", "device_name", "num_threads",
            "cudnn_benchmark", "cudnn_deterministic", "tf32_matmul", "tf32_cudnn",
            "float32_matmul_precision")


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
    return [_compare_row(CompareRow(*key), old_rows.get(key), new_rows.get(key), threshold,
                         resamples, seed) for key in keys]


def _compare_row(c: CompareRow, o: BenchRow | None, n: BenchRow | None, threshold: float,
                 resamples: int, seed: int) -> CompareRow:
    """Fill `c` from the old and new row of one key (either may be missing)."""
    if o is None or n is None:
        c.note = "only in new" if o is None else "only in old"
        c.old_median_s = o.median_s if o else None
        c.new_median_s = n.median_s if n else None
        return c
    c.old_median_s, c.new_median_s = o.median_s, n.median_s
    if o.status != PASS or n.status != PASS or not o.samples_s or not n.samples_s:
        c.note = f"not comparable (old {o.status}, new {n.status})"
        return c
    ratio = median_ratio(n.samples_s, o.samples_s, paired=False, resamples=resamples, seed=seed)
    if ratio is None:
        c.note = "a median is zero"
        return c
    c.change_pct = (ratio.value - 1.0) * 100
    c.ratio_low, c.ratio_high, c.significant = ratio.low, ratio.high, ratio.significant
    c.regression = ratio.significant and c.change_pct > threshold
    if ratio.significant and c.change_pct < -threshold:
        c.note = "faster"
    elif c.regression:
        c.note = "REGRESSION"
    elif not ratio.significant:
        c.note = "no significant difference"
    return c


def env_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for the ENV_KEYS that differ between two runs."""
    return [(k, old.get(k), new.get(k)) for k in ENV_KEYS if old.get(k) != new.get(k)]

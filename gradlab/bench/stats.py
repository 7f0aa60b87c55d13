"""Statistics of timing samples: pure functions of the numbers (no torch, no clock)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The fewest samples a phase ever stops at: a median of 3 still ignores one outlier.
MIN_SAMPLES_FLOOR = 3
#: A row is `noisy` when IQR / median exceeds this: beyond 10% the median itself moves by a few
#: percent between runs, more than the differences a benchmark is usually asked to resolve.
NOISY_IQR_RATIO = 0.10
#: Bootstrap resamples and confidence level of the speedup (and compare) intervals: 2000
#: resamples put the 2.5% / 97.5% percentiles within about 1% of their limit.
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
#: The fewest samples (rounds) a bootstrap interval is given for.  A median's bootstrap can only
#: land on the samples themselves: with 3 samples its "95%" interval is nearly the range of the
#: three (a 1-in-4 chance, per side, that the true median lies beyond it), and up to about 10 the
#: 2.5% and 97.5% resampled medians are still the extreme values.  Below this, the numbers are
#: shown with their count (`n=3`) and no interval, and no difference is called significant.
MIN_INTERVAL_SAMPLES = 10


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

    paired: resample the same positions of both (samples taken in rounds, one of each, pair up
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


def too_few(*samples: Sequence[float]) -> int | None:
    """The smallest sample count when one is below MIN_INTERVAL_SAMPLES (no interval), else
    None."""
    n = min(len(s) for s in samples)
    return n if n < MIN_INTERVAL_SAMPLES else None


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its bootstrap interval (None, None under MIN_INTERVAL_SAMPLES:
    `n` then says how few); significant when the interval excludes 1."""

    value: float
    low: float | None
    high: float | None
    significant: bool
    n: int = 0


def median_ratio(num: Sequence[float], den: Sequence[float], *, paired: bool,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Ratio | None:
    """median(num) / median(den) with its interval; None when a median is not positive."""
    mn, md = summarize(num).median, summarize(den).median
    if not (mn > 0 and md > 0):
        return None
    n = min(len(num), len(den))
    if too_few(num, den) is not None:
        return Ratio(mn / md, None, None, False, n)
    lo, hi = bootstrap_ratio(num, den, paired=paired, resamples=resamples, seed=seed)
    return Ratio(mn / md, lo, hi, lo > 1.0 or hi < 1.0, n)


#: A phase that is part of another (backward of forward_backward) may read up to this much above
#: the whole before it counts as a contradiction: an op whose forward is negligible has backward
#: and forward_backward medians a few percent apart either way.  The same 10% as NOISY_IQR_RATIO.
CONTRADICTION_SLACK = 0.10


def exceeds_whole(part_median: float, whole_median: float) -> bool:
    """A part of a measurement (backward) slower than the whole (forward_backward) beyond
    CONTRADICTION_SLACK: impossible without a burst of load in the part's samples."""
    return part_median > whole_median * (1.0 + CONTRADICTION_SLACK)


#: The gate's ratio compares this quantile of each implementation's samples.  Noise on a shared
#: machine only adds time (another job's time slice, a page fault), so the low tail is the
#: code's own cost.  With one thread on a 2-core machine also running two other jobs, one
#: sample of most rounds took a 4 ms time slice: the median of per-round ratios then read 1.9
#: or 0.53 by chance while the 10th percentiles held.  Share of phases whose ratio moved more
#: than 10% between consecutive same-code benches (three sets of 12-25 benches): 10th
#: percentile 0-3%, median of per-round ratios 0-15%, ratio of medians 5-30%, minimum 2-18%
#: (the minimum is one lucky sample).
GATE_QUANTILE = 0.10


def low_ratio(num: Sequence[float], den: Sequence[float]) -> float | None:
    """The GATE_QUANTILE of num over that of den, for samples taken in rounds (num[i] and den[i]
    in round i); None when they do not pair (lengths differ, none, or a sample not positive).

    >>> low_ratio([2.0, 2.0, 9.0], [1.0, 5.0, 1.0])
    2.0
    """
    if not num or len(num) != len(den) or min(*num, *den) <= 0:
        return None
    return quantile(sorted(num), GATE_QUANTILE) / quantile(sorted(den), GATE_QUANTILE)


@dataclass(frozen=True)
class RatioChange:
    """A ratio (custom / reference, low_ratio) in two runs: old, new, new / old, its interval."""

    old: float
    new: float
    value: float
    #: None under MIN_INTERVAL_SAMPLES rounds in either run (`n` says how few).
    low: float | None
    high: float | None
    #: the interval excludes 1.
    significant: bool
    n: int = 0


def ratio_change(old: tuple[Sequence[float], Sequence[float]],
                 new: tuple[Sequence[float], Sequence[float]], *,
                 resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE,
                 seed: int = 0) -> RatioChange | None:
    """low_ratio(*new) / low_ratio(*old) with a percentile bootstrap interval.

    Each run's rounds are resampled on their own (the runs are independent; the two samples of
    a round stay together, so the drift they share cancels), so the interval carries both runs'
    scatter.  None when a run's samples do not pair.
    """
    import numpy as np

    r_old, r_new = low_ratio(*old), low_ratio(*new)
    if r_old is None or r_new is None:
        return None
    n = min(len(old[0]), len(new[0]))
    if too_few(old[0], new[0]) is not None:
        return RatioChange(r_old, r_new, r_new / r_old, None, None, False, n)
    rng = np.random.default_rng(seed)
    ratios = [_resampled_low_ratios(np.asarray(num, dtype=np.float64),
                                    np.asarray(den, dtype=np.float64), resamples, rng)
              for num, den in (old, new)]
    tail = (1.0 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios[1] / ratios[0], [tail, 100 - tail])
    return RatioChange(r_old, r_new, r_new / r_old, float(lo), float(hi),
                       bool(lo > 1.0 or hi < 1.0), n)


def _resampled_low_ratios(num: Any, den: Any, resamples: int, rng: Any) -> Any:
    """low_ratio of `resamples` bootstrap resamples of the rounds (both arrays indexed alike)."""
    import numpy as np

    chunk = max(1, 4_000_000 // max(len(num), 1))  # bounds the index matrix, as above
    out = []
    for start in range(0, resamples, chunk):
        idx = rng.integers(0, len(num), size=(min(chunk, resamples - start), len(num)))
        out.append(np.quantile(num[idx], GATE_QUANTILE, axis=1)
                   / np.quantile(den[idx], GATE_QUANTILE, axis=1))
    return np.concatenate(out)


def outside_range(value: float, bounds: Sequence[float]) -> float | None:
    """How many times `value` lies above max(bounds) or below min(bounds), when beyond
    CONTRADICTION_SLACK; None when inside (a ratio of sums lies between the parts' ratios).

    >>> outside_range(1.5, [1.0, 1.2]), outside_range(1.25, [1.0, 1.2])
    (1.25, None)
    """
    lo, hi = min(bounds), max(bounds)
    if value > hi * (1.0 + CONTRADICTION_SLACK):
        return value / hi
    if value * (1.0 + CONTRADICTION_SLACK) < lo:
        return lo / value
    return None

"""Comparing two bench runs phase by phase, and the environment fields that make them incomparable.

The gate is the custom/reference ratio, not the absolute median.  Within one run the custom
Function and its reference are sampled in rounds (one sample of each, in random order), so load
from other jobs hits both alike and their ratio (of low quantiles, stats.low_ratio) holds, while
absolute medians of two runs minutes apart differ by several times on a shared machine.  The
absolute medians are still shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gradlab.bench.stats import BOOTSTRAP_RESAMPLES, median_ratio, ratio_change
from gradlab.results.bench import PARTS, WHOLE, BenchReport, BenchRow
from gradlab.results.status import PASS

#: Default regression threshold of `compare`, in percent of the custom/reference ratio.
#: Measured with benchmarks/bench_gate.py on a 2-core machine shared with other jobs (exp,
#: 2048x2048 float32, one thread, --min-time 0.2), four runs of 10 same-code pairs and 10 pairs
#: whose custom Function was 20% slower, one run beside the whole test suite: same-code phases
#: moved -6.8% to +8.7% (all but one within +-7%); slowed phases +12% to +32% (one +7%),
#: median +20%, and every slowed pair had a significant phase of +19% or more.  10% sits
#: between the two; 5% would sit inside the same-code scatter, 15% would miss a 20% slowdown
#: of one phase read as +12-15%.
DEFAULT_THRESHOLD = 10.0

#: Environment fields that make two runs' timings incomparable when they differ.
ENV_KEYS = ("torch_version", "cuda_version", "cudnn_version", "device_name", "num_threads",
            "cudnn_benchmark", "cudnn_deterministic", "tf32_matmul", "tf32_cudnn",
            "float32_matmul_precision")

#: CompareRow.basis: the custom/reference ratio (the gate), or the custom median alone (an op
#: without a reference, or samples that do not pair).
RATIO, ABSOLUTE = "ratio", "absolute"


@dataclass
class CompareRow:
    """One phase of one op, case, dtype and device: the gate's ratio change and the medians."""

    op: str
    case: str
    dtype: str
    device: str
    phase: str
    basis: str = RATIO
    old_custom_s: float | None = None
    new_custom_s: float | None = None
    old_reference_s: float | None = None
    new_reference_s: float | None = None
    #: custom / reference in each run (their 10th percentiles: stats.low_ratio).
    old_ratio: float | None = None
    new_ratio: float | None = None
    #: (new ratio / old ratio - 1) * 100 (basis absolute: new / old custom median): + is slower.
    change_pct: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    #: the interval of the change excludes 1.
    significant: bool = False
    #: significant and slower by more than the threshold.
    regression: bool = False
    note: str = ""

    @property
    def absolute_change_pct(self) -> float | None:
        """How the custom median moved, in percent (shown, never gated on)."""
        if not self.old_custom_s or self.new_custom_s is None:
            return None
        return (self.new_custom_s / self.old_custom_s - 1.0) * 100


_Key = tuple[str, str, str, str, str]


def _by_phase(report: BenchReport) -> dict[_Key, dict[str, BenchRow]]:
    """{(op, case, dtype, device, phase): {impl: row}} in the report's order."""
    out: dict[_Key, dict[str, BenchRow]] = {}
    for r in report.rows:
        out.setdefault((r.op, r.case, r.dtype, r.device, r.phase), {})[r.impl] = r
    return out


def compare(old: BenchReport, new: BenchReport, threshold: float = DEFAULT_THRESHOLD, *,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[CompareRow]:
    """Match phases by (op, case, dtype, device, phase) and judge each change.

    A regression is a rise of the custom/reference ratio beyond `threshold` percent whose
    bootstrap interval (each run's rounds resampled on their own) excludes 1.  Without a
    reference the custom medians are compared instead (each run resampled on its own).
    """
    old_rows, new_rows = _by_phase(old), _by_phase(new)
    keys = list(old_rows) + [k for k in new_rows if k not in old_rows]
    rows = [_compare_phase(CompareRow(*key), old_rows.get(key, {}), new_rows.get(key, {}),
                           threshold, resamples, seed) for key in keys]
    _note_unfollowed(rows)
    return rows


#: A part that rose by x% makes its whole rise by about x% times its share of the whole.  A
#: part's regression whose whole rose, at the top of its 95% interval, by less than this
#: fraction of that is not judged: a burst of load in the part's samples, not the code.
FOLLOW_FRACTION = 0.5
#: What a part's regression says when the whole did not move with it.
UNFOLLOWED = ("forward_backward did not follow ({:+.1f}%): a burst of load?  bench again to "
              "confirm")
CONTRADICTED = ("not judged: forward_backward did not follow (read {:+.1f}%, at most {:+.1f}%; "
                "a real {:+.1f}% here raises it {:+.1f}%): a burst of load?  bench again")


def _note_unfollowed(rows: Sequence[CompareRow]) -> None:
    """A part's regression that its case's forward_backward did not follow.

    A slower part makes the whole slower by its share, while a burst of other load hits one
    phase's samples only.  When the whole's interval excludes even FOLLOW_FRACTION of the rise
    the part implies, the part is not judged (its note says why); when the whole merely did not
    rise significantly, the verdict stands with a note, since a small part's real slowdown can
    hide in the whole's scatter."""
    wholes = {(c.op, c.case, c.dtype, c.device): c for c in rows if c.phase == WHOLE}
    for c in rows:
        whole = wholes.get((c.op, c.case, c.dtype, c.device))
        if (not c.regression or c.phase == WHOLE or whole is None or whole.change_pct is None
                or c.change_pct is None):
            continue
        implied = _implied_rise(c, whole)
        if (c.phase in PARTS and implied is not None and whole.ratio_high is not None
                and (whole.ratio_high - 1.0) * 100 < FOLLOW_FRACTION * implied):
            c.regression = False
            rest = [n for n in c.note.split("; ") if n and n != "REGRESSION"]
            c.note = "; ".join([CONTRADICTED.format(whole.change_pct,
                                                    (whole.ratio_high - 1.0) * 100,
                                                    c.change_pct, implied), *rest])
        elif not (whole.significant and whole.change_pct > 0):
            c.note = "; ".join([c.note, UNFOLLOWED.format(whole.change_pct)])


def _implied_rise(part: CompareRow, whole: CompareRow) -> float | None:
    """How many percent the whole rises when the part rises by part.change_pct: that times the
    part's share of the whole (old custom medians, at most 1)."""
    if part.change_pct is None or not part.old_custom_s or not whole.old_custom_s:
        return None
    return part.change_pct * min(1.0, part.old_custom_s / whole.old_custom_s)


def _custom(rows: Mapping[str, BenchRow]) -> BenchRow | None:
    return rows.get("custom")


def _usable(r: BenchRow | None) -> bool:
    return r is not None and r.status == PASS and bool(r.samples_s)


def _compare_phase(c: CompareRow, o: Mapping[str, BenchRow], n: Mapping[str, BenchRow],
                   threshold: float, resamples: int, seed: int) -> CompareRow:
    """Fill `c` from the old and new rows (custom and reference) of one phase."""
    oc, nc, oref, nref = _custom(o), _custom(n), o.get("reference"), n.get("reference")
    c.old_custom_s, c.new_custom_s = (oc.median_s if oc else None), (nc.median_s if nc else None)
    c.old_reference_s = oref.median_s if oref else None
    c.new_reference_s = nref.median_s if nref else None
    if oc is None or nc is None:
        c.note = "only in new" if oc is None else "only in old"
        return c
    if not (_usable(oc) and _usable(nc)):
        c.note = f"not comparable (old {oc.status}, new {nc.status})"
        return c
    change = None
    if oref is not None and nref is not None and _usable(oref) and _usable(nref):
        change = ratio_change((oc.samples_s, oref.samples_s), (nc.samples_s, nref.samples_s),
                              resamples=resamples, seed=seed)
    if change is not None:
        c.old_ratio, c.new_ratio = change.old, change.new
        value, low, high, significant = change.value, change.low, change.high, change.significant
        rounds = change.n
    else:
        ratio = median_ratio(nc.samples_s, oc.samples_s, paired=False, resamples=resamples,
                             seed=seed)
        if ratio is None:
            c.note = "a median is zero"
            return c
        c.basis = ABSOLUTE
        value, low, high, significant = ratio.value, ratio.low, ratio.high, ratio.significant
        rounds = ratio.n
    c.change_pct = (value - 1.0) * 100
    c.ratio_low, c.ratio_high, c.significant = low, high, significant
    # A phase that still contradicted its run's other phases after resampling is shown, not
    # judged: its numbers are a burst of load, not the code.
    unsettled = [name for name, rows in (("old", o), ("new", n))
                 if any(r.contradicted for r in rows.values())]
    c.regression = significant and c.change_pct > threshold and not unsettled
    verdict = (f"not judged: contradicts the other phases of the {' and '.join(unsettled)} run"
               if unsettled else _verdict(c, threshold) if low is not None else
               f"not judged: n={rounds}, too few samples for a confidence interval")
    c.note = "; ".join(filter(None, [verdict, _basis_note(c, oref, nref),
                                     _resampled_note(o, n)]))
    return c


def _verdict(c: CompareRow, threshold: float) -> str:
    if c.regression:
        return "REGRESSION"
    if c.significant and c.change_pct is not None and c.change_pct < -threshold:
        return "faster"
    return "" if c.significant else "no significant difference"


def _basis_note(c: CompareRow, oref: BenchRow | None, nref: BenchRow | None) -> str:
    if c.basis == RATIO:
        return ""
    if oref is None and nref is None:
        return "no reference: custom medians compared"
    return "reference not usable: custom medians compared"


def _resampled_note(o: Mapping[str, BenchRow], n: Mapping[str, BenchRow]) -> str:
    """Which run resampled this phase because it contradicted forward_backward."""
    runs = [name for name, rows in (("old", o), ("new", n))
            if any(r.resampled for r in rows.values())]
    return f"resampled in {' and '.join(runs)} run" if runs else ""


def regressions(rows: Sequence[CompareRow]) -> list[CompareRow]:
    """The rows that fail the gate."""
    return [c for c in rows if c.regression]


def env_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for the ENV_KEYS that differ between two runs."""
    return [(k, old.get(k), new.get(k)) for k in ENV_KEYS if old.get(k) != new.get(k)]

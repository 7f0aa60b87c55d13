"""The compare gate (custom/reference ratio of samples taken in rounds, old run against new) and
the resampling of a phase that contradicts forward_backward: fake samples and fake clocks only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from gradlab.bench import BenchOptions, bench_case, compare, regressions
from gradlab.bench.compare import ABSOLUTE, DEFAULT_THRESHOLD, RATIO
from gradlab.bench.runner import CUSTOM, MAX_RESAMPLES, REFERENCE
from gradlab.bench.stats import low_ratio, outside_range, ratio_change, summarize
from gradlab.bench.timing import WARMUP_MIN_CALLS
from gradlab.cli import app
from gradlab.model import Case, OpDef, TensorArg
from gradlab.render.benchfile import VERSION, read_bench_json, write_bench_reports
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.status import PASS

runner = CliRunner()

#: Per-round scatter of a quiet machine: custom and reference of a round move together.
WOBBLE = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0, 1.01, 0.99, 1.02, 0.98]
#: Jitter between the two samples of a round (what pairing cannot cancel).
JITTER = [1.0, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0, 1.01, 0.99]


def run_of(custom: list[float], reference: list[float], phase: str = "forward",
           resampled: int = 0, contradicted: bool = False) -> BenchReport:
    rows = [BenchRow("exp", "4M", "float32", "cpu", impl, phase, samples_s=s,
                     median_s=summarize(s).median, n=len(s), resampled=resampled,
                     contradicted=contradicted)
            for impl, s in ((CUSTOM, custom), (REFERENCE, reference))]
    return BenchReport(rows=rows)


def quiet(scale: float, cost: float = 1.0) -> tuple[list[float], list[float]]:
    """(custom, reference) samples: reference `scale`, custom `cost` times it, per round."""
    ref = [scale * 2e-3 * w for w in WOBBLE]
    return [r * cost * j for r, j in zip(ref, JITTER, strict=True)], ref


def test_low_ratio_is_the_ratio_of_10th_percentiles() -> None:
    custom = [float(v) for v in range(10, 21)]  # 10th percentile: 11.0
    reference = [float(v) for v in range(20, 0, -2)] + [100.0]  # 10th percentile: 4.0
    assert low_ratio(custom, reference) == 11.0 / 4.0
    assert low_ratio([1.0, 2.0], [1.0]) is None  # samples that do not pair
    assert low_ratio([1.0, 0.0], [1.0, 1.0]) is None and low_ratio([], []) is None


def test_same_code_with_a_burst_in_absolute_time_is_no_regression() -> None:
    old = run_of(*quiet(1.0))
    # The new run: the machine three times slower, and a burst (x10) on a third of the pairs
    # (both samples of a pair: they are taken back to back).
    custom, ref = quiet(3.0)
    burst = [10.0 if i % 3 == 0 else 1.0 for i in range(len(ref))]
    new = run_of([c * b for c, b in zip(custom, burst, strict=True)],
                 [r * b for r, b in zip(ref, burst, strict=True)])
    (row,) = compare(old, new)
    assert row.basis == RATIO and abs(row.change_pct or 99) < 1.0  # the absolute: +200%
    assert not row.regression and not row.significant
    assert row.absolute_change_pct is not None and row.absolute_change_pct > 150
    assert row.old_custom_s is not None and row.new_custom_s is not None  # shown beside
    # a burst hitting one sample of a few rounds lands above the 10th percentile
    lone = [c * (10.0 if i in (1, 6) else 1.0) for i, c in enumerate(custom)]
    (row,) = compare(old, run_of(lone, ref))
    assert not row.regression and abs(row.change_pct or 0) < 1.0


def test_time_slices_hitting_one_sample_of_most_rounds_are_no_regression() -> None:
    # A busy core: in 10 of 12 rounds one sample waited out another job's 4 ms time slice,
    # by chance the custom one 7 times: the median of per-round ratios would read 1.9x.
    old = run_of(*quiet(1.0))
    custom, ref = quiet(1.0)
    hit_custom, hit_reference = {0, 2, 3, 5, 7, 8, 10}, {1, 4, 9}
    custom = [c + (4e-3 if i in hit_custom else 0.0) for i, c in enumerate(custom)]
    ref = [r + (4e-3 if i in hit_reference else 0.0) for i, r in enumerate(ref)]
    ratios = sorted(c / r for c, r in zip(custom, ref, strict=True))
    assert summarize(ratios).median > 1.8
    (row,) = compare(old, run_of(custom, ref))
    assert not row.regression and abs(row.change_pct or 0) < 2.0


def test_a_20_percent_ratio_change_is_a_regression() -> None:
    old = run_of(*quiet(1.0))
    new = run_of(*quiet(0.7, cost=1.2))  # the machine got faster; custom lost 20% on reference
    (row,) = compare(old, new)
    assert row.change_pct == pytest.approx(20.0)
    assert row.ratio_low is not None and row.ratio_low > 1.0 and row.significant
    assert row.regression and row.note == "REGRESSION" and regressions([row]) == [row]
    assert row.absolute_change_pct is not None and row.absolute_change_pct < 0  # though faster
    (row,) = compare(old, new, threshold=25.0)  # significant, but under the threshold
    assert row.significant and not row.regression


def part_and_whole(backward_cost: float, whole_cost: float) -> BenchReport:
    """A run whose backward costs half its forward_backward (times the costs given)."""
    rows = (run_of(*quiet(0.5, cost=backward_cost), phase="backward").rows
            + run_of(*quiet(1.0, cost=whole_cost), phase="forward_backward").rows)
    return BenchReport(rows=rows)


def test_a_part_regression_the_whole_contradicts_is_not_judged() -> None:
    # backward +20% would raise forward_backward about +10%; it held at +0%
    burst = {c.phase: c for c in compare(part_and_whole(1.0, 1.0), part_and_whole(1.2, 1.0))}
    bwd = burst["backward"]
    assert bwd.significant and bwd.change_pct is not None and bwd.change_pct > 15
    assert not bwd.regression and regressions(list(burst.values())) == []
    assert bwd.note.startswith("not judged: forward_backward did not follow (read +0.0%")
    assert "a real +20.0% here raises it +10.0%" in bwd.note


def test_a_part_regression_the_whole_follows_or_may_hide_in_stands() -> None:
    real = {c.phase: c for c in compare(part_and_whole(1.0, 1.0), part_and_whole(1.2, 1.1))}
    assert real["backward"].regression and real["forward_backward"].significant
    assert "did not follow" not in real["backward"].note
    # +5% of the whole: not significant, but its interval reaches half the implied +10%
    hidden = {c.phase: c for c in compare(part_and_whole(1.0, 1.0),
                                          BenchReport(rows=part_and_whole(1.2, 1.0).rows[:2]
                                                      + noisy_whole(1.05)))}
    assert hidden["backward"].regression
    assert "forward_backward did not follow" in hidden["backward"].note
    assert not hidden["backward"].note.startswith("not judged")


def noisy_whole(cost: float) -> list[BenchRow]:
    """forward_backward rows whose custom samples scatter 10% round to round (no significant
    change of a few percent)."""
    ref = [2e-3 * w for w in WOBBLE]
    scatter = [1.0, 1.1, 0.9, 1.05, 0.95, 1.1, 0.9, 1.0, 1.08, 0.92, 1.0, 1.02]
    custom = [r * cost * k for r, k in zip(ref, scatter, strict=True)]
    return run_of(custom, ref, phase="forward_backward").rows


def test_default_threshold_and_cli_exit_codes(tmp_path: Path) -> None:
    assert DEFAULT_THRESHOLD == 10.0
    paths = []
    for name, run in (("old", run_of(*quiet(1.0))), ("new", run_of(*quiet(1.0, cost=1.07)))):
        paths.append(str(write_bench_reports(run, tmp_path / name)[1]))
    result = runner.invoke(app, ["compare", *paths])
    assert result.exit_code == 0, result.output  # +7%: significant, under 10%
    assert "+7.0%" in result.output and "OK: no significant regression beyond 10%" in (
        result.output)
    result = runner.invoke(app, ["compare", *paths, "--threshold", "5"])
    assert result.exit_code == 1 and "REGRESSION: 1 of 1 phases" in result.output


def test_ratio_change_interval_carries_both_runs_scatter() -> None:
    old, new = quiet(1.0), quiet(1.0, cost=1.2)
    change = ratio_change(old, new, seed=1)
    assert change is not None and change.value == pytest.approx(1.2)
    assert change.old == pytest.approx(low_ratio(*old)) and change.low < 1.2 < change.high
    assert ratio_change(old, new, seed=1) == change  # seeded
    assert ratio_change(old, (new[0], new[1][:-1])) is None
    few = ratio_change(([2.0, 2.0], [1.0, 1.0]), ([4.0, 4.0], [1.0, 1.0]))
    assert few is not None and few.value == 2.0 and not few.significant  # 2 pairs: no claim


def test_without_a_reference_the_custom_medians_are_compared() -> None:
    old, new = run_of(*quiet(1.0)), run_of(*quiet(1.3))
    for run in (old, new):
        run.rows = [r for r in run.rows if r.impl == CUSTOM]
    (row,) = compare(old, new)
    assert row.basis == ABSOLUTE and row.regression and row.old_ratio is None
    assert row.change_pct == pytest.approx(30.0) and "no reference" in row.note


def test_a_resampled_phase_is_noted_in_compare() -> None:
    (row,) = compare(run_of(*quiet(1.0), phase="backward"),
                     run_of(*quiet(1.0), phase="backward", resampled=1))
    assert "resampled in new run" in row.note and not row.regression


def test_a_phase_still_contradicting_is_shown_not_judged() -> None:
    old = run_of(*quiet(1.0))
    (row,) = compare(old, run_of(*quiet(1.0, cost=1.5), resampled=2, contradicted=True))
    assert row.change_pct == pytest.approx(50.0) and row.significant and not row.regression
    assert row.note.startswith("not judged: contradicts the other phases of the new run")


def test_outside_range_beyond_the_slack() -> None:
    assert outside_range(1.5, [1.0, 1.2]) == 1.25 and outside_range(0.5, [1.0, 1.2]) == 2.0
    assert outside_range(1.25, [1.0, 1.2]) is None and outside_range(1.1, [1.0, 1.2]) is None


def test_resampled_round_trips_and_older_files_read_as_zero(tmp_path: Path) -> None:
    path = write_bench_reports(run_of(*quiet(1.0), resampled=2, contradicted=True),
                               tmp_path)[1]
    doc = json.loads(path.read_text())
    assert doc["version"] == VERSION == 3
    back = read_bench_json(path).rows
    assert [(r.resampled, r.contradicted) for r in back] == [(2, True), (2, True)]
    for row in doc["rows"]:
        del row["resampled"], row["contradicted"]
    doc["version"] = 2
    path.write_text(json.dumps(doc))
    back = read_bench_json(path).rows
    assert [(r.resampled, r.contradicted) for r in back] == [(0, False), (0, False)]


# -- a phase that contradicts forward_backward ---------------------------------------------------


class ScriptedClock:
    """A fake clock that moves only when the Functions below say how long they took."""

    def __init__(self, burst: set[int], during: str = "run_backward") -> None:
        self.now = 0.0
        #: which of the custom Function's backward calls (0-based) made by the phase task
        #: `during` (gradlab.bench.impl's run_backward or run_forward_backward) take 100 s
        self.burst, self.during = burst, during
        self.calls = 0

    def __call__(self) -> float:
        return self.now


def called_from(name: str) -> bool:
    """Whether a function called `name` is on the stack (the phase task running this call)."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def costly(clock: ScriptedClock, custom: bool) -> Any:
    """A Function whose forward costs 1 s and backward 1 s (custom: 100 s in a burst)."""

    class Costly(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            clock.now += 1.0
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            if custom and called_from(clock.during):
                clock.now += 100.0 if clock.calls in clock.burst else 1.0
                clock.calls += 1
            else:
                clock.now += 1.0
            return g

    return Costly.apply


OPTIONS = BenchOptions(min_time=1e-4, min_samples=5, max_time=0.0, warmup_time=0.0,
                       resamples=200)
#: A phase task's calls before the rounds (the first call, then the warm-up), and its calls in
#: one sampling (every phase is sampled in the same rounds; a resampling is one phase's own).
WARM, SAMPLED = 1 + WARMUP_MIN_CALLS, OPTIONS.min_samples
#: The phase's resamplings come next.
FIRST_RESAMPLE = WARM + SAMPLED


def bench_with_burst(burst: set[int], during: str = "run_backward"
                     ) -> dict[tuple[str, str], BenchRow]:
    clock = ScriptedClock(burst, during)
    op = OpDef(name="costly", summary="", function=costly(clock, True),
               reference=costly(clock, False), second_order=None,
               bench_cases=(Case("one", (TensorArg((4,)),)),))
    rows = bench_case(op, op.bench_cases[0], "float32", "cpu", OPTIONS, clock=clock)
    return {(r.impl, r.phase): r for r in rows}


def test_a_backward_slower_than_forward_backward_is_resampled_and_noted() -> None:
    rows = bench_with_burst(set(range(WARM, WARM + SAMPLED)))  # the first sampling only
    bwd, fb = rows[CUSTOM, "backward"], rows[CUSTOM, "forward_backward"]
    assert fb.median_s == 2.0  # forward 1 s + backward 1 s
    # the burst read 100 s, 50x the whole: sampled again, and the second sampling is kept
    assert bwd.status == PASS and bwd.median_s == 1.0 and bwd.samples_s == [1.0] * SAMPLED
    assert bwd.resampled == 1 and "resampled 1x: its median was 50.00x forward_backward's" in (
        bwd.note)
    assert rows[REFERENCE, "backward"].resampled == 1  # both, so the pairs stay alternated
    assert bwd.speedup == 1.0  # recomputed from the kept samples
    assert all(r.resampled == 0 for (_, phase), r in rows.items() if phase != "backward")


def test_a_phase_that_keeps_contradicting_stops_at_the_bound_and_says_so() -> None:
    burst = set(range(WARM, WARM + SAMPLED)) | set(
        range(FIRST_RESAMPLE, FIRST_RESAMPLE + MAX_RESAMPLES * SAMPLED))
    bwd = bench_with_burst(burst)[CUSTOM, "backward"]
    assert bwd.resampled == MAX_RESAMPLES and bwd.median_s == 100.0
    assert bwd.note.endswith(f"resampled {MAX_RESAMPLES}x: its median was 50.00x "
                             "forward_backward's; still 50.00x")
    assert bwd.contradicted  # compare will not judge it


def test_a_whole_whose_ratio_lies_outside_its_parts_is_resampled() -> None:
    # the custom backward read 100 s in forward_backward's rounds only: the whole's
    # custom/reference ratio (101 / 2) lies far outside forward_grad's and backward's (1 and 1)
    rows = bench_with_burst(set(range(WARM, WARM + SAMPLED)), during="run_forward_backward")
    fb = rows[CUSTOM, "forward_backward"]
    assert fb.resampled == 1 and fb.median_s == 2.0 and not fb.contradicted
    assert "resampled 1x: its custom/reference ratio was 50.50x outside those of " \
           "forward_grad and backward" in fb.note
    assert rows[REFERENCE, "forward_backward"].resampled == 1
    assert all(r.resampled == 0 for (_, p), r in rows.items() if p != "forward_backward")


def test_no_contradiction_no_resampling() -> None:
    rows = bench_with_burst(set())
    assert all(r.resampled == 0 and "resampled" not in r.note for r in rows.values())

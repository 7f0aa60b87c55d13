"""The resampling of a phase that contradicts forward_backward: fake clocks only."""

from __future__ import annotations

from typing import Any

import torch

from gradlab.bench import BenchOptions, bench_case
from gradlab.bench.runner import CUSTOM, MAX_RESAMPLES, REFERENCE
from gradlab.bench.timing import WARMUP_MIN_CALLS
from gradlab.model import Case, OpDef, TensorArg
from gradlab.results.bench import BenchRow
from gradlab.results.status import PASS

# -- a phase that contradicts forward_backward ---------------------------------------------------


class ScriptedClock:
    """A fake clock that moves only when the Functions below say how long they took."""

    def __init__(self, burst: set[int]) -> None:
        self.now = 0.0
        self.burst = burst  # which backward calls of the custom Function (0-based) take 100 s
        self.backward_calls = 0

    def __call__(self) -> float:
        return self.now


def costly(clock: ScriptedClock, custom: bool) -> Any:
    """A Function whose forward costs 1 s and backward 1 s (custom: 100 s in a burst)."""

    class Costly(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            clock.now += 1.0
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            if custom:
                clock.now += 100.0 if clock.backward_calls in clock.burst else 1.0
                clock.backward_calls += 1
            else:
                clock.now += 1.0
            return g

    return Costly.apply


OPTIONS = BenchOptions(min_time=1e-4, min_samples=5, max_time=0.0, warmup_time=0.0,
                       resamples=200)
#: Backward calls of the custom Function before the backward phase's sampling (the first call,
#: then the warm-up), and during one sampling.
WARM, SAMPLED = 1 + WARMUP_MIN_CALLS, OPTIONS.min_samples
#: The forward_backward phase's calls come next; then the resamplings of backward.
FIRST_RESAMPLE = WARM + SAMPLED + WARM + SAMPLED


def bench_with_burst(burst: set[int]) -> dict[tuple[str, str], BenchRow]:
    clock = ScriptedClock(burst)
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
                             "forward_backward's, still 50.00x")


def test_no_contradiction_no_resampling() -> None:
    rows = bench_with_burst(set())
    assert all(r.resampled == 0 and "resampled" not in r.note for r in rows.values())

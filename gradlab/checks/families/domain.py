"""Whether a failing variant moved the inputs out of the reference's own domain.

A variant changes values (magnitude, small, ties, ragged, a stride-0 input that repeats a row):
for a correct Function with a domain (an explicit ODE solver stable for small rates, a nearest
rotation unique for a full-rank matrix, an eigh-based square root of distinct eigenvalues) the
new values can lie where the math itself is not judgeable.  Asked only for a variant that failed
while its base case passed (a correct run costs nothing), with a reference: the reference runs
on the variant's values in float64, in float64 with every differentiable input nudged by NUDGE
relative in several seeded directions (NUDGE_SEEDS), and (for a float32 run) in float32.  Where
it raises, or is finite nowhere, in float64 the values are outside its domain
(`outside_domain`); where its own outputs or gradients move by more than ILL_CONDITIONED among
the nudges, or between float64 and float32, the problem is ill-conditioned there
(`ill_conditioned`).  Either way the variant's failing rows become a declared skip whose note
gives the numbers.  A Function that is wrong where the reference is stable and well-conditioned
(a naive logsumexp overflowing at the magnitude variant) stays a failure.  (Step 2 of the one
judgeability rule: gradlab.checks.families.judgeable.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, plain_copy
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.results import SKIP, CheckRow

#: The relative change (max abs change over max abs value, per output and gradient) beyond
#: which the reference is ill-conditioned on the inputs.  A float32 run rounds every value by
#: ~6e-8 relative, so a move of 1e-2 means a condition number above ~1e5; at that point a
#: float32 result has two correct digits at best and no tolerance can judge it.  A
#: well-conditioned problem moves ~1e-6 or less (the float32 table's rtol is 1.3e-6).
ILL_CONDITIONED = 1e-2
#: The relative nudge of every differentiable input in the float64 probe: float32's unit
#: roundoff, so that ILL_CONDITIONED means the same condition number (~1e5) in both probes
#: (the nudge sees the input's sensitivity in float64, the float32 run the rounding inside).
NUDGE = 1e-7
#: Variant families with new values on the base inputs (another grad_output, an undefined one).
SAME_INPUTS = ("grad_output", "undefined_grad")
#: Variant families whose values sit on kinks by construction (tied or repeated values, planted
#: special values): the nudge judges their outputs only.
AT_KINKS = ("ties", "expanded", "special")
#: Seeds of the nudges' directions (fixed: a run is reproducible).  Two: where the reference is
#: ill-conditioned (a rank-deficient matrix's nearest rotation), each nudge picks its own answer
#: and the two disagree by O(1) whatever the unnudged run's rounding picked; one nudge compared
#: with the unnudged run alone can land on the same answer by the rounding of the machine's
#: BLAS/LAPACK path (MKL's AVX2 and AVX-512 paths did, on the issue-40 machine), and the verdict
#: would depend on the CPU.  The largest change over every pair of runs is the measure: far
#: above ILL_CONDITIONED there (1.5 on tests/test_domain.py's rotation), ~1e-6 or less on a
#: well-conditioned problem.  A second nudge costs one more reference run, for a failing
#: variant only (a stiff ODE at the magnitude variant is the slowest seen); it is skipped when
#: the first already decides.
NUDGE_SEEDS = (1618, 2718)


def _values(run: Run, grads: bool) -> list[Tensor]:
    return [t.detach().to(torch.float64) for t in [*run.outs, *(run.grads if grads else [])]
            if isinstance(t, Tensor) and (t.is_floating_point() or t.is_complex())]


def moved(a: Run, b: Run, *, grads: bool = True, larger: bool = False,
          floor: Sequence[float] = ()) -> float:
    """The largest relative change from run `a` to run `b` in outputs (and gradients), over the
    elements where `a` is finite (the comparison itself leaves the others out): inf when `b`
    is not finite where `a` is, or the shapes differ.  larger: relative to the larger of the
    two runs' magnitudes (an all-zero gradient that turns nonzero moved by 1: relu at 0).
    floor: the least scale of each value in turn (the magnitudes the case's own values give:
    explore.reference_scale), when the runs' own are smaller."""
    va, vb = _values(a, grads), _values(b, grads)
    if len(va) != len(vb):
        return float("inf")
    worst = 0.0
    floors = list(floor) if len(floor) == len(va) else [0.0] * len(va)
    for x, y, least in zip(va, vb, floors, strict=True):
        if x.shape != y.shape:
            return float("inf")
        keep = torch.isfinite(x)
        x, y = x[keep], y[keep]
        if not bool(torch.isfinite(y).all()):
            return float("inf")
        scale = float(x.abs().max()) if x.numel() else 0.0
        if larger and x.numel():
            scale = max(scale, float(y.abs().max()))
        scale = max(scale, least)
        if scale > 0 and x.numel():  # an empty value moves by nothing, whatever its floor
            worst = max(worst, float((x - y).abs().max()) / scale)
    return worst


def nudged(inputs: Inputs, seed: int = NUDGE_SEEDS[0]) -> Inputs:
    """float64 copies of `inputs` with every floating differentiable tensor moved by NUDGE
    relative, elementwise, in a random direction seeded by `seed`."""
    out = plain_copy(inputs, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    for i in out.diff_index:
        t = out.args[i].detach()
        if t.is_floating_point():
            u = 2 * torch.rand(t.shape, generator=gen, dtype=t.dtype) - 1
            out.args[i] = copy_like(t * (1 + NUDGE * u.to(t.device)), requires_grad=True)
    return out


def judged(ctx: CaseContext, family: str, inputs: Inputs, grad_outs64: Sequence[Tensor],
           gen: torch.Generator) -> tuple[str, str] | None:
    """(reason, note) when the reference is not judgeable on `inputs`, else None.

    A relative nudge never crosses a kink at 0 (relu's), only one at tied or planted values: on
    those families (AT_KINKS) it judges the outputs alone, where the gradient jumps by design
    and a wrong tied gradient must stay a failure.  Float32 rounding keeps ties tied, so its
    probe (for a float32 run only: a float64 run never meets it) measures gradients too."""
    ref = ctx.op.reference
    if ref is None:
        return None
    gos = list(grad_outs64) or None
    gold = run_once(ref, plain_copy(inputs, dtype=torch.float64), gos, gen)
    if gold.error is not None:
        return "outside_domain", (f"the reference itself raises in float64 on these inputs "
                                  f"({first_line(gold.error)}): not judgeable")
    if not any(bool(torch.isfinite(t).any()) for t in _values(gold, True)):
        # partly finite: the comparison judges the finite elements (an exp computed in
        # float32 overflows at 89 where the float64 reference is finite up to 709)
        return "outside_domain", ("the reference itself is not finite anywhere in float64 "
                                  "on these inputs: not judgeable")
    change = nudge_change(ref, inputs, gos, gold, gen, grads=family not in AT_KINKS)
    what = f"under {len(NUDGE_SEEDS)} {NUDGE:.0e} relative nudges of these inputs"
    if change <= ILL_CONDITIONED and ctx.dtype == "float32":
        # a float32 overflow where float64 is finite is the dtype's range (the judgeability
        # rule's first step, overflow_alike), not ill-conditioning
        run = run_once(ref, plain_copy(inputs, dtype=torch.float32), gos, gen)
        change = moved(gold, run) if run.error is None else float("inf")
        change = 0.0 if change == float("inf") else change
        what = "between float32 and float64 on these inputs"
    if change > ILL_CONDITIONED:
        return "ill_conditioned", (
            f"the reference itself moves by {change:.2g} (relative) {what} (condition "
            f"number above ~{ILL_CONDITIONED / NUDGE:.0e}): not judgeable")
    return None


def nudge_change(ref: Callable[..., Any], inputs: Inputs, gos: list[Tensor] | None, gold: Run,
                 gen: torch.Generator, *, grads: bool) -> float:
    """The largest relative change among the reference's runs on `inputs` (gold) and on each
    nudge of them (NUDGE_SEEDS), every pair compared both ways (inf: a nudged run raised); the
    later nudges are not run once a change above ILL_CONDITIONED is seen."""
    runs, worst = [gold], 0.0
    for seed in NUDGE_SEEDS:
        run = run_once(ref, nudged(inputs, seed), gos, gen)
        if run.error is not None:
            return float("inf")
        worst = max([worst, *(max(moved(a, run, grads=grads), moved(run, a, grads=grads))
                              for a in runs)])
        if worst > ILL_CONDITIONED:
            return worst
        runs.append(run)
    return worst


def outside_domain(ctx: CaseContext, family: str, inputs: Inputs,
                   grad_outs64: Sequence[Tensor], failing: list[CheckRow],
                   gen: torch.Generator) -> list[CheckRow]:
    """The failing rows of a variant with new values that stay failures: none when the
    reference is not judgeable on the variant's inputs (each row then a declared skip saying
    why), else all.  The caller asks only when the base case passed; a variant that keeps the
    base inputs (SAME_INPUTS) keeps its failures: the base case judged those values."""
    verdict = None if family in SAME_INPUTS else judged(ctx, family, inputs, grad_outs64, gen)
    if verdict is None:
        return failing
    reason, note = verdict
    for r in failing:
        r.status, r.declared, r.reason, r.hint, r.note = SKIP, True, reason, "", note
        r.findings = []
    return []

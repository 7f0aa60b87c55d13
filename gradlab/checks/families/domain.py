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

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, materialize, plain_copy
from gradlab.checks.families.inputspace import SEED
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Case
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


def reference_scale(ref: Callable[..., Any], case: Case, device: str) -> list[float]:
    """The largest magnitude of each of the reference's outputs and gradients on the case's
    own values (float64): at an all-zero point a smooth reference's gradient is 0 and moves
    by ~NUDGE under a nudge, nothing against the values the case shows, while a kink's
    (relu at 0) moves by the whole gradient.  Empty when the reference does not run."""
    try:
        inputs = materialize(case, "float64", device, SEED)
    except Exception:
        return []
    run = run_once(ref, inputs, None, torch.Generator().manual_seed(SEED))
    return [] if run.error is not None else magnitudes(run)


def magnitudes(run: Run) -> list[float]:
    """The largest magnitude of each floating output and gradient of a run."""
    return [float(t.detach().abs().max()) if t.numel() else 0.0
            for t in [*run.outs, *run.grads]
            if isinstance(t, Tensor) and (t.is_floating_point() or t.is_complex())]


#: The two nudges of jumps (relative, as domain's NUDGE and pointjudge's FINE_NUDGE): a
#: smooth run's change shrinks by their ratio, 1e-5; a jump's stays the size of the jump.
JUMP_NUDGES = (1e-7, 1e-12)
#: A side is continuous where its change at the finer nudge is at most JUMP_SHRINK of its
#: change at the coarser (a jump's ratio is 1; a smooth run's 1e-5; a power x^p's (1e-5)^p:
#: pow's d/da = b a^(b-1) at a base of 0, 0.32 at b = 1.1) and at most JUMP_SMALL of the
#: values' scale (at least 1): a clamp's convention (a BCE's log clamped at 1e-12) changes
#: its slope between the two nudges, while its change stays O(1).
JUMP_SHRINK = 0.5
JUMP_SMALL = 1e-3


def jumps(ref: Callable[..., Any], inputs: Inputs, want: Run, gen: torch.Generator,
          got: Run | None = None) -> bool:
    """Whether the reference's run at `inputs` is discontinuous from both sides: every
    differentiable input moved by each of JUMP_NUDGES (relative, plus that of the tensor's
    mean magnitude: a zero moves too), all elements one way, then all the other.  A side is
    continuous where its runs are finite and their change shrinks with the nudge to near
    nothing; a kink's other slope (a norm's gradient at 0), a clamp's convention (a BCE's
    log clamped at 0) or a raise beside (outside the domain) is not.  got: only the elements
    where the Function's run is not finite and the reference's is are measured.  Asked where the
    Function is not finite but the reference is: judged only where some side is continuous
    (pow's d/db at a base of 0, from above)."""
    keep = None if got is None else [~g.isfinite() & w.isfinite() if g.shape == w.shape else
                                     torch.ones_like(w, dtype=torch.bool)
                                     for g, w in zip(_values(got, True), _values(want, True),
                                                     strict=False)]
    scale = max([1.0, *(float(t[t.isfinite()].abs().max()) for t in _values(want, True)
                        if bool(t.isfinite().any()))])
    for sign in (1.0, -1.0):
        changes = []
        for nudge in JUMP_NUDGES:
            run = run_once(ref, _sided(inputs, sign * nudge), want.grad_outs64 or None, gen)
            changes.append(float("inf") if run.error is not None else _change(want, run, keep))
        coarse, fine = changes
        if math.isfinite(coarse) and fine <= min(JUMP_SHRINK * coarse, JUMP_SMALL * scale):
            return False
    return True


def _change(a: Run, b: Run, keep: Sequence[Tensor] | None = None) -> float:
    """The largest absolute change from run `a` to run `b` over a's finite elements (inf where
    b is not finite there, or a shape differs): absolute, as a smooth run's change at a zero
    value shrinks with the nudge, while relative to itself it stays 1.  keep: per value
    (outputs, then gradients), the elements measured (all when None)."""
    va, vb = _values(a, True), _values(b, True)
    if len(va) != len(vb) or any(x.shape != y.shape for x, y in zip(va, vb, strict=True)):
        return float("inf")
    worst = 0.0
    for k, (x, y) in enumerate(zip(va, vb, strict=True)):
        ok = torch.isfinite(x)
        if keep is not None:
            ok = ok & keep[k] if k < len(keep) else torch.zeros_like(ok)
        if bool((ok & ~torch.isfinite(y)).any()):
            return float("inf")
        if bool(ok.any()):
            worst = max(worst, float((x[ok] - y[ok]).abs().max()))
    return worst


def _sided(inputs: Inputs, step: float) -> Inputs:
    """float64 copies of `inputs`, each differentiable floating tensor moved by `step` times a
    seeded factor in [0.5, 1.5) per element (inputs equal at the point, such as a BCE's p and
    t both 0, move apart: along their diagonal a discontinuity hides), relative to each value's
    magnitude plus the tensor's mean magnitude (1 for an all-zero tensor)."""
    out = plain_copy(inputs, dtype=torch.float64)
    gen = torch.Generator().manual_seed(NUDGE_SEEDS[0])
    for i in out.diff_index:
        t = out.args[i].detach()
        if t.is_floating_point() and t.numel():
            scale = float(t.abs().mean()) or 1.0
            u = 0.5 + torch.rand(t.shape, generator=gen, dtype=t.dtype)
            out.args[i] = copy_like(t + step * u * (t.abs() + scale), requires_grad=True)
    return out


def ill_conditioned(ref: Callable[..., Any], inputs: Inputs, want: Run,
                     gen: torch.Generator, floor: Sequence[float] = (),
                     nudge: float = NUDGE) -> bool:
    """The reference's outputs or gradients move by more than ILL_CONDITIONED under a nudge
    (nudged_runs), one way and the other: a point on a kink (relu at 0, a max at a tie) is
    where the derivative is a convention, not judgeable; a smooth reference moves ~`nudge`."""
    for again in nudged_runs(ref, inputs, want, gen, nudge):
        if again.error is not None or moved(want, again, larger=True,
                                            floor=floor) > ILL_CONDITIONED:
            return True
    return False


def nudged_runs(ref: Callable[..., Any], inputs: Inputs, want: Run,
                 gen: torch.Generator, nudge: float = NUDGE) -> Iterator[Run]:
    """The reference on the inputs nudged one way, then the other (both sides of a kink), by
    `nudge` relative to each value plus `nudge` of the tensor's mean magnitude (planted zeros
    move too)."""
    g = torch.Generator().manual_seed(SEED + 1)
    noises = {i: torch.randn(inputs.args[i].shape, generator=g, dtype=inputs.args[i].dtype)
              for i in inputs.diff_index}
    for sign in (1.0, -1.0):  # both ways: a kink's one side alone may agree with the point
        nudged = inputs.clone()
        for i, noise in noises.items():
            t = nudged.args[i].detach()
            if t.numel():
                # an all-zero tensor moves by NUDGE itself (its mean magnitude is no scale)
                scale = float(t.abs().mean()) or 1.0
                step = sign * nudge * noise * (t.abs() + scale)
                nudged.args[i] = copy_like(t + step, requires_grad=True)
        yield run_once(ref, nudged, want.grad_outs64 or None, gen)

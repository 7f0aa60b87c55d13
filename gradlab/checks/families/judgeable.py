"""The one judgeability rule of a variant's failing rows.

A row, base or variant, fails only where the Function is wrong in a way the reference, run on
the same values, is not.  `judgeable` measures per failing row of a variant with new values what
the reference allows there, in this order, and keeps as failures only the rows none of it
explains:

1. its range in the run's dtype (every variant with new values, whether the base passed or
   not): every wrong element non-finite where the reference, run in the run's own dtype on the
   same values, is non-finite too is the dtype's range, not the Function's bug (exp(100) in
   float32; a stable IIR filter given a planted coefficient of 3 reaches 1e95 past 200 steps, inf
   in float32 for the reference as for the Function).  The row passes, reason `overflow_alike`.
   (Formerly `overflow_alike`, magnitude and small only, and `range_reached`.)
2. where the base passed and the values are new (not SAME_INPUTS): whether the reference raises,
   is finite nowhere, or is ill-conditioned there (domain.judged: float64 raise, a nudge, the
   float32 probe): a declared skip whose note gives the numbers (`outside_domain`,
   `ill_conditioned`); not a row wrong only by NaN or inf where the reference, in the run's
   dtype, is finite and vanishing (range_alike's certain rows: an overflow on the way to 0).
   Then, with a reference, for a variant that moves values (not INDEX_FAMILIES): wrong only
   where the reference's gradient is exactly 0 at values the case never takes there (a
   clamp: saturation.py), policy's `past_clamp` (a warn).
3. where the base passed, for a value variant that does not rescale (METHOD_FAMILIES): an error
   with an approximate method's signature, small everywhere with its direction kept
   (hints.level_hint's `approximate`: at most APPROXIMATE_REL of its scale, cosine above
   APPROXIMATE_COSINE) while the base case was within its tolerance, is the method's accuracy on
   these values (a CG or MINRES solve stopped by its iteration count on a system the planted
   values made harder: 4e-4 of its scale, cosine 1.0000): policy's `method_accuracy` (a warn
   giving the number; a failure under --strict).  A wrong formula is not small everywhere, or
   turns the direction: it stays a failure, and so does anything the base case already shows.
   An expanded input's or grad_output's repeated values are new values too: where their plain
   copy fails alike (variants.judge_failures), the same signature is the same warn.

What stays outside the rule, and why (each says so in its own docstring):
- `tie_convention` (repeats.py): at a tie the derivative is not defined; a convention, not a
  measure of the reference's accuracy.
- `scale_limited` and its `precision_driven` probe (verdicts.py): inputs rescaled 1e3x or 1e-12x
  from the user's, where the reference is right but a method's absolute constant (a damping
  epsilon, a solver's tolerance) is not: the reference does better there, so the rule would
  fail the row; it is a warn by policy, and a cancellation (rounding's) stays a failure.
- `values_refused`, `expanded_refused`'s capability row: the Function raises where the reference
  computes; raising is the safe way to lack a domain, a policy warn, not a wrong number.
- `reference_refused`: the rule's step 2 (the reference raises) met before any comparison: the
  reference raised on the variant's own run, so there is no row to judge, only its skip.
- `near_bound`, `unsure`, `without_reference` (verdicts.py): hints and reasons on rows that stay
  failures or have no reference; they decide no status.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from gradlab.cases import Inputs
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import level_hint
from gradlab.checks.families.domain import SAME_INPUTS, outside_domain
from gradlab.checks.families.saturation import flat_beyond_case
from gradlab.checks.numeric.context import CaseContext
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Tolerance
from gradlab.results import ERROR, PASS, CheckRow, Finding

#: Value families judged for a method's signature (step 3): new values at the case's own scale.
#: magnitude and small rescale every input; a method's absolute scale there is scale_limited's
#: (verdicts.py), whose precision probe keeps a cancellation a failure.
#: Not repeated_index: it redraws integer indices only, the floating values stay the base
#: case's, so a method is exactly as accurate as on the base case and any error there is the
#: indices' handling.  Pins: the catalogue's autograd39-take-dup (a repeated index not
#: accumulated: 20% of the gradient wrong, within 1e-2 of its scale at one seed: a failure).
METHOD_FAMILIES = ("ragged", "size1", "special", "ties")
#: Families that move integer indices, not values: a gradient that must be 0 there (a source
#: row another overwrites) is the indices' structure, not a clamp the values crossed (step 2b).
INDEX_FAMILIES = ("repeated_index", "sentinel")


def compared_tensors(f: Finding, got: Run, want: Run,
                     inputs: Inputs) -> tuple[Tensor, Tensor] | None:
    """The got and want tensors a forward or gradient finding is about (None: no such pair)."""
    if f.subject == "output" and f.index < min(len(got.outs), len(want.outs)):
        g, w = got.outs[f.index], want.outs[f.index]
        # an output of another shape than the reference's is wrong whatever the tolerance
        return (g, w) if g.shape == w.shape else None
    if f.subject == "input" and f.index in inputs.diff_index:
        k = inputs.diff_index.index(f.index)
        if k < min(len(got.grads), len(want.grads)):
            g, w = got.grads[k], want.grads[k]
            if g is not None and w is not None and g.shape == w.shape:
                return g, w
    return None


def nonfinite_within(got: Tensor, want: Tensor) -> bool:
    """Every non-finite element of `got` is non-finite in `want` too (same shape)."""
    return bool((~torch.isfinite(got) <= ~torch.isfinite(want.to(got.device))).all())


def only_nonfinite(r: CheckRow) -> bool:
    """Every wrong element of `r`'s findings is a non-finite one."""
    return bool(r.findings) and all(
        f.stats is not None and f.stats.nonfinite
        and f.stats.nonfinite == round(f.stats.frac_wrong * math.prod(f.shape or ()))
        for f in r.findings)


def range_alike(ctx: CaseContext, inputs: Inputs, grad_outs64: Sequence[Tensor], got: Run,
                failing: list[CheckRow],
                gen: torch.Generator) -> tuple[list[CheckRow], list[CheckRow]]:
    """Step 1: the failing rows whose wrong elements are not all non-finite where the
    reference, run in the run's dtype on the same values and grad_outputs, is non-finite too;
    the others pass with reason `overflow_alike`.  A naive formula that overflows where a
    stable one does not (softplus as exp(x) / (1 + exp(x))) is finite in the reference's run
    and stays a failure; so does exp computed in float32 inside a float64 Function (inf from
    89 where the float64 run's reference is finite up to 709).  Returns the rows kept, and
    among them the certain ones: wrong only by non-finite elements where the reference's run
    in the same dtype is finite and vanishing, an overflow no conditioning of the reference
    explains (step 2 does not judge them: cal8's snntorch sigmoid surrogate, NaN from inf/inf
    in float32 where the reference's gradient is 0)."""
    if ctx.op.reference is None or not any(only_nonfinite(r) for r in failing):
        return failing, []
    same = run_once(ctx.op.reference, inputs.clone(), grad_outs64, gen)
    if same.error is not None:
        return failing, []
    kept, certain = [], []
    for r in failing:
        pairs = [compared_tensors(f, got, same, inputs) for f in r.findings]
        if only_nonfinite(r) and all(p is not None and nonfinite_within(*p) for p in pairs):
            r.status, r.hint, r.reason, r.findings = PASS, "", "overflow_alike", []
            r.max_abs_err = r.max_rel_err = None  # measured against nothing finite
            continue
        kept.append(r)
        if only_nonfinite(r) and all(p is not None and vanishing(*p) for p in pairs):
            certain.append(r)
    return kept, certain


#: The reference's value, relative to its tensor's largest, below which a non-finite result
#: is an overflow on the way to ~0 (a tail the reference has underflowed or saturated),
#: whatever the reference's conditioning: its relative move between dtypes (0 in float32,
#: 1e-40 in float64) is not ill-conditioning.  Above it, a finite reference on an ill-posed
#: input (the nearest rotation to a rank-1 matrix) leaves the non-finite result unjudged.
#: Pins: tests/test_judgeable.py (the sigmoid surrogate fails, the nearest rotation of
#: tests/test_domain.py skips).
VANISHING = 1e-6


def vanishing(got: Tensor, want: Tensor) -> bool:
    """Whether the reference (`want`, the run's dtype) is finite everywhere and ~0 (within
    VANISHING of its largest) at each element `got` has non-finite."""
    got, want = got.detach(), want.detach().to(got.device)
    if not bool(torch.isfinite(want).all()):
        return False
    bad = ~torch.isfinite(got)
    scale = float(want.abs().max()) if want.numel() else 0.0
    return bool(bad.any()) and bool((want[bad].abs() <= VANISHING * scale).all())


def method_signature(r: CheckRow, runs: tuple[Run, Run], inputs: Inputs,
                     tol: Tolerance) -> tuple[float, float] | None:
    """(error relative to its scale, cosine) of `r`'s worst finding when every finding has an
    approximate method's signature (hints.level_hint says `approximate`), else None."""
    if (not r.failed or r.status == ERROR or not r.findings
            or r.check not in ("forward", "gradient")):
        return None
    worst = None
    for f in r.findings:
        pair = compared_tensors(f, *runs, inputs)
        if pair is None:
            return None
        d = dg.compare(*pair, tol, scaled=True)
        # the level alone ("" is no dtype: precision_loss, a float64 run's, is not asked)
        if level_hint(d, "") != "approximate":
            return None
        rel = d.stats.max_abs / d.scale
        if worst is None or rel > worst[0]:
            worst = (rel, d.stats.cosine)
    return worst


def method_accuracy(ctx: CaseContext, failing: list[CheckRow], runs: tuple[Run, Run],
                    inputs: Inputs, tol: Tolerance) -> list[CheckRow]:
    """Step 3: the failing rows without an approximate method's signature; the others become
    policy's `method_accuracy`, the number in the note."""
    kept = []
    for r in failing:
        sig = method_signature(r, runs, inputs, tol)
        if sig is None:
            kept.append(r)
            continue
        r.status = policy.status(r.check, "method_accuracy", strict=ctx.options.strict)
        r.reason, r.hint = "method_accuracy", "approximate"
        r.note = "; ".join(filter(None, [r.note, (
            f"error {sig[0]:.2g} of its scale, direction kept (cosine {sig[1]:.6f}), where "
            f"the base case is within tolerance: a method's accuracy on these values")]))
    return kept


def past_clamp(ctx: CaseContext, failing: list[CheckRow], runs: tuple[Run, Run],
               inputs: Inputs, tol: Tolerance) -> list[CheckRow]:
    """Step 2b: where the Function is wrong only at finite gradient elements where the
    reference's is exactly 0 and the case's own reference gradient has no 0 (a clamp the
    case never reaches: saturation.py), the failing gradient rows are policy's `past_clamp`
    (a warn); none stays a failure.  Any other failure keeps them all."""
    if any(r.check != "gradient" for r in failing) or not flat_beyond_case(
            ctx.op.reference, ctx.case, inputs, *runs, tol, ctx.device):
        return failing
    for r in failing:
        r.status = policy.status(r.check, "past_clamp", strict=ctx.options.strict)
        r.reason = "past_clamp"
    return []


def judgeable(ctx: CaseContext, family: str, inputs: Inputs, grad_outs64: Sequence[Tensor],
              runs: tuple[Run, Run], failing: list[CheckRow], gen: torch.Generator, *,
              base_passed: bool, tol: Tolerance) -> list[CheckRow]:
    """The failing rows of a variant with new values that stay failures under the rule (the
    module's docstring); the others are changed in place: a pass, a declared skip or a warn,
    each saying why."""
    got, want = runs
    kept, certain = range_alike(ctx, inputs, grad_outs64, got,
                                [r for r in failing if r.status != ERROR], gen)
    failing = kept + [r for r in failing if r.status == ERROR]
    if not failing or not base_passed or family in SAME_INPUTS:
        return failing
    failing = outside_domain(ctx, family, inputs, want.grad_outs64,
                             [r for r in failing if all(r is not c for c in certain)],
                             gen) + certain
    if failing and ctx.op.reference is not None and family not in INDEX_FAMILIES:
        failing = past_clamp(ctx, failing, runs, inputs, tol)
    if failing and family in METHOD_FAMILIES and ctx.op.reference is not None:
        failing = method_accuracy(ctx, failing, runs, inputs, tol)
    return failing

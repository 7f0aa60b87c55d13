"""How a variant's outcome is judged (gradlab.checks.families.variants asks): refusals, and whether
a failure is the layout's or the values'.

- Refusals: a variant the reference refuses lies outside the op's domain (a declared skip, never
  the Function's bug); an expanded input the Function alone refuses is a missing capability.
- Layout or values: a layout hint (`noncontiguous_only`, `grad_output_layout`, ...) sends the
  user to strides and memory, a value-variant hint (`magnitude_only`, `ragged_only`) to
  overflows and tiles.  Each is given only where the evidence says so:
  - layout variants: the failing variant's values, copied plain and contiguous (inputs and
    grad_outputs), run again; when that copy fails alike, the error depends on the values (an
    approximate method whose error varies with them), not on the layout;
  - value variants (magnitude, ragged, size1, whose inputs are plain already): a failure whose
    every wrong element lies within VALUE_LEVEL_FACTOR of the tolerance bound is the level of an
    approximate method, not an overflow or a dropped tile; and one that fails again where its
    own cause cannot act (ragged values at the case's sizes, magnitudes halfway) is the values'.
  A value-level failure gets the level hint of its error (precision_loss, approximate) or
  `value_dependent`, and the tolerance that would pass.

Whether a variant's failing row can be judged at all is one rule, in
gradlab.checks.families.judgeable (its docstring): a row fails only where the Function is wrong
in a way the reference, run on the same values, is not; where the values cannot be judged, or
show only a method's accuracy, the row is a pass or declared skip saying why, or a warn giving
the number.  Of the eleven exceptions this module and domain.py held (issue 38), three are
that rule's measurements now and gone as exceptions: overflow_alike (the range in the run's
dtype, for every variant with new values, not magnitude and small alone), range_reached (the
same measurement, which scale_limited still asks) and ill_conditioned (the reference's
conditioning, several nudges compared pairwise).  Eight stay, each saying why in its docstring:
expanded_refused and values_refused (the Function raises where the reference computes: a
capability or a policy warn, not a number to judge), reference_refused (the rule's "the
reference raises", met before any row exists), scale_limited and precision_driven (the
reference does better at rescaled inputs; a warn by policy), near_bound and unsure (hints, no
status), without_reference (no reference: nothing to measure the rule with).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, plain_copy
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import (
    LEVEL_HINTS,
    VALUE_LEVEL_FACTOR,
    advise_tolerance,
    crash_hint,
    level_hint,
    value_level,
    value_level_hint,
)
from gradlab.checks.families.domain import moved
from gradlab.checks.families.judgeable import compared_tensors, nonfinite_within
from gradlab.checks.families.repeats import untied
from gradlab.checks.families.sizes import magnitude_inputs
from gradlab.checks.families.values import small_inputs
from gradlab.checks.numeric.compare import compared_aside
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.checks.numeric.rawbackward import STORAGE_HINTS
from gradlab.model import Tolerance
from gradlab.results import ERROR, SKIP, CheckRow

#: Families whose variant keeps the values and changes only the memory layout (expanded and
#: the stride-0 grad_output repeat one slice's values: their plain copy keeps those values).
LAYOUT_FAMILIES = ("noncontiguous", "transposed", "channels_last", "expanded", "grad_output")
#: Families whose variant draws other values (or sizes) in plain contiguous memory.
VALUE_FAMILIES = ("magnitude", "ragged", "size1", "small", "special", "ties", "repeated_index",
                  "sentinel")
#: (VALUE_LEVEL_FACTOR, and the hints a value-level failure gets or keeps:
#: gradlab.checks.diagnosis.hints.)


def accepts(fn: Callable[..., Any], inputs: Inputs) -> bool:
    """True when a forward of `fn` on `inputs` runs."""
    try:
        with torch.enable_grad():
            fn(*inputs.args, **inputs.kwargs)
    except Exception:
        return False
    return True


def expanded_refused(ctx: CaseContext, name: str, inputs: Inputs, got: Run,
                     seconds: float) -> None:
    """Forward refused an expanded input: a missing capability when the reference accepts it
    (stays outside the judgeability rule: a refusal is no number to judge; the reference
    refusing too is the rule's "the reference raises", a declared skip)
    (a `warn`: refusing is a choice, not a wrong gradient), not applicable when it refuses too;
    values_refused when the Function refuses a contiguous copy of the same values as well."""
    note = first_line(got.error) if got.error is not None else ""
    if ctx.op.reference is not None and not accepts(ctx.op.reference, inputs.clone()):
        ctx.row(name, "forward", SKIP, seconds=seconds, declared=True,
                reason="expanded_refused_by_reference", note=note)
    elif not accepts(ctx.op.function, plain_copy(inputs)):
        # the repeated row's values, not the stride-0 layout: a contiguous copy is refused
        # alike (a Cholesky-based solve of a matrix the repeat made indefinite), so the
        # layout cannot be judged and .contiguous() would not help
        values_refused(ctx, name, got, seconds)
    else:
        ctx.capability_row(name, "forward", "expanded_input", seconds=seconds,
                           hint="expanded_refused", reason="expanded_refused", note=note)


#: Value families whose new values a correct Function may refuse by design: a tie that a
#: Cholesky-based solve (its matrix made singular) or a sort-based op cannot take, a planted
#: special value outside its domain, parameters rescaled past the ranges its forward asserts
#: (a compressor's ratio above 1: torchcomp), repeated indices that make a sparse matrix
#: singular (torch-sla's det).
REFUSABLE = ("ties", "special", "magnitude", "small", "repeated_index", "sentinel")


def values_refused(ctx: CaseContext, name: str, got: Run, seconds: float) -> None:
    """Forward raised on a variant's values that the reference accepts (in any layout): policy's
    `values_refused` (a warn: raising is the safe way to lack a domain, and may be a bug; a
    failure under --strict), the error in the note.  Stays outside the judgeability rule: the
    reference computes here, so the rule would fail it; a raise is no wrong number."""
    ctx.row(name, "forward", policy.status("forward", "values_refused",
                                           strict=ctx.options.strict),
            seconds=seconds, reason="values_refused",
            note=first_line(got.error) if got.error is not None else "")


def reference_refused(ctx: CaseContext, name: str, got: Run, error: BaseException,
                      seconds: float) -> None:
    """The reference's forward refuses the variant's inputs: they lie outside the op's domain
    (the judgeability rule's "the reference raises", met before any row exists to judge)
    (a channel count the group count no longer divides), so there is nothing to compare with
    and nothing wrong with the Function: a declared skip, never a failure or a tile hint.

    A Function that computes anyway gets the reason that says so (no input validation?) on this
    row rather than a `warn`: a reference narrower than the op (a reshape-based one beside a
    C++ kernel that handles more sizes) is common, and a warning there would cry wolf."""
    accepted = got.error is None or got.stage != "forward"
    ctx.row(name, "forward", SKIP, seconds=seconds, declared=True,
            reason="reference_refused_function_accepts" if accepted else "reference_refused",
            note=f"{name}: {first_line(error)}")


def plain_copy_failures(ctx: CaseContext, inputs: Inputs, grad_outs64: Sequence[Tensor],
                        want: Run, tol: Tolerance, gen: torch.Generator) -> set[str]:
    """The checks (forward, gradient) the Function fails on a plain contiguous copy of a
    variant's inputs and grad_outputs, against the variant's own expectation."""
    inputs = plain_copy(inputs)
    got = run_once(ctx.op.function, inputs, [g.contiguous() for g in grad_outs64], gen)
    return {r.check for r in compared_aside(ctx, ctx.dtype, got, want, inputs, tol) if r.failed}


def narrowed_to(inputs: Inputs, base: Inputs) -> Inputs:
    """`inputs` (a ragged variant's) with each tensor cut back to the shape of the base case's
    tensor in its place: the variant's own leading values at the sizes the case has."""
    args: list[Any] = []
    for a, s in zip(inputs.args, base.args, strict=True):
        if isinstance(a, Tensor) and isinstance(s, Tensor) and a.dim() == s.dim():
            t = a.detach()
            for d, n in enumerate(s.shape):
                t = t.narrow(d, 0, min(n, t.shape[d]))
            a = copy_like(t.contiguous(), requires_grad=a.requires_grad)
        args.append(a)
    return Inputs(args, plain_copy(inputs).kwargs)


def values_failures(ctx: CaseContext, inputs: Inputs, tol: Tolerance,
                    gen: torch.Generator) -> set[str]:
    """The checks the Function fails on `inputs` (plain contiguous values) against the
    reference's float64 run on them.  Without a reference nothing can fail there (the Function
    would be its own expectation)."""
    if ctx.op.reference is None:
        return set()
    want = run_once(ctx.op.reference, inputs.clone(dtype=torch.float64), None, gen)
    if want.error is not None:
        return set()
    return plain_copy_failures(ctx, inputs, want.grad_outs64, want, tol, gen)


def value_variant_failures(ctx: CaseContext, family: str, inputs: Inputs, base: Inputs,
                           tol: Tolerance, gen: torch.Generator) -> set[str]:
    """The checks a failing value variant fails again where its own cause cannot act: the
    ragged values cut back to the case's sizes (no tile left partial), the magnitude halfway
    (below every overflow point), the ties moved apart; failing there too, the error is the
    values'."""
    if family == "ragged":
        return values_failures(ctx, narrowed_to(inputs, base), tol, gen)
    if family == "ties":
        return values_failures(ctx, untied(inputs, base), tol, gen)
    if family == "magnitude":
        halfway = magnitude_inputs(base, ctx.dtype, halfway=True)
        return set() if halfway is None else values_failures(ctx, halfway, tol, gen)
    if family == "small":
        halfway = small_inputs(base, ctx.dtype, halfway=True)
        return set() if halfway is None else values_failures(ctx, halfway, tol, gen)
    return set()


def tolerance_factor(passing: Tolerance | None, tol: Tolerance) -> float:
    """How many times `tol` the tolerance that would pass is (inf: none would)."""
    if passing is None:
        return float("inf")
    return max(passing.atol / tol.atol if tol.atol > 0 else 0.0,
               passing.rtol / tol.rtol if tol.rtol > 0 else 0.0)


def near_bound(row: CheckRow, got: Run, want: Run, inputs: Inputs, tol: Tolerance) -> bool:
    """Every finding of `row` passes within VALUE_LEVEL_FACTOR times `tol` (no inf or NaN).
    Decides a hint (value level or the variant's own), never a status: outside the rule."""
    if not row.findings:
        return False
    for f in row.findings:
        pair = compared_tensors(f, got, want, inputs)
        passing = dg.passing_tolerance(*pair, tol) if pair is not None else None
        if tolerance_factor(passing, tol) > VALUE_LEVEL_FACTOR:
            return False
    return True


def error_level(got: Tensor, want: Tensor, tol: Tolerance, dtype: str) -> str:
    """The level hint of `got`'s error against `want` (hints.level_hint), '' when none."""
    return level_hint(dg.compare(got, want, tol, scaled=True), dtype)


def mark_value_level(row: CheckRow, got: Run, want: Run, inputs: Inputs, tol: Tolerance) -> None:
    """`row` fails on the values, not the layout: each finding gets the tolerance that would
    pass and its level hint (precision_loss, approximate) where the level tells; the row that
    level, else `value_dependent`.  A finding keeps a hint of the error's shape (a constant
    factor: repeated values that tie) but no pattern: which elements cross the tolerance within
    an error that varies with the values is chance."""
    levels: list[str] = []
    for f in row.findings:
        pair = compared_tensors(f, got, want, inputs)
        if pair is None:
            continue
        f.pattern = None
        level = value_level(f.hint, functools.partial(error_level, *pair, tol, row.dtype))
        if level:
            levels.append(level)
        f.hint = value_level_hint(f.hint, level)
        passing = dg.passing_tolerance(*pair, tol)
        # a tolerance is advice for an error at its level only
        near = advise_tolerance(level, tolerance_factor(passing, tol))
        f.passing_tolerance = (passing.atol, passing.rtol) if passing and near else None
    row.hint = levels[0] if levels else "value_dependent"


def unsure(r: CheckRow) -> None:
    """No level hint (but the base's), no tolerance advice on the findings of a row the base's
    error explains (hints only, no status: outside the judgeability rule)."""
    for f in r.findings:
        if f.hint in LEVEL_HINTS and f.hint != r.hint:
            f.hint, f.passing_tolerance = "", None


#: The variant families that rescale every input away from the user's values (1e3 up, 1e-12
#: down in float64): a Function right at the user's values and wrong only there may be an
#: unstable formula, or a method with an absolute scale by design (a damping epsilon, a
#: solver's tolerance or fixed step).
SCALE_FAMILIES = ("magnitude", "small")
#: A small-variant failure is rounding's (a formula that cancels in the run's precision: a bug)
#: when the Function's error on the same values grows by at least this factor from float64 to
#: float32: rounding error scales with the dtype's epsilon (float32's is 5e8x float64's), an
#: absolute constant's does not (roma's damped Procrustes derivative: 1.0 relative in both; a
#: naive log(expm1) backward at 1e-6: 5% in float32, 1e-10 in float64).  At the magnitude
#: variant the bug it hunts is an overflow (non-finite, a failure whatever this says); a
#: finite error there is, in the corpus measured, a method's (an adaptive solver's tolerance,
#: tightened in float64 by its caller, looks like rounding to this probe), so it is not asked.
PRECISION_DRIVEN = 100.0


def precision_driven(ctx: CaseContext, inputs: Inputs, grad_outs64: Sequence[Tensor],
                     gen: torch.Generator) -> bool:
    """Whether the Function's error against the float64 reference on `inputs` grows by
    PRECISION_DRIVEN from float64 to float32 (scale_limited's probe, outside the judgeability
    rule with it) (True too where nothing can be measured: the
    failure stands).  A float32 inf counts: it is the cancellation itself (exp(x) - 1 = 0)."""
    ref = ctx.op.reference
    gold = run_once(ref, plain_copy(inputs, dtype=torch.float64), grad_outs64, gen) \
        if ref is not None else None
    if gold is None or gold.error is not None:
        return True
    err = []
    for dtype in (torch.float64, torch.float32):
        run = run_once(ctx.op.function, plain_copy(inputs, dtype=dtype), grad_outs64, gen)
        if run.error is not None:  # a Function for one dtype only: no evidence
            return True
        err.append(moved(gold, run))
    hi, lo = err
    return lo >= PRECISION_DRIVEN * max(hi, 1e-300)


def range_reached(ctx: CaseContext, got: Run, inputs: Inputs, grad_outs64: Sequence[Tensor],
                  gen: torch.Generator) -> bool:
    """Whether every non-finite output or gradient element of the Function's run `got` is
    non-finite in the reference run in the same dtype on `inputs` too: the math leaves the
    dtype's range there (an unstable scheme at stiff rates, in the reference as in the
    Function), no overflow of the Function's own.  (exp computed in float32 inside a float64
    Function is inf from 89, the float64 reference only from 709: not reached.)"""
    ref = ctx.op.reference
    if ref is None or got.error is not None:
        return False
    same = run_once(ref, inputs.clone(), grad_outs64, gen)
    if same.error is not None:
        return False
    pairs = [*zip(got.outs, same.outs, strict=False), *zip(got.grads, same.grads, strict=False)]
    for a, b in pairs:
        if not isinstance(a, Tensor) or not a.is_floating_point():
            continue
        if not isinstance(b, Tensor) or a.shape != b.shape:
            return False
        if not nonfinite_within(a, b):
            return False
    return True


def base_findings(rows: Sequence[CheckRow]) -> list[CheckRow]:
    """The base case's rows a variant's verdict leans on: failing, or only float32-accurate (a
    float32 overflow at the magnitude variant is that), where their diagnosis is the variants'
    too; not a finding on where the Function keeps tensors (STORAGE_HINTS), which says nothing
    of its values."""
    return [r for r in rows if (r.failed or r.hint == "precision_loss")
            and r.hint not in STORAGE_HINTS]


def scale_limited(ctx: CaseContext, family: str, got: Run, inputs: Inputs,
                  grad_outs64: Sequence[Tensor], failing: list[CheckRow],
                  gen: torch.Generator) -> None:
    """A rescaling variant's failing rows (the base case passed) that are policy's
    `scale_limited` (a warn, a failure under --strict; the row's hint kept).  Stays outside the
    judgeability rule: at inputs rescaled far from the user's the reference does better, so the
    rule would fail the row; that a method's absolute scale is no bug there is policy: every value
    finite where the reference's is (or the reference in the run's dtype leaves the range
    too), or the Function raised; at the small variant the error not rounding's
    (precision_driven).  A non-finite value where the reference is finite (a naive softplus
    overflowing) or a cancellation stays a failure.  Measured on correct third-party
    Functions (benchmarks/thirdparty): roma's damped Procrustes derivative at 1e-12, adaptive
    ODE solvers at stiff rates, an SDE scheme diverging at large parameters."""
    if family not in SCALE_FAMILIES or not failing:
        return
    finite = all(r.status == ERROR or (r.findings and all(
        f.stats is None or not f.stats.nonfinite for f in r.findings)) for r in failing)
    if not finite and not range_reached(ctx, got, inputs, grad_outs64, gen):
        return
    if family == "small" and precision_driven(ctx, inputs, grad_outs64, gen):
        return
    for r in failing:
        r.status = policy.status(r.check, "scale_limited", strict=ctx.options.strict)
        r.reason = "scale_limited"
        if r.status != ERROR:
            # the base passed: a formula's shape (swapped, transposed, a factor, a sign) would
            # fail it too, so one seen here is chance; at the small variant the error is not
            # rounding's (precision_driven), so no cancellation either; a level measured
            # (approximate, value_dependent) stays
            for x in (r, *r.findings):
                x.hint = "scale_constant" if x.hint in FORMULA_SHAPES else x.hint


#: Finding hints that name a formula's shape (hints.py), which a failure only at rescaled
#: inputs, the base case passing, cannot be.
FORMULA_SHAPES = ("swapped", "transposed", "constant_factor", "sign", "zero", "small_only",
                  "magnitude_only")


def raised_at_new_sizes(ctx: CaseContext, family: str, got: Run,
                        failing: list[CheckRow]) -> None:
    """A ragged variant's crash rows where backward raised (forward ran, and the reference,
    or the variant would be refused; the base case passed): policy's `reshaped_raises`, as
    the edges check's edge_reshaped, one rule for a raise at sizes the case lacks.  A gradient
    autograd refuses (wrong_shape, a count) stays a failure."""
    if (family != "ragged" or got.error is None or got.stage != "backward"
            or crash_hint(got.error) != "crash"):
        return
    for r in failing:
        if r.status == ERROR:
            r.status = policy.status(r.check, "reshaped_raises", strict=ctx.options.strict)
            r.reason = "reshaped_raises"


def without_reference(family: str, rows: list[CheckRow]) -> None:
    """Rows compared with the Function's own contiguous run (no reference) say so; a value
    variant's is that run on the same plain values again, which measures nothing: no errors.
    Stays outside the judgeability rule: without a reference there is nothing to measure it
    with."""
    for r in rows:
        r.reason = r.reason or "no_reference"
        if family in VALUE_FAMILIES and not r.failed:
            r.max_abs_err = r.max_rel_err = None

"""Variants of a case that plain gradcheck never feeds a Function.

Input layouts (a strided slice of a larger buffer, transposed memory, channels_last, stride-0
expanded), grad_output layouts (non-contiguous, transposed, the stride-0 one `.sum()` makes),
requires_grad subsets, undefined output gradients and size-1 dimensions.  Each variant is compared
with the reference on the same values (or with the Function's own contiguous run without one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, materialize, narrowed, plain_copy, relayout
from gradlab.checks.diagnosis.hints import ONLY_HINT
from gradlab.checks.families import sizes as sz
from gradlab.checks.families.judgeable import judgeable, method_accuracy
from gradlab.checks.families.repeats import repeat_variants, tie_convention
from gradlab.checks.families.values import conventions, left_out, value_families
from gradlab.checks.families.verdicts import (
    LAYOUT_FAMILIES,
    REFUSABLE,
    VALUE_FAMILIES,
    base_findings,
    expanded_refused,
    mark_value_level,
    near_bound,
    plain_copy_failures,
    raised_at_new_sizes,
    reference_refused,
    scale_limited,
    unsure,
    value_variant_failures,
    values_refused,
    without_reference,
)
from gradlab.checks.numeric.compare import compare_runs
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.contract import contract_row
from gradlab.checks.numeric.execute import UNDEFINED_GRAD, Run, backward_of, run_once, run_undefined
from gradlab.checks.numeric.lowprec import Lows, variant_low
from gradlab.model import VARIANT_FAMILIES, TensorArg, Tolerance
from gradlab.results import ERROR, SKIP, CheckRow
from gradlab.select import variant_picked

#: Variant families whose inputs have other shapes than the case's.
NEW_SHAPES = ("size1", "ragged")


@dataclass
class Variant:
    """One variant: its name and family, inputs, grad_output layout and whether values changed."""
    name: str
    family: str
    inputs: Inputs
    go_layout: str = "contiguous"
    #: the values differ from the base case (expanded, size-1), so the expectation is recomputed.
    new_values: bool = False
    #: output positions whose gradient is left undefined.
    undefined: tuple[int, ...] = ()
    #: ragged: the sizes grown (more than one: each grows alone too should this one fail)
    sizes: tuple[int, ...] = ()


def families(ctx: CaseContext) -> set[str]:
    """The variant families this case runs (the spec's and the options' choice)."""
    opt = ctx.options.variants
    if opt is False:
        return set()
    fams = set(VARIANT_FAMILIES)
    if ctx.target.variants is not None:
        fams &= set(ctx.target.variants)
    if isinstance(opt, frozenset):
        fams &= set(opt)
    return fams


def _layout_applies(family: str, t: Tensor) -> bool:
    if family == "expanded":
        # an index's or a mask's first slice repeated is another input, not another layout; so
        # is a constant's first component repeated along its last dim (relayout's dim)
        dim = next((d for d, n in enumerate(t.shape) if n > 1), None)
        return (t.is_floating_point() or t.is_complex()) and t.dim() >= 1 and not (
            sz.constant(t) and dim == t.dim() - 1)
    if family == "channels_last":
        return t.dim() == 4 and not t.is_contiguous(memory_format=torch.channels_last)
    if family == "transposed":
        return t.dim() >= 2 and t.shape[-1] >= 2 and t.shape[-2] >= 2
    return t.dim() >= 1


def layout_variants(fams: set[str], base: Inputs) -> Iterator[Variant]:
    """Each tensor input in turn laid out in memory another way (same values)."""
    for family in ("noncontiguous", "transposed", "channels_last", "expanded"):
        if family not in fams:
            continue
        for i in base.tensor_index:
            t = base.args[i]
            new = relayout(t, family) if _layout_applies(family, t) else None
            if new is None:
                continue
            inputs = base.clone(but=i)
            inputs.args[i] = new.requires_grad_(t.requires_grad)
            yield Variant(f"{family}[{i}]", family, inputs, new_values=family == "expanded")


def value_variants(ctx: CaseContext, fams: set[str], base: Inputs) -> Iterator[Variant]:
    """Large magnitudes and ragged sizes (gradlab.checks.families.sizes)."""
    if "magnitude" in fams:
        big = sz.magnitude_inputs(base, ctx.dtype)
        if big is not None:
            yield Variant("magnitude", "magnitude", big, new_values=True)
    if "ragged" in fams:
        sizes = sz.ragged_sizes(ctx.case.args)
        if sizes:
            yield ragged_variant(ctx, sizes)
    for name, family, inputs in repeat_variants(fams, base, ctx.op.reference is not None):
        yield Variant(name, family, inputs, new_values=True)  # gradlab.checks.families.repeats
    for family, inputs in value_families(ctx.case, fams, base, ctx.dtype):
        yield Variant(family, family, inputs, new_values=True)  # gradlab.checks.families.values


def ragged_variant(ctx: CaseContext, sizes: Sequence[int]) -> Variant:
    """The case with `sizes` grown (gradlab.checks.families.sizes)."""
    return Variant(sz.ragged_name(sizes), "ragged",
                   sz.ragged_inputs(ctx.case, sizes, ctx.dtype, ctx.device), new_values=True,
                   sizes=tuple(sizes))


def ragged_parts(ctx: CaseContext, v: Variant) -> Iterator[Variant]:
    """The ragged variant's sizes grown one at a time (after all of them failed: which?)."""
    for n in v.sizes:
        yield ragged_variant(ctx, [n])


def _go_layout_applies(layout: str, shape: tuple[int, ...]) -> bool:
    """Whether a grad_output of `shape` can take `layout` (else it would be a plain copy)."""
    if layout == "transposed":
        return len(shape) >= 2 and shape[-1] >= 2 and shape[-2] >= 2
    if layout == "expanded":
        return math.prod(shape) > 1
    return len(shape) >= 1


def generate(ctx: CaseContext, base: Inputs,
             out_shapes: Sequence[tuple[int, ...]]) -> Iterator[Variant]:
    """Every variant of `base` the target allows (out_shapes: the base run's outputs)."""
    fams = families(ctx)
    n_outputs = len(out_shapes)
    yield from layout_variants(fams, base)
    if "grad_output" in fams and base.diff_index:
        for layout in ("noncontiguous", "transposed", "expanded"):
            if not any(_go_layout_applies(layout, s) for s in out_shapes):
                continue  # the base run again: a 1-d output has no transposed grad_output
            # the stride-0 grad_output repeats one value: its expectation is recomputed.  The
            # base inputs themselves: run_variant copies them if it runs a forward on them.
            yield Variant(f"grad_output:{layout}", "grad_output", base, go_layout=layout,
                          new_values=layout == "expanded")
    diff = base.diff_index
    if "requires_grad" in fams and len(diff) > 1:
        for i in diff:
            yield Variant(f"requires_grad=[{i}]", "requires_grad", base.clone(requires_grad={i}))
    if "undefined_grad" in fams and (n_outputs > 1 or UNDEFINED_GRAD is not None) and diff:
        for k in range(n_outputs):
            yield Variant(f"undefined_grad[out{k}]", "undefined_grad", base.clone(),
                          new_values=True, undefined=(k,))
    yield from value_variants(ctx, fams, base)
    if "size1" in fams:
        for group in ctx.case.size1:
            args = list(ctx.case.args)
            for pos, dim in group:
                a = args[pos]
                if isinstance(a, TensorArg):
                    args[pos] = narrowed(a, dim)
                elif isinstance(a, Tensor):  # an example tensor from the Python API
                    args[pos] = copy_like(a.detach().narrow(dim, 0, 1).contiguous(),
                                          requires_grad=a.requires_grad)
            case = replace(ctx.case, args=tuple(args))
            label = ",".join(f"{p}.{d}" for p, d in group)
            yield Variant(f"size1[{label}]", "size1",
                          materialize(case, ctx.dtype, ctx.device, seed=1234), new_values=True)


@dataclass
class Baseline:
    """What every variant of a case is run against: the base inputs and grad_outputs, the
    expected run on them, and the Function's own base run when its backward may run again."""

    inputs: Inputs
    grad_outs64: list[Tensor]
    #: the reference's run on the base values (or, without a reference, the Function's own)
    want: Run
    gen: torch.Generator
    #: the reference's float64 inputs of `want`, whose graph a new grad_output reuses
    want_inputs: Inputs | None = None
    #: the Function's base run, when its backward passed the re-entrancy check
    got: Run | None = None
    #: the Function draws random numbers (its base forward moved torch's generators)
    stochastic: bool = False
    #: the reference's own runs on the base values (lowprec.reference_in_dtype; None: the table)
    low: Lows | None = None


def expected(ctx: CaseContext, v: Variant, b: Baseline, grad_outs64: list[Tensor]) -> Run:
    """What the variant must produce: the reference (or base Function run) on its values."""
    fn = ctx.op.reference or ctx.op.function
    dtype = torch.float64 if ctx.op.reference is not None else None
    if b.stochastic and v.family not in ("grad_output", "requires_grad") and (
            ctx.op.reference is not None or v.family in ("transposed", "channels_last")):
        # torch draws per dtype and memory layout (rand_like fills a transposed tensor in
        # memory order): a stochastic Function's reference runs on the variant's own inputs;
        # without one, its own run on them only where the draws follow memory order (else its
        # contiguous run, below, draws the same numbers and says more)
        return run_once(fn, v.inputs.clone(), None if v.family in NEW_SHAPES else grad_outs64,
                        b.gen)
    if v.family == "grad_output" and v.new_values and b.want_inputs is not None:
        # the same values: the reference's base graph runs backward again (no forward)
        return backward_of(Run(b.want.outs, []), fn, b.want_inputs, grad_outs64, b.gen)
    if v.new_values:
        # contiguous copies of the variant's own values
        inputs = plain_copy(v.inputs, dtype=dtype)
        # other shapes (size-1, ragged) need grad_outputs of their own
        return run_once(fn, inputs, None if v.family in NEW_SHAPES else grad_outs64, b.gen)
    return b.want


def variant_grad_outputs(v: Variant, grad_outs64: list[Tensor]) -> list[Tensor]:
    """The float64 grad_output values the variant runs with."""
    gos64 = grad_outs64
    if v.go_layout == "expanded":
        gos64 = [relayout(g, "broadcast").contiguous() for g in grad_outs64]  # type: ignore[union-attr]
    if v.undefined:
        # an undefined gradient means "zero" to the reference
        gos64 = [torch.zeros_like(g) if k in v.undefined else g for k, g in enumerate(gos64)]
    return gos64


def run_variant(ctx: CaseContext, v: Variant, b: Baseline, *,
                contract: bool = True) -> tuple[Run, Run]:
    """The Function's run of the variant (checking the contract too) and what it must match.

    A grad_output variant runs backward on the Function's base graph when it may (b.got)."""
    base, gen = b.inputs, b.gen
    gos64 = variant_grad_outputs(v, b.grad_outs64)
    want = expected(ctx, v, b, gos64)
    # other shapes: the expectation's own grad_outputs (random ones when it has none)
    gos = (want.grad_outs64 or None) if v.family in NEW_SHAPES else gos64
    if v.undefined:
        got = run_undefined(ctx.op.function, v.inputs, gos64, v.undefined)
    elif v.family == "grad_output" and b.got is not None:
        # the same inputs, so the same forward: only backward sees another grad_output
        got = backward_of(Run(b.got.outs, []), ctx.op.function, base, gos, gen,
                          go_layout=v.go_layout, check_contract=contract)
    elif v.family == "grad_output":
        got = run_once(ctx.op.function, base.clone(), gos, gen, go_layout=v.go_layout,
                       check_contract=contract)
    else:
        got = run_once(ctx.op.function, v.inputs, gos, gen, go_layout=v.go_layout,
                       check_contract=contract)
    if v.family == "requires_grad":
        # expected gradients only for the inputs the variant differentiates
        want = want.with_grads([want.grads[k] for k, i in enumerate(base.diff_index)
                                if i in v.inputs.diff_index])
    return got, want


def variant_rows(ctx: CaseContext, b: Baseline, checks: frozenset[str]) -> None:
    """Run every variant and append its rows to ctx.rows.

    Variants on the base values are compared with b.want, the others get their own expected
    run (Baseline says what each field serves)."""
    base = base_findings(ctx.rows)
    judge = Judge(ctx.op.tolerance(ctx.dtype), checks, bool(base), {r.check: r.hint for r in base})
    names = ctx.options.variant_names
    for v in generate(ctx, b.inputs, [tuple(g.shape) for g in b.grad_outs64]):
        if names is not None and not variant_picked(v.name, names):
            continue  # not the one variant a repro command asked for
        with ctx.within_envelope(v.name):  # a runaway variant is stopped: a declared skip
            split = len(v.sizes) > 1
            if not one_variant(ctx, v, b, judge, refusal_row=not split) and split:
                for part in ragged_parts(ctx, v):
                    one_variant(ctx, part, b, judge)


@dataclass(frozen=True)
class Judge:
    """How a case's variants are judged: tolerance, checks, and the base case's own verdict."""

    tol: Tolerance
    checks: frozenset[str]
    base_failed: bool
    base_hints: dict[str, str]


def one_variant(ctx: CaseContext, v: Variant, b: Baseline, judge: Judge,
                refusal_row: bool = True) -> bool:
    """Run one variant and append its rows; True when it passed (nothing failed or refused).

    refusal_row: a forward refusing a ragged variant gets its declared skip row (not when its
    sizes are tried one at a time next)."""
    t0 = time.perf_counter()
    n_before = len(ctx.rows)
    checks = judge.checks
    got, want = run_variant(ctx, v, b, contract="contract" in checks)
    tied = (got, want)  # the ties' totals: the reference's own (a kink's convention splits them)
    want, kinks = conventions(ctx, v.inputs, got, want, judge.tol) if v.family == "special" \
        else (want, 0)
    if v.family == "expanded" and got.error is not None and got.stage == "forward":
        expanded_refused(ctx, v.name, v.inputs, got, time.perf_counter() - t0)
        return False
    if ctx.op.reference is not None and want.error is not None and want.stage == "forward":
        if refusal_row:
            reference_refused(ctx, v.name, got, want.error, time.perf_counter() - t0)
        return False
    if v.family == "ragged" and got.error is not None and got.stage == "forward":
        # a Function may require sizes the case implies (a kernel size that must match):
        # refusing the grown shapes is a stated limit, not a wrong gradient
        if refusal_row:
            ctx.row(v.name, "forward", SKIP, seconds=time.perf_counter() - t0, declared=True,
                    reason="ragged_refused", note=first_line(got.error))
        return False
    if v.family in REFUSABLE and got.error is not None and got.stage == "forward":
        values_refused(ctx, v.name, got, time.perf_counter() - t0)
        return False
    rows = compare_runs(ctx, v.name, got, want, v.inputs, judge.tol,
                        checks=checks & {"forward", "gradient"},
                        low=variant_low(ctx.op, b.low, v.family, v.new_values,
                                        (b.inputs, v.inputs), want, b.gen))
    left_out(rows, kinks)
    if v.family in ("grad_output", "requires_grad", "undefined_grad"):
        # the forward is the base forward again: keep only the gradient row
        for r in [r for r in rows if r.check == "forward" and not r.failed]:
            ctx.rows.remove(r)
    if ctx.op.reference is None:
        without_reference(v.family, [r for r in rows if any(r is x for x in ctx.rows[n_before:])])
    if "contract" in checks:
        contract_row(ctx, v.name, got.contract, passing=False)
    failing = [r for r in ctx.rows[n_before:] if r.failed and r.check != "contract"]
    if failing and v.new_values:  # values that may tie where the case's do not
        failing = tie_convention(v.inputs, tied, failing, judge.tol, ctx.op.reference)
    if failing and v.new_values:  # the one judgeability rule (gradlab.checks.families.judgeable)
        failing = judgeable(ctx, v.family, v.inputs, b.grad_outs64, (got, want), failing, b.gen,
                            base_passed=not (judge.base_failed or b.stochastic), tol=judge.tol)
    if failing:  # contract rows keep their own, more specific, hint
        judge_failures(ctx, v, b, judge, failing, (got, want))
    for r in ctx.rows[n_before:]:
        r.seconds = time.perf_counter() - t0
    return not any(r.failed for r in ctx.rows[n_before:])


def judge_failures(ctx: CaseContext, v: Variant, b: Baseline, judge: Judge,
                   failing: list[CheckRow], runs: tuple[Run, Run]) -> None:
    """The hints of a variant's failing forward and gradient rows.

    The base case passed: the variant's hint (`*_only`, grad_output_layout) when the failure is
    the variant's, a value-level one when it is the values' (gradlab.checks.families.verdicts).
    The base fails this check too: its diagnosis is the bug's (a no_chain_rule backward looks
    like a constant factor under an all-alike grad_output)."""
    if judge.base_failed:
        for r in failing:
            if r.check in judge.base_hints and r.failed and r.status != ERROR:
                # a level or a shape seen only in a variant's values would be chance beside
                # the base's bigger error (a crash keeps its own: a fact, not a guess)
                r.hint = judge.base_hints[r.check]
                unsure(r)
        return
    got, want = runs
    values: set[str] = set()
    if b.stochastic:
        # torch draws per dtype and memory layout: a plain copy (or the float64 reference)
        # would draw other numbers, and its failure would say nothing of the values
        pass
    elif v.family in LAYOUT_FAMILIES:
        # the cost: one more run, for a failing variant only
        values = plain_copy_failures(ctx, v.inputs, variant_grad_outputs(v, b.grad_outs64),
                                     want, judge.tol, b.gen)
    elif v.family in VALUE_FAMILIES:
        # ties: the ties moved apart (below) say it outright, where bfloat16's tolerance times
        # VALUE_LEVEL_FACTOR would call a wrong tied gradient near the bound; small: the halfway
        # run does (a cancellation 10-100 tolerances off is no level)
        values = {r.check for r in failing if v.family not in ("ties", "small")
                  and near_bound(r, got, want, v.inputs, judge.tol)}
        if len(values) < len(failing):
            # a tile bug passes at the case's sizes, an overflow halfway to the magnitude
            values |= value_variant_failures(ctx, v.family, v.inputs, b.inputs, judge.tol,
                                             b.gen)
    for r in failing:
        if r.check in values:
            mark_value_level(r, got, want, v.inputs, judge.tol)
        else:
            r.hint = ONLY_HINT[v.family]
    if v.new_values and v.family in LAYOUT_FAMILIES:  # new values, failing in any layout
        method_accuracy(ctx, [r for r in failing if r.check in values], runs, v.inputs, judge.tol)
    scale_limited(ctx, v.family, got, v.inputs, b.grad_outs64, failing, b.gen)
    raised_at_new_sizes(ctx, v.family, got, failing)

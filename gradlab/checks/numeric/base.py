"""The base rows of one case in one dtype: the reference's run they compare with, the forward and
gradient rows against it (with what only a failing gradient asks: the RNG replayed, a chain rule
ignored, a missed conjugation), and the contract row; gradlab.checks.run.runner calls them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs
from gradlab.checks.diagnosis.hints import UNEXPLAINED, explain
from gradlab.checks.numeric import lowprec
from gradlab.checks.numeric.compare import chain_rule_ignored, compare_runs
from gradlab.checks.numeric.conjugate import conjugate_missed
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.contract import (
    Undifferentiated,
    backward_checks,
    contract_row,
    differentiability,
    dropped_gradients,
)
from gradlab.checks.numeric.execute import Run, draws_matter, rng_replayed, run_once
from gradlab.checks.numeric.jacobian import Backward
from gradlab.checks.numeric.rawbackward import grad_output_as
from gradlab.model import OpDef


def reference_run(op: OpDef, ref_inputs: Inputs, low_inputs: Inputs | None,
                  grad_outs: list[Tensor] | None, gen: torch.Generator) -> tuple[Run, str]:
    """The reference's run the base rows compare with: in float64 (the gold), or, where its
    forward refuses float64, in the case's own dtype on the same values (low_inputs), judged by
    the fixed table; with the note that says so ("" for the float64 run)."""
    assert op.reference is not None
    want = run_once(op.reference, ref_inputs, grad_outs, gen)
    if want.error is None or want.stage != "forward" or low_inputs is None:
        return want, ""
    alt = run_once(op.reference, low_inputs.clone(), grad_outs, gen)
    if alt.error is not None:
        return want, ""
    return alt, (f"no float64 run of the reference ({first_line(want.error)}): judged by the "
                 "fixed tolerance table against the reference in this dtype")


def against_reference(ctx: CaseContext, runs: tuple[Run, Run], inputs: tuple[Inputs, Inputs],
                      low: lowprec.Lows | None, checks: frozenset[str],
                      gen: torch.Generator) -> None:
    """The base forward and gradient rows against the reference's run (and its own in the
    case's dtype, `low`), with the diagnoses only a failing gradient asks for."""
    (got, want), (inputs_, ref_inputs) = runs, inputs
    op = ctx.op
    assert op.reference is not None
    rows = compare_runs(ctx, "base", got, want, inputs_, op.tolerance(ctx.dtype), checks=checks,
                        low=low)
    rng_replayed([r for r in rows if r.failed and r.check == "gradient"], got,
                 draws_matter([(op.function, inputs_, got), (op.reference, ref_inputs, want)],
                              gen))
    failed = [r for r in rows if r.failed and r.check == "gradient"]
    if failed and failed[-1].hint in UNEXPLAINED and chain_rule_ignored(
            op.function, inputs_.clone(), gen):
        explain(failed[-1], "no_chain_rule")
    elif failed and failed[-1].hint in UNEXPLAINED and conjugate_missed(op.function, inputs_):
        explain(failed[-1], "conjugate")


def base_contract(ctx: CaseContext, got: Run, want: Run, inputs: Inputs,
                  grad_outs: list[Tensor] | None) -> Run | None:
    """The base run's contract row; `got` when its graph may take more backwards (the
    grad_output variants reuse it), else None."""
    # a backward that raised may still have shown what it returns
    # the second backward runs on the base run's own graph (its first was the base run's)
    twice, note = ([], "") if got.error is not None or grad_outs is None else \
        backward_checks(ctx.op.function, got.outs, inputs,
                        [grad_output_as(g, o, "contiguous")
                         for g, o in zip(grad_outs, got.outs, strict=True)],
                        got.grads, ctx.op.tolerance(ctx.dtype))
    # the reference's run says which outputs are differentiable (want is got without one)
    fails, warns = differentiability(got.outs, want.outs)
    ref = ctx.op.reference
    # the reference as the user gave it (the variants' copy detaches what the Function does)
    ref = ref.fn if isinstance(ref, Undifferentiated) else ref
    detached = any(f.hint == "output_not_differentiable" for f in warns)
    if ref is not None and want.error is None and detached and not any(
            o.requires_grad for o in got.outs):
        # no output of the Function is differentiable, where the reference's are: a loss
        # through it gets no gradient at all, a failure where the reference's gradient through
        # them is not zero.  One output among differentiable others (a batch norm's statistics,
        # returned as constants) stays a warn: a convention, not a lost gradient.
        lost, warns = dropped_gradients(warns, lambda k: dropped_gradient(
            ref, inputs, want.outs, k, torch.Generator().manual_seed(0)))
        fails = [*fails, *lost]
    contract_row(ctx, "base", got.contract + twice + fails, passing=True,
                 unavailable=got.raw_unavailable, no_custom=got.no_custom, note=note,
                 warnings=warns)
    # backward ran again on the base graph alike (after another forward too): the grad_output
    # variants may run it again
    return got if got.error is None and not got.contract and not twice else None


def base_of(bw: Backward | None) -> Run | None:
    """The jacobian graph's first backward as a run (outputs, gradients, their grad_outputs),
    when it ran and backward gave a gradient for every input; else None."""
    if bw is None or bw.first is None or any(g is None for g in bw.first[1]):
        return None
    v, grads = bw.first
    return Run(list(bw.outputs), list(grads), grad_outs64=bw.split(v))


def dropped_gradient(reference: Callable[..., Any], inputs: Inputs, outs: Sequence[Tensor],
                     k: int, gen: torch.Generator) -> bool:
    """Whether the reference's gradient through its output k alone (a random grad_output there,
    zeros on the others) is nonzero for some input: the Function, whose output k does not
    require grad, then drops a gradient a loss through it must get (a sparse tensor's
    `_values()` read detached: the bug catalogue's pyg6635).  False where it is zero (a round,
    a sign, an argmax returned as floats: detaching those loses nothing)."""
    gos = [torch.randn(o.shape, generator=gen, dtype=torch.float64) if j == k
           else torch.zeros(o.shape, dtype=torch.float64) for j, o in enumerate(outs)]
    run = run_once(reference, inputs.clone(dtype=torch.float64), gos, gen)
    return run.error is None and any(
        g is not None and g.numel() and float(g.abs().max()) > DROPPED_FLOOR for g in run.grads)


#: The largest reference gradient (through an output the Function detaches) still read as zero:
#: float64 rounding of a gradient that is zero by the math (a round's straight zero, a sum of
#: terms that cancel) stays orders below it, a dropped gradient of the case's values is O(1).
DROPPED_FLOOR = 1e-9

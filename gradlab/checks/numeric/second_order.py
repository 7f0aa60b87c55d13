"""The second_order check: the Jacobian of the gradient function (gradgradcheck's math).  An op
that declares no double backward (`second_order: false`) passes where it raises; where it runs
anyway, it is checked the same way, and a silently wrong result is policy's
`second_order_claimed`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, call, flat_outputs
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import (
    NOISE_HINTS,
    level_hint,
    precision_blamed,
    second_order_hint,
)
from gradlab.checks.numeric import jacobian as jac
from gradlab.checks.numeric.backprop import materialized
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.contract import backward_again
from gradlab.checks.numeric.execute import random_like, run_once
from gradlab.checks.numeric.numerical import (
    DENSE_MAX_CALLS_2ND,
    jacobian_check,
    surrogate_by_reference,
)
from gradlab.model import OpDef
from gradlab.results import ERROR, PASS, SKIP, CheckRow, Finding
from gradlab.torchstate import replay


def gradient_function(fn: Callable[..., Any], n_args: int, wrt: Sequence[int],
                      kwargs: dict[str, Any]) -> Callable[..., Any]:
    """g(*args, *grad_outputs) = the first-order gradients, differentiable when fn's backward is."""

    def g(*all_args: Any) -> tuple[Tensor, ...]:
        args, gos = list(all_args[:n_args]), all_args[n_args:]
        replay()  # the case's RNG state, as for every forward of the Function
        with torch.enable_grad():
            outs = flat_outputs(fn(*args, **kwargs))
            pairs = [(o, go) for o, go in zip(outs, gos, strict=True) if o.requires_grad]
            grads = torch.autograd.grad([p[0] for p in pairs], [args[i] for i in wrt],
                                        [p[1] for p in pairs], create_graph=True,
                                        allow_unused=True)
        return tuple(torch.zeros_like(args[i]) if gr is None else materialized(gr)
                     for gr, i in zip(grads, wrt, strict=True))

    return g


def gradient_inputs(fn: Callable[..., Any], inputs: Inputs, gen: torch.Generator,
                    outs: Sequence[Tensor] | None = None) -> tuple[Callable[..., Any], Inputs]:
    """The first-order gradient function and its inputs (args + random grad_outputs).

    outs: fn's outputs on these inputs when already made (their shapes are all it needs)."""
    if outs is None:
        outs = call(fn, inputs)
    gos = [random_like(o, gen).to(o.dtype).to(o.device)
           .requires_grad_(o.requires_grad) for o in outs]
    g = gradient_function(fn, len(inputs.args), inputs.diff_index, inputs.kwargs)
    return g, Inputs([*inputs.args, *gos], {})


def double_backward_raises(fn: Callable[..., Any], inputs: Inputs) -> BaseException | None:
    """Run double backward once; return the exception it raised (None when it ran)."""
    try:
        g, g_inputs = gradient_inputs(fn, inputs, torch.Generator().manual_seed(0))
    except Exception as exc:
        return exc
    return double_backward(g, g_inputs)[0]


#: The words of torch's error node under a backward decorated with
#: torch.autograd.function.once_differentiable (torch/autograd/function.py, unchanged since
#: torch 0.4): what tells it from any other double backward that raises.
ONCE_DIFFERENTIABLE_ERROR = "marked with @once_differentiable"


def once_differentiable(op: OpDef, inputs: Inputs) -> bool:
    """Whether the Function's double backward raises because its backward (or one it calls) is
    decorated with @once_differentiable; asked only of a failing second_order row."""
    exc = double_backward_raises(op.function, inputs.clone())
    return exc is not None and ONCE_DIFFERENTIABLE_ERROR in str(exc)


def missing_second_order(ctx: CaseContext, op: OpDef, inputs: Inputs, exc: BaseException,
                         seconds: float) -> None:
    """The row for a Function (second_order: auto) whose double backward raises.

    The reference decides: where it can be differentiated twice, the Function lacks a
    capability (`warn`, or a failure when required); where it cannot either, or there is no
    reference, second order does not apply to this op (a declared skip).
    """
    if op.reference is None or double_backward_raises(op.reference, inputs) is not None:
        ctx.row("base", "second_order", SKIP, seconds=seconds, declared=True,
                reason="second_order_unsupported", note=first_line(exc))
    else:
        ctx.capability_row("base", "second_order", "second_order", seconds=seconds,
                           hint="second_order_missing", reason="second_order_missing",
                           note=first_line(exc))


def double_backward(g: Callable[..., Any], g_inputs: Inputs, gen: torch.Generator | None = None
                    ) -> tuple[BaseException | None, jac.Backward | None]:
    """Run the gradient function once and backward through it: what that raised, or (None and)
    the graph kept for the second_order check's probes (one forward and backward fewer).

    gen: backward runs along a random unit probe drawn from it, and the graph keeps the result
    as its first vector-Jacobian product (the probes' first, one double backward fewer);
    without it, along ones."""
    wrt = [g_inputs.args[i] for i in g_inputs.diff_index]
    try:
        with torch.enable_grad():
            grads = list(g(*g_inputs.args))
            # every gradient is a row of the Jacobian: one that does not require grad is a
            # double backward that dropped its dependence on the inputs, not a constant
            bw = jac.Backward(grads, wrt, every_output=True)
            v = jac.unit_probe(bw.n_out, gen) if gen is not None else None
            weights = bw.split(v) if v is not None else [None] * len(grads)
            # real views: Re(sum(conj(w) * gr)) for a complex gradient (jac.realview)
            total = sum((jac.realview(gr) * jac.realview(w).to(gr.real)).sum()
                        if w is not None else jac.realview(gr).sum()
                        for gr, w in zip(grads, weights, strict=True))
            assert isinstance(total, Tensor)
            # .backward() rather than autograd.grad: a once_differentiable error node has no
            # edges to the inputs, so autograd.grad(inputs=...) would never run (or raise) it.
            total.backward(retain_graph=True)
            if v is not None:
                bw.first = (v, [t.grad for t in wrt])
    except Exception as exc:
        return exc, None
    finally:
        for t in g_inputs.args:
            if isinstance(t, Tensor):
                t.grad = None
    return None, bw


def name_grad_outputs(findings: Sequence[Finding], n_args: int) -> None:
    """Findings on the gradient function's inputs past the Function's own (its grad_outputs,
    see gradient_inputs) relabelled in place: grad_output k, not input n_args + k."""
    for f in findings:
        if f.subject != "input" or f.index < n_args:
            continue
        f.subject, f.index = "grad_output", f.index - n_args
        f.worst = [replace(e, input=e.input - n_args, input_name="grad_output")
                   if e.input is not None and e.input >= n_args else e for e in f.worst]


def second_order_row(ctx: CaseContext, op: OpDef, inputs: Inputs, gen: torch.Generator,
                     first_ok: bool, outs: Sequence[Tensor] | None = None) -> None:
    """The second_order row of one case (appended to ctx.rows); outs: the Function's outputs
    on these inputs, when already made."""
    t0 = time.perf_counter()
    if op.second_order is False:
        exc = double_backward_raises(op.function, inputs.clone())
        if exc is not None:
            ctx.row("base", "second_order", PASS, seconds=time.perf_counter() - t0,
                    reason="raises_as_declared", note=type(exc).__name__)
            return
    bw = None
    bw = None
    if op.second_order is None:
        try:
            g, g_inputs = gradient_inputs(op.function, inputs, gen, outs)
            exc, bw = double_backward(g, g_inputs, gen)
        except Exception as raised:
            exc = raised
        if exc is not None and not first_ok:
            # first order is already broken: nothing can be said of second order
            ctx.row("base", "second_order", SKIP, seconds=time.perf_counter() - t0,
                    reason="first_order_failed", note=first_line(exc))
            return
        if exc is not None:
            missing_second_order(ctx, op, inputs.clone(), exc, time.perf_counter() - t0)
            return
    try:
        if bw is None:
            g, g_inputs = gradient_inputs(op.function, inputs, gen, outs)
        row = jacobian_check(ctx, "second_order", g, g_inputs,
                             op.numerical_tolerance(ctx.dtype), gen,
                             max_dense_calls=DENSE_MAX_CALLS_2ND, bw=bw, every_output=True)
        shared_with_reference(ctx, op, row, (g, g_inputs), inputs, gen)
        name_grad_outputs(row.findings, len(inputs.args))
        if op.second_order is False:
            unclaimed(row, strict=ctx.options.strict)
        elif row.failed and once_differentiable(op, inputs):
            # declared second order, yet backward is once_differentiable: autograd.grad(inputs=)
            # never reaches its error node, so the Jacobian came out missing, not raised
            row.hint = "once_differentiable"
        elif row.failed:
            row.hint = second_order_hint(row.hint, first_ok)
            if first_ok:
                blame_precision(row, ctx, op, inputs, gen, outputs=False)
            if row.hint == "second_order_only":
                # a backward that changes ctx gives another result each time it runs: its
                # second order is wrong for that reason, not for a ctx-held tensor
                row.hint = not_reentrant(op, inputs, gen) or row.hint
        if not row.failed and op.second_order is not False and first_ok:
            # only on a right first order: a gradient that ignores grad_output (and so loses
            # its graph at a subset) is the first order's failure, said there
            subset_rows(ctx, op, inputs)
    except Exception as exc:
        if op.second_order is False:  # raised on a later probe (qpth: in-place on a rerun)
            ctx.row("base", "second_order", PASS, seconds=time.perf_counter() - t0,
                    reason="raises_as_declared", note=type(exc).__name__)
        else:
            ctx.crash_row("base", "second_order", exc, seconds=time.perf_counter() - t0)


def shared_with_reference(ctx: CaseContext, op: OpDef, row: CheckRow,
                          grad_fn: tuple[Callable[..., Any], Inputs], inputs: Inputs,
                          gen: torch.Generator) -> None:
    """A failing second_order row passes (reason `reference_surrogate`) where the reference's
    double backward fails the same finite differences and agrees with the Function's: both
    NaN past a domain (pow of a negative base), a surrogate's: the math's, not the
    Function's (numerical.surrogate_by_reference, on the two gradient functions)."""
    if not row.failed or op.reference is None:
        return
    g, g_inputs = grad_fn
    theirs = gradient_function(op.reference, len(inputs.args), inputs.diff_index, inputs.kwargs)
    surrogate_by_reference(ctx, row, g, theirs, g_inputs, op.numerical_tolerance(ctx.dtype), gen)


def subset_rows(ctx: CaseContext, op: OpDef, inputs: Inputs) -> None:
    """Second order with one differentiable input at a time, where the case has several (the
    others not requiring grad): the double backward of input i's gradient, along one random
    probe, against the same derivatives with every input requiring grad, which the base row
    checked (no finite differences: the two are equal by the math).  A first backward that
    returns only the needed gradients, packed, and a double backward that unpacks them by
    position goes wrong only there (the held-out bug catalogue's cueq264).  Where the full set's
    double backward raises, the base row's question: no row; where only the subset's does, an
    error."""
    if len(inputs.diff_index) < 2:
        return
    t0 = time.perf_counter()
    for i in inputs.diff_index:
        try:
            want = probed(op.function, inputs.clone(), i)
        except Exception:
            continue  # the base row's question
        try:
            got = probed(op.function, inputs.clone(requires_grad={i}), i)
        except Exception as exc:
            # raises only where the other inputs do not require grad: an error, as the first
            # order's requires_grad variants make it (a gradient penalty with part of the
            # inputs frozen crashes; xitorch's quad raises so at both orders)
            ctx.row(f"requires_grad=[{i}]", "second_order", ERROR,
                    seconds=time.perf_counter() - t0, hint="requires_grad_subset",
                    note=first_line(exc))
            continue
        diffs = [dg.compare(a, b, op.numerical_tolerance(ctx.dtype), scaled=True)
                 for a, b in zip(got, want, strict=True)]
        bad = [d for d in diffs if not d.ok]
        ctx.row(f"requires_grad=[{i}]", "second_order",
                policy.status("second_order", "requires_grad_subset") if bad else PASS,
                seconds=time.perf_counter() - t0, hint="requires_grad_subset" if bad else "",
                max_abs_err=max((d.stats.max_abs for d in bad), default=None),
                max_rel_err=max((d.stats.max_rel for d in bad), default=None))


def probed(fn: Callable[..., Any], inputs: Inputs, i: int) -> list[Tensor]:
    """The double backward of input i's gradient (i requiring grad) along a seeded random probe
    u: d<g_i, u>/d(x_i), then d<g_i, u>/d(grad_outputs); zeros for what it does not reach."""
    gen = torch.Generator().manual_seed(SUBSET_SEED)
    # the outputs' shapes from a run on copies: a Function that writes into its inputs leaves
    # the probed ones as they were
    g, g_inputs = gradient_inputs(fn, inputs, gen, call(fn, inputs.clone()))
    # an output that does not depend on input i (a covariance beside a mean, when only the
    # measurements require grad) takes a grad_output that does not require grad: not asked
    wrt = [g_inputs.args[i], *g_inputs.args[len(inputs.args):]]
    asked = [w for w in wrt if w.requires_grad]
    with torch.enable_grad():
        # non-leaf copies (as the Function is called in a graph): an in-place write is legal
        grad = g(*(a.clone() if isinstance(a, Tensor) else a
                   for a in g_inputs.args))[inputs.diff_index.index(i)]
        # input i's probe from a seed of its own: the same whichever inputs require grad
        u = torch.randn(grad.shape, dtype=grad.dtype,
                        generator=torch.Generator().manual_seed(SUBSET_SEED + 1 + i))
        got = iter(torch.autograd.grad((grad * u).sum(), asked, allow_unused=True))
    out = [next(got) if w.requires_grad else None for w in wrt]
    return [torch.zeros_like(w) if o is None else o.detach() for o, w in zip(out, wrt, strict=True)]


#: The seeds of subset_rows' grad_outputs and probes (the same for every subset and the full
#: set, so their derivatives are comparable).
SUBSET_SEED = 4242


def unclaimed(row: CheckRow, *, strict: bool) -> None:
    """The row of an op declaring `second_order: false` whose double backward runs: right, it
    passes (the matrix shows what it has); silently wrong, policy's level for
    `second_order_claimed` (a warn, a failure when strict: the op said not to rely on it, but a
    Hessian or gradient penalty through it would be wrong without an error, where
    once_differentiable raises)."""
    if row.failed and row.status != ERROR:
        row.status = policy.status("second_order", "second_order_claimed", strict=strict)
        row.hint = "second_order_claimed"
    elif not row.failed:
        row.reason = row.reason or "runs_undeclared"


def precision_hint(ctx: CaseContext, op: OpDef, inputs: Inputs, gen: torch.Generator, *,
                   outputs: bool = False) -> str:
    """'precision_loss' when the Function's outputs (outputs=True: what the jacobian check
    differentiates) or first-order gradients (what second_order differentiates), against the
    reference's, are only float32-accurate: finite differences of a float32-accurate function
    are rounding noise (1e-7 over a step of 1e-6), so the finite-difference check's failure is
    no bug of the derivative; else ''."""
    if op.reference is None:
        return ""
    got = run_once(op.function, inputs.clone(), None, gen)
    if got.error is not None:
        return ""
    want = run_once(op.reference, inputs.clone(), got.grad_outs64, gen)
    if want.error is not None:
        return ""
    pairs = zip(got.outs, want.outs, strict=False) if outputs else zip(got.grads, want.grads,
                                                                        strict=False)
    for g, w in pairs:
        if g is not None and w is not None and g.shape == w.shape:
            d = dg.compare(g, w, op.tolerance(ctx.dtype), scaled=True)
            if level_hint(d, ctx.dtype) == "precision_loss":
                return "precision_loss"
    return ""


def blame_precision(row: CheckRow, ctx: CaseContext, op: OpDef, inputs: Inputs,
                    gen: torch.Generator, *, outputs: bool) -> None:
    """A failing finite-difference row whose hint noise could have given: precision_loss (and
    no noise-made hint on its findings) when what it differentiates is float32-accurate."""
    if not row.failed or row.hint not in NOISE_HINTS:
        return
    if precision_hint(ctx, op, inputs, gen, outputs=outputs):
        precision_blamed(row)


def not_reentrant(op: OpDef, inputs: Inputs, gen: torch.Generator) -> str:
    """The contract's re-entrancy hint when the Function's backward, run twice on one graph,
    differs beyond the float64 tolerance (it changes ctx or saved state), else "".  Asked only
    of a failing second_order row (one forward and two backwards)."""
    work = inputs.clone()
    run = run_once(op.function, work, None, gen)
    if run.error is not None or not run.grad_outs64:
        return ""
    gos = [g.to(o.dtype).to(o.device) for g, o in zip(run.grad_outs64, run.outs, strict=True)]
    found, _ = backward_again(run.outs, work, gos, run.grads, op.tolerance("float64"))
    return found[0].hint if found else ""

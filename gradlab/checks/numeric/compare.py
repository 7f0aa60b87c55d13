"""The forward and gradient checks: the Function's run against the reference's (or the base run's)
on the same values and the same grad_outputs."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab import tf32
from gradlab.cases import Inputs, plain_copy
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import hints, policy
from gradlab.checks.diagnosis.errormap import error_map
from gradlab.checks.diagnosis.patterns import find_pattern
from gradlab.checks.diagnosis.regions import value_region
from gradlab.checks.numeric import jacobian as jac
from gradlab.checks.numeric.context import CaseContext
from gradlab.checks.numeric.execute import Run
from gradlab.checks.numeric.lowprec import (
    Lows,
    Own,
    own_error,
    reference_in_dtype,
)
from gradlab.model import DEFAULT_TOLERANCES, Tolerance
from gradlab.results import PASS, CheckRow, Finding, Pattern


def compare_runs(ctx: CaseContext, variant: str, got: Run, want: Run, inputs: Inputs,
                 tol: Tolerance, *, checks: frozenset[str], low: Lows | None = None,
                 design: bool = True) -> list[CheckRow]:
    """forward and gradient rows for `got` (the Function) against `want` (reference/base).

    low: the reference's run in the checked dtype (gradlab.checks.numeric.lowprec): when given, each
    tensor is judged by the low-precision criterion against `want`, the float64 gold (design:
    the user's float64 tolerance, an error by design, added to its limit)."""
    rows: list[CheckRow] = []
    if got.error is not None and got.stage == "forward":
        rows.append(ctx.crash_row(variant, "forward", got.error))
        return rows
    # the reference in float32 on the same values, asked only by a float64 result that looks
    # float32-accurate (float32_accurate)
    f32 = functools.cache(lambda: float32_reference(ctx, inputs, want))
    if "forward" in checks:
        if want.error is not None and want.stage == "forward":
            rows.append(ctx.crash_row(variant, "forward", want.error, hint="",
                                      reason="reference_failed"))
        else:
            lows = [r.outs if r else None for r in low] if low else None
            rows.append(compare_outputs(ctx, variant, got.outputs_as_returned, want.outs, tol,
                                        owns(ctx, lows, want.outs, design),
                                        lambda: (f32() or (None, None))[0], inputs.args))
    if "gradient" not in checks or not inputs.diff_index:
        return rows
    if got.error is not None and (want.error is None or want.stage == "forward"):
        rows.append(ctx.crash_row(variant, "gradient", got.error))
    elif want.error is not None:
        # nothing to compare with is not a pass: the case is broken until the reference runs;
        # a backward that raises where the reference's raises too (eig's on a loss that
        # depends on the eigenvectors' phase) is the case's failure, not the Function's crash
        rows.append(ctx.crash_row(variant, "gradient", want.error, hint="",
                                  reason="reference_failed"))
    else:
        glows = [r.grads if r else None for r in low] if low else None
        rows.append(compare_grads(ctx, variant, got, want, inputs, tol,
                                  owns(ctx, glows, want.grads, design),
                                  lambda: (f32() or (None, None))[1]))
    return rows


def owns(ctx: CaseContext, lows: Sequence[Sequence[Tensor | None] | None] | None,
         gold: Sequence[Tensor | None], with_design: bool = True) -> list[Own | None] | None:
    """The criterion's measure of each tensor (None: that tensor takes the table); lows: the
    reference's runs' tensors (gradlab.checks.numeric.lowprec.reference_in_dtype), in gold's
    order."""
    if lows is None or lows[0] is None or len(lows[0]) != len(gold):
        return None
    factor = ctx.op.precision_factor
    per = [[r[k] if r is not None and len(r) == len(gold) else None for r in lows]
           for k in range(len(gold))]
    design = ctx.op.tolerances.get("float64") if with_design else None
    tf32_on = tf32_possible(ctx.dtype, ctx.device)
    return [own_error(p, w, ctx.dtype, factor, design, tf32=tf32_on) if w is not None else None
            for p, w in zip(per, gold, strict=True)]


def tf32_possible(dtype: str, device: str) -> bool:
    """Whether float32 convolutions and matmuls here may run in TF32 (a 10-bit mantissa): a
    float32 case on a GPU with a TF32 setting on (lowprec.own_error then takes TF32's unit as
    the floor where the reference's own error shows it computed in TF32)."""
    return dtype == "float32" and device.startswith("cuda") and tf32.enabled()


def float32_reference(ctx: CaseContext, inputs: Inputs, want: Run
                      ) -> tuple[list[Own | None] | None, list[Own | None] | None] | None:
    """The criterion's measure of float32 for want's outputs and gradients (the gold): the
    reference run in float32 on the same values (cast), with want's grad_outputs."""
    if ctx.op.reference is None or (not want.grad_outs64 and inputs.diff_index):
        return None
    cast = plain_copy(inputs, dtype=torch.float32)
    low = reference_in_dtype(ctx.op, cast, want.grad_outs64, torch.Generator().manual_seed(0))
    if low is None:
        return None
    side = CaseContext(ctx.target, ctx.case, "float32", ctx.device, ctx.options)
    return (owns(side, [low[0].outs], want.outs),
            owns(side, [low[0].grads], want.grads) if want.grads else None)


def float32_accurate(ctx: CaseContext, g: Tensor, w: Tensor, d: dg.Diff,
                     own32: Own | None) -> bool:
    """A float64 result outside float64's table that was computed in float32 and cast (its
    level hint is precision_loss) and is as accurate as the reference computed in float32
    (the low-precision criterion, own32; float32's table without one): a precision
    observation (policy.precision_status), not a wrong result.  So is an `approximate` one
    where another row of the case already showed a result cast from float32 (the float32
    arithmetic inside is the case's, whatever this result's last steps ran in: fairscale's
    float32 vocabulary projection, precision_loss at its base forward, an `approximate` ragged
    gradient off by 1.4e-7).  Not where the user set float64's tolerance or asked for strict
    tolerances."""
    op = ctx.op
    if ctx.dtype != "float64" or op.strict_tolerances or "float64" in op.tolerances:
        return False
    level = hints.level_hint(d, "float64")
    if level != "precision_loss" and not (
            level == "approximate" and any(r.hint == "precision_loss" for r in ctx.rows)):
        return False
    if own32 is not None and dg.compare(g, w, own32.tol).ok:
        return True
    return dg.compare(g, w, DEFAULT_TOLERANCES["float32"], scaled=True).ok


def float32_within(ctx: CaseContext, g: Tensor, w: Tensor) -> bool:
    """A float64 run's result within float64's table that was computed in float32 all the same
    (hints.computed_in_float32: float32 by its dtype or its values, off the reference by
    float32's rounding): a precision observation like float32_accurate's, which a table
    passing it would keep silent.  Only against a reference (the Function's own run is no
    measure of its precision), and not where float32_accurate would not speak either."""
    op = ctx.op
    if (ctx.dtype != "float64" or op.reference is None or op.strict_tolerances
            or "float64" in op.tolerances or g.shape != w.shape or not g.is_floating_point()):
        return False
    share = dg.float32_made(g)
    if share < hints.FLOAT32_CAST_SHARE:
        return False
    gd, wd = g.detach().double(), w.detach().double()
    finite = torch.isfinite(gd) & torch.isfinite(wd)
    scale = float(wd[finite].abs().max()) if bool(finite.any()) else 0.0
    if scale <= 0:
        return False
    rel = float((gd - wd)[finite].abs().max()) / scale
    return hints.computed_in_float32(share, rel, ctx.dtype)


def precision_row(ctx: CaseContext, variant: str, check: str, worst: tuple[float, float],
                  findings: list[Finding]) -> CheckRow:
    """The row of a float32-accurate float64 result: one warn per op and case carrying the
    evidence, the case's later such rows passes that point to it (policy.precision_status)."""
    # the evidence row: the case's one not failing for precision_loss (a failure keeps its hint)
    seen = any(r.hint == "precision_loss" and not r.failed for r in ctx.rows)
    return ctx.row(variant, check, policy.precision_status(check, seen), max_abs_err=worst[0],
                   max_rel_err=worst[1], hint="" if seen else "precision_loss",
                   findings=[] if seen else findings, reason="float32_accurate" if seen else "")


def pick(owns_: list[Own | None] | None, k: int) -> Own | None:
    """The k-th tensor's measure, when there is one."""
    return owns_[k] if owns_ is not None and k < len(owns_) else None


def judged(g: Tensor, w: Tensor, tol: Tolerance, own: Own | None) -> dg.Diff:
    """g against w: by the criterion (own's tolerance, max abs error against the gold; the
    reference's rounding as the factor hint's noise) or by the table (scaled); under the
    criterion a tensor within the table passes too (policy.criterion_status)."""
    if own is None:
        return dg.compare(g, w, tol, scaled=True)
    d = dg.compare(g, w, own.tol)
    d.noise = own.noise
    if d.ok:
        return d
    table = dg.compare(g, w, tol, scaled=True)
    within = policy.criterion_status(d.stats.max_abs, own.tol.atol, table.ok) == policy.PASS
    return table if within else d


def with_own(f: Finding, own: Own | None) -> Finding:
    """The criterion's numbers on a finding it failed (the reference's own error, k)."""
    if own is not None:
        f.own_error, f.allowed_factor = own.error, own.factor
    return f


def compared_aside(ctx: CaseContext, dtype: str, got: Run, want: Run, inputs: Inputs,
                   tol: Tolerance, low: Lows | None = None,
                   design: bool = True) -> list[CheckRow]:
    """forward and gradient rows of `got` against `want`, made on a context of their own (not
    in ctx.rows): for checks that fold them into one row of their own (low: as compare_runs)."""
    side = CaseContext(ctx.target, ctx.case, dtype, ctx.device, ctx.options)
    return compare_runs(side, "base", got, want, inputs, tol,
                        checks=frozenset({"forward", "gradient"}), low=low, design=design)


def compare_outputs(ctx: CaseContext, variant: str, got: list[Tensor], want: list[Tensor],
                    tol: Tolerance, own: list[Own | None] | None = None,
                    f32: Callable[[], list[Own | None] | None] = lambda: None,
                    args: Sequence[Any] = ()) -> CheckRow:
    """The forward row: every output against the reference's (args: the inputs, whose values
    may name where a wrong output lies)."""
    if len(got) != len(want):
        return ctx.row(variant, "forward", policy.wrong("forward"), hint="forward",
                       findings=[Finding("outputs", -1, "forward", got=len(got),
                                         want=len(want))])
    worst = (0.0, 0.0)
    precise: list[Finding] = []  # float32-accurate outputs (float32_accurate, float32_within)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            return ctx.row(variant, "forward", policy.wrong("forward"), hint="forward",
                           findings=[Finding("output", k, "forward", got=list(g.shape),
                                             want=list(w.shape))])
        ok = own[k] if own else None
        d = judged(g, w, tol, ok)
        worst = (max(worst[0], d.stats.max_abs), max(worst[1], d.stats.max_rel))
        if (float32_within(ctx, g, w) if d.ok
                else float32_accurate(ctx, g, w, d, pick(f32(), k))):
            precise.append(Finding("output", k, "precision_loss", shape=tuple(g.shape),
                                   stats=d.stats))
            with_passing(precise[-1], g, w, tol)
            continue
        if not d.ok:
            hint = "non_finite" if d.stats.nonfinite else "forward"
            finding = with_own(Finding("output", k, hint, shape=tuple(g.shape), stats=d.stats,
                                       worst=dg.output_elements(d, k, g.shape),
                                       pattern=pattern_of(d, g.shape, args)), ok)
            if hint == "forward":  # the row says forward; the finding says the error's level
                with_level(finding, g, w, d, tol, ctx.dtype)
            return ctx.row(variant, "forward", policy.wrong("forward"), max_abs_err=d.stats.max_abs,
                           max_rel_err=d.stats.max_rel, hint=hint, findings=[finding])
    if precise:
        return precision_row(ctx, variant, "forward", worst, precise)
    return ctx.row(variant, "forward", PASS, max_abs_err=worst[0], max_rel_err=worst[1])


def pattern_of(d: dg.Diff, shape: Sequence[int], args: Sequence[Any] = ()) -> Pattern | None:
    """The pattern of a comparison's wrong elements, laid out as the tensor: by position, else
    by the values of one of `args` (a case's inputs) laid out the same way."""
    if d.mask is None:
        return None
    mask = d.mask.reshape(tuple(shape))
    return find_pattern(mask) or value_region(mask, args)


def with_level(f: Finding, g: Tensor, w: Tensor, d: dg.Diff, tol: Tolerance,
               dtype: str) -> bool:
    """Give `f` the level hint of its error (precision_loss, approximate) and the tolerance
    that would pass, when the level tells; True when it did."""
    level = hints.level_hint(d, dtype)
    if not level:
        return False
    f.hint = level
    with_passing(f, g, w, tol)
    return True


def with_passing(f: Finding, g: Tensor, w: Tensor, tol: Tolerance) -> None:
    """Give `f` the tolerance under which `g` would pass against `w` (None: none would, or
    the one in use does already: a warn within it needs no looser one)."""
    passing = dg.passing_tolerance(g, w, tol)
    looser = passing is not None and (passing.atol > tol.atol or passing.rtol > tol.rtol)
    f.passing_tolerance = (passing.atol, passing.rtol) if looser else None


def grad_finding(i: int, g: Tensor, w: Tensor, d: dg.Diff, want: Run, inputs: Inputs,
                 tol: Tolerance, dtype: str = "") -> Finding:
    """A wrong gradient of input i, with the hint its error suggests (hints.gradient_hint
    decides; the transpose and the other inputs' gradients are compared only when asked)."""
    factor = hints.factor_hint(d)
    level = "" if factor else hints.level_hint(d, dtype)
    f = Finding("input", i, factor, shape=tuple(g.shape), stats=d.stats,
                worst=dg.input_elements(d, i, g.shape),
                pattern=pattern_of(d, g.shape, inputs.args))
    pair = functools.cache(lambda: dg.transposed_dims(g, w, tol))
    other = functools.cache(lambda: swapped_with(i, g, want, inputs, tol))
    f.hint = hints.gradient_hint(factor, level, f.pattern, lambda: pair() is not None,
                                 lambda: other() is not None)
    if level and f.hint == level:
        with_passing(f, g, w, tol)
    elif f.hint == "transposed":
        f.dims = pair()
    elif f.hint == "swapped":
        f.equals_input = other()
    return f


def swapped_with(i: int, g: Tensor, want: Run, inputs: Inputs, tol: Tolerance) -> int | None:
    """The first other differentiable input whose expected gradient `g` (input i's) matches."""
    for k2, j in enumerate(inputs.diff_index):
        other = want.grads[k2]
        if j != i and other is not None and other.shape == g.shape and dg.compare(
                g, other, tol).ok:
            return j
    return None


def compare_grads(ctx: CaseContext, variant: str, got: Run, want: Run, inputs: Inputs,
                  tol: Tolerance, own: list[Own | None] | None = None,
                  f32: Callable[[], list[Own | None] | None] = lambda: None) -> CheckRow:
    """The gradient row: every differentiable input's gradient against the expected one."""
    worst = (0.0, 0.0)
    findings: list[Finding] = []
    precise: list[Finding] = []  # float32-accurate gradients (float32_accurate)
    for k, i in enumerate(inputs.diff_index):
        g, w = got.grads[k], want.grads[k]
        shape = tuple(inputs.args[i].shape)
        if g is None:
            if w is not None and bool(w.detach().abs().sum() > 0):
                findings.append(Finding("input", i, "missing", shape=shape))
            continue
        if w is None:
            w = torch.zeros_like(g)
        if g.shape != w.shape:
            findings.append(Finding("input", i, "wrong_shape", shape=shape, got=list(g.shape),
                                    want=list(w.shape)))
            continue
        ok = own[k] if own else None
        d = judged(g, w, tol, ok)
        worst = (max(worst[0], d.stats.max_abs), max(worst[1], d.stats.max_rel))
        if (float32_within(ctx, g, w) if d.ok
                else float32_accurate(ctx, g, w, d, pick(f32(), k))):
            precise.append(Finding("input", i, "precision_loss", shape=shape, stats=d.stats))
            with_passing(precise[-1], g, w, tol)
        elif not d.ok:
            findings.append(with_own(grad_finding(i, g, w, d, want, inputs,
                                                  ok.tol if ok else tol, ctx.dtype), ok))
            if ctx.options.error_maps:
                findings[-1].error_map = error_map(g, w)
    if precise and not findings:
        return precision_row(ctx, variant, "gradient", worst, precise)
    status = policy.wrong("gradient") if findings else PASS
    hint = next((f.hint for f in findings if f.hint), "")
    return ctx.row(variant, "gradient", status, max_abs_err=worst[0], max_rel_err=worst[1],
                   hint=hint, findings=findings)


def chain_rule_ignored(fn: Callable[..., Any], inputs: Inputs, gen: torch.Generator) -> bool:
    """True when backward(2v) == backward(v) != 0: the gradient ignores grad_output."""
    try:
        bw = jac.build_backward(fn, inputs, inputs.diff_index)
        v = jac.unit_probe(bw.n_out, gen) + 0.5
        g1, g2 = bw.vjp(v), bw.vjp(2 * v)
    except Exception:
        return False
    for a, b in zip(g1, g2, strict=True):
        if a is None or b is None or not bool(a.abs().sum() > 0):
            continue
        if torch.allclose(jac.realview(a).double(), jac.realview(b).double(), rtol=1e-6,
                          atol=1e-12):
            return True
    return False

"""Second order at the special variant's planted values: where a backward special-cases a
point (sinc's derivative guarded by a select at x = 0, a Taylor branch of a rotation's
exponential near angle 0, prod's branch for zeros), the first derivative there can be right
while the second is not, and the base case's second_order row, on drawn values, never lands
on the point.  The Function's double backward along seeded probes (second_order.probed) is
compared with the reference's at the special variant's inputs, analytically: no finite
differences.

Judged only where the reference's own double backward is finite there and continuous: moved
off the planted values by NUDGE (absolute, both ways), it changes by less than
domain.ILL_CONDITIONED.  At a kink (relu at 0: no second derivative, only a convention) or a
pole nothing is said.  Asked only where the base case's second_order row passed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.families.domain import ILL_CONDITIONED
from gradlab.checks.families.values import special_inputs
from gradlab.checks.families.variants import families
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.numerical import runs_agree
from gradlab.checks.numeric.second_order import SUBSET_SEED, probed
from gradlab.model import OpDef
from gradlab.results import ERROR, PASS
from gradlab.select import variant_picked

#: The absolute distance the planted values are moved to test the reference's continuity:
#: far above float64's resolution at O(1) values, far inside any kink's neighbourhood that a
#: smooth second derivative (sinc's: -pi^2/3 + O(x^2)) would cross.
NUDGE = 1e-4


def special_second_order(ctx: CaseContext, op: OpDef, inputs: Inputs) -> None:
    """The second_order row of the special variant (appended to ctx.rows), where the base
    case's second_order row passed outright (not with a reason: a double backward that raises,
    a surrogate's) and the reference is judgeable at the planted values."""
    base = [r for r in ctx.rows if r.check == "second_order" and r.variant == "base"]
    if op.reference is None or op.second_order is False or not base or (
            base[0].status != PASS or base[0].reason):
        return
    names = ctx.options.variant_names
    if "special" not in families(ctx) or (names is not None
                                          and not variant_picked("special", names)):
        return
    planted = special_inputs(ctx.case, inputs)
    if planted is None or len(inputs.diff_index) == 0:
        return
    t0 = time.perf_counter()
    want = _all_probed(op.reference, planted)
    if want is None:
        return
    try:
        got: list[Tensor] | None = _all_probed(op.function, planted, raising=True)
    except Exception as exc:  # the base case's double backward ran: a crash only here
        if _judgeable(op, inputs, planted, want):
            ctx.row("special", "second_order", ERROR, seconds=time.perf_counter() - t0,
                    hint="special_only", note=first_line(exc))
        return
    tol = op.tolerance("float64")
    bad = _differ(got, want, tol) or []
    if bad and not (_judgeable(op, inputs, planted, want) and _differ(
            _all_probed(op.function, inputs), _all_probed(op.reference, inputs), tol) == []):
        # not judgeable there, or off at the case's own values too (an approximate gradient,
        # within the finite differences' tolerance there): no failure only at the planted
        # values (asked only of a difference: a passing row costs two double backwards)
        return
    ctx.row("special", "second_order",
            policy.status("second_order", "special_only") if bad else PASS,
            seconds=time.perf_counter() - t0, hint="special_only" if bad else "",
            max_abs_err=max((d.stats.max_abs for d in bad), default=None),
            max_rel_err=max((d.stats.max_rel for d in bad), default=None))


def _judgeable(op: OpDef, inputs: Inputs, planted: Inputs, want: Sequence[Tensor]) -> bool:
    """The first order at the planted values agrees (else the special variant's own row says
    so) and the reference's double backward is continuous there (no kink)."""
    return (op.reference is not None
            and runs_agree(op.function, op.reference, planted, op.tolerance("float64"),
                           SUBSET_SEED)
            and _continuous(op.reference, inputs, planted, want))


def _differ(got: Sequence[Tensor] | None, want: Sequence[Tensor] | None,
            tol: Any) -> list[dg.Diff] | None:
    """The comparisons of got against want that fail; None where either is missing (raised or
    not finite) or their counts differ: nothing can be said."""
    if got is None or want is None or len(got) != len(want):
        return None
    return [d for d in (dg.compare(g, w, tol, scaled=True) for g, w in zip(got, want,
                                                                          strict=True))
            if not d.ok]


def _all_probed(fn: Callable[..., Any], inputs: Inputs, raising: bool = False
                ) -> list[Tensor] | None:
    """Every differentiable input's double backward along its seeded probe (probed), in
    order; None where it raises (unless `raising`) or is not finite."""
    try:
        out = [t for i in inputs.diff_index for t in probed(fn, inputs.clone(), i)]
    except Exception:
        if raising:
            raise
        return None
    if not raising and not all(bool(torch.isfinite(t).all()) for t in out):
        return None
    return out


def _continuous(ref: Callable[..., Any], inputs: Inputs, planted: Inputs,
                want: Sequence[Tensor]) -> bool:
    """Whether the reference's double backward moves by less than ILL_CONDITIONED (relative to
    its largest value, at least 1) when the planted elements move by +-NUDGE."""
    scale = max([1.0, *(float(w.abs().max()) for w in want if w.numel())])
    for sign in (1.0, -1.0):
        moved = planted.clone()
        for i in planted.tensor_index:
            new, old = planted.args[i].detach(), inputs.args[i].detach()
            if new.is_floating_point() and new.shape == old.shape:
                shift = torch.where(new != old, sign * NUDGE, 0.0).to(new.dtype)
                moved.args[i] = copy_like(new + shift, requires_grad=planted.args[i].requires_grad)
        near = _all_probed(ref, moved)
        if near is None or len(near) != len(want) or any(
                n.numel() and float((n - w).abs().max()) > ILL_CONDITIONED * scale
                for n, w in zip(near, want, strict=True)):
            return False
    return True

"""The autocast check: the case under torch.autocast against the reference under the same autocast.

Forward runs inside `torch.autocast(device, dtype)` (bfloat16 on the CPU, float16 on CUDA) on
float32 inputs, backward after it, as torch's mixed-precision recipe runs a training step.
Outputs and gradients are compared with the reference's, run the same way, at the tolerance of
the autocast dtype (loosened to a user's float32 tolerance: an error by design stays).  A
Function that raises where the reference runs (the classic: a backward multiplying a half
grad_output by a float saved tensor, with no torch.amp.custom_fwd/custom_bwd) lacks a
capability: `warn`, or a failure when the spec requires autocast.  A wrong result is a
failure.  Without a reference, the Function's own float32 run is the expectation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gradlab.cases import Inputs, materialize, torch_dtype
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import autocast_hint, plain_hint
from gradlab.checks.numeric.compare import compared_aside
from gradlab.checks.numeric.context import CaseContext, crash_location, first_line
from gradlab.checks.numeric.execute import run_once
from gradlab.checks.numeric.lowprec import applies, reference_in_dtype
from gradlab.model import AUTOCAST_DTYPES
from gradlab.results import PASS, SKIP

#: The dtype autocast's inputs are in: autocast casts float32 to its low-precision dtype and
#: leaves float64 alone.
INPUT_DTYPE = "float32"


@dataclass(frozen=True)
class Autocast:
    """`fn` called inside torch.autocast (its backward, run later, is outside).  A class, not a
    closure, so that it pickles like the Function it wraps."""

    fn: Callable[..., Any]
    device: str
    dtype: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=self.device, dtype=torch_dtype(self.dtype)):
            return self.fn(*args, **kwargs)


def autocast_row(ctx: CaseContext, seed: int, gen: torch.Generator, first_ok: bool) -> None:
    """The autocast row of one case (appended to ctx.rows); first_ok: first order passed (a
    wrong result under autocast is then autocast's alone)."""
    t0 = time.perf_counter()
    dtype = AUTOCAST_DTYPES.get(ctx.device)
    if dtype is None:
        return
    inputs = materialize(ctx.case, INPUT_DTYPE, ctx.device, seed)
    op = ctx.op
    if any(isinstance(a, torch.Tensor) and a.is_complex() for a in inputs.args):
        # autocast casts real floating tensors only: a complex one runs as without it
        ctx.row("base", "autocast", SKIP, declared=True, reason="autocast_complex", dtype=dtype,
                seconds=time.perf_counter() - t0)
        return
    # the outputs as forward returned them, should backward write into one it saved (the case
    # rows report that; the forward comparison must not blame it)
    got = run_once(Autocast(op.function, ctx.device, dtype), inputs.clone(), None, gen,
                   keep_outputs=True)
    gos = got.grad_outs64 or None
    want = (run_once(Autocast(op.reference, ctx.device, dtype), inputs.clone(), gos, gen)
            if op.reference is not None else run_once(op.function, inputs.clone(), gos, gen))
    kw: dict[str, Any] = {"dtype": dtype, "seconds": 0.0}
    if want.error is not None and op.reference is not None:
        # nothing to compare with: autocast does not apply to this op
        ctx.row("base", "autocast", SKIP, declared=True, reason="autocast_unsupported",
                note=first_line(want.error), **kw)
    elif want.error is not None or not first_ok:
        # declared: the first-order rows already fail the run (and say why)
        ctx.row("base", "autocast", SKIP, declared=True, reason="first_order_failed",
                note=first_line(want.error) if want.error is not None else "", **kw)
    elif got.error is not None:
        ctx.capability_row("base", "autocast", "autocast", hint="autocast_missing",
                           reason="autocast_missing", note=first_line(got.error),
                           crash_location=crash_location(got.error), **kw)
    else:
        compared_row(ctx, got, want, inputs, dtype, kw)
    ctx.rows[-1].seconds = time.perf_counter() - t0


def compared_row(ctx: CaseContext, got: Any, want: Any, inputs: Inputs, dtype: str,
                 kw: dict[str, Any]) -> None:
    """One autocast row from the forward and gradient comparisons (made on the side)."""
    rows = compared_aside(ctx, dtype, got, want, inputs,
                          ctx.op.autocast_tolerance(dtype, INPUT_DTYPE))
    if any(r.failed for r in rows) and applies(ctx.op, dtype):
        # the low-precision criterion: against the reference in float64 on the same values,
        # as far off as the reference under the same autocast (gradlab.checks.numeric.lowprec); a
        # pass by either is a pass (the fixed table keeps an error by design the user allowed)
        gold = run_once(ctx.op.reference, inputs.clone(dtype=torch.float64),  # type: ignore[arg-type]
                        got.grad_outs64 or None, torch.Generator().manual_seed(0))
        judged = (compared_aside(ctx, dtype, got, gold, inputs,
                                 ctx.op.autocast_tolerance(dtype, INPUT_DTYPE), (want, None),
                                 design=False)
                  if gold.error is None else rows)
        rows = judged if not any(r.failed for r in judged) else rows
    failed = [r for r in rows if r.failed]
    errs = [r.max_abs_err for r in rows if r.max_abs_err is not None]
    rels = [r.max_rel_err for r in rows if r.max_rel_err is not None]
    hint = autocast_hint(bool(failed), lambda: outside_autocast(ctx, inputs,
                                                                got.grad_outs64 or None))
    ctx.row("base", "autocast", policy.status("autocast", hint) if failed else PASS, hint=hint,
            max_abs_err=max(errs, default=None), max_rel_err=max(rels, default=None),
            findings=[f for r in failed for f in r.findings], **kw)


def outside_autocast(ctx: CaseContext, inputs: Inputs, gos: Any) -> str:
    """The hint of what the Function gets wrong WITHOUT autocast on the same float32 values
    (against the float64 reference), "" when it is right there: only then is a failure
    autocast's alone (`autocast_only`); else the plain run's diagnosis is the bug's."""
    if ctx.op.reference is None:
        return ""
    got = run_once(ctx.op.function, inputs.clone(), gos, torch.Generator().manual_seed(0),
                   keep_outputs=True)
    want = run_once(ctx.op.reference, inputs.clone(dtype=torch.float64), gos,
                    torch.Generator().manual_seed(0))
    if got.error is not None or want.error is not None:
        return ""
    low = (reference_in_dtype(ctx.op, inputs, gos or got.grad_outs64,
                              torch.Generator().manual_seed(0))
           if applies(ctx.op, INPUT_DTYPE) else None)
    rows = [r for r in compared_aside(ctx, INPUT_DTYPE, got, want, inputs,
                                      ctx.op.tolerance(INPUT_DTYPE), low) if r.failed]
    return plain_hint([r.hint for r in rows])

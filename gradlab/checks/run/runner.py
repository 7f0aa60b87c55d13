"""The rows of one work item: a case in one dtype on one device (its base rows, made by
gradlab.checks.numeric.base, and its variants), or a case's numerical checks; torch state kept,
repro inputs saved, what escapes a check its error row.  gradlab.checks.run.driver plans the
items and runs them."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import replace

import torch

from gradlab import ops, tf32
from gradlab.cases import (
    INPUT_FREED,
    InputFreed,
    Inputs,
    NonLeafInputs,
    case_seed,
    materialize,
)
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import crash_hint
from gradlab.checks.families.edges import edge_rows
from gradlab.checks.families.explore import explore_row
from gradlab.checks.families.special_order import special_second_order
from gradlab.checks.families.variants import Baseline, variant_rows
from gradlab.checks.numeric import lowprec
from gradlab.checks.numeric.autocast import autocast_row
from gradlab.checks.numeric.base import against_reference, base_contract, base_of, reference_run
from gradlab.checks.numeric.capabilities import capability_rows
from gradlab.checks.numeric.context import (
    CaseContext,
    crash_location,
    first_line,
    raised_in_user_code,
)
from gradlab.checks.numeric.contract import as_differentiated
from gradlab.checks.numeric.execute import Run, as_dtypes_of, rng_judged, rng_replayed, run_once
from gradlab.checks.numeric.forward_ad import forward_ad_row
from gradlab.checks.numeric.jacobian import build_backward
from gradlab.checks.numeric.numerical import jacobian_check, surrogate_by_reference
from gradlab.checks.numeric.opcheck import opcheck_rows
from gradlab.checks.numeric.second_order import blame_precision, second_order_row
from gradlab.checks.run.options import Options
from gradlab.checks.run.plan import Item, enabled_checks
from gradlab.model import Case, Target
from gradlab.repro import save_failures
from gradlab.results import ERROR, SKIP, SPEC_INPUTS, CheckRow, Finding
from gradlab.torchstate import RngState, TorchState, case_rng, preserved_rng


def case_rows(target: Target, case: Case, dtype: str, device: str, options: Options,
              seed: int) -> list[CheckRow]:
    """All rows of one case in one dtype on one device (base run plus variants)."""
    ctx = CaseContext(target, case, dtype, device, options)
    checks = enabled_checks(target, options)
    op = target.op
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    try:
        inputs = materialize(case, dtype, device, seed)
    except Exception as exc:
        ctx.row("base", "forward", ERROR, reason="inputs_failed", note=first_line(exc))
        return ctx.rows
    # copied before the Function runs: a forward that writes into its inputs must not change
    # what the reference sees (low_inputs: the values as drawn, for gradlab.checks.numeric.lowprec)
    ref_inputs = inputs.clone(dtype=torch.float64)
    low_inputs = inputs.clone() if op.reference is not None and dtype != "float64" else None
    got = run_once(op.function, inputs, None, gen, check_contract="contract" in checks)
    grad_outs, want = got.grad_outs64 or None, got
    # torch draws other numbers per dtype: a stochastic Function's reference runs in its own
    ref_inputs, low = as_dtypes_of(ref_inputs, inputs) if got.drew else ref_inputs, None
    if op.reference is not None:
        want, fallback = reference_run(op, ref_inputs, low_inputs, grad_outs, gen)
        if spec_mistake(ctx, got, want, low_inputs, gen):
            return ctx.rows
        # the variants compare what the Function differentiates (see as_differentiated)
        ctx.target = as_differentiated(target, got.outs)
        if (low_inputs is not None and not fallback and lowprec.applies(op, dtype, got.drew)
                and want.error is None and got.grad_outs64):
            low = lowprec.reference_in_dtype(op, low_inputs, got.grad_outs64, gen)
        n_rows = len(ctx.rows)
        against_reference(ctx, (got, want), (inputs, ref_inputs), low, checks, gen)
        for r in ctx.rows[n_rows:]:
            r.note = "; ".join(filter(None, [r.note, fallback]))
    elif got.error is not None:
        ctx.crash_row("base", "forward", got.error)
    tensor_list_row(ctx, inputs, checks)
    if op.reference is None and checks & {"forward", "gradient"}:
        # nothing to compare the base run with (a run against itself measures nothing): said
        # on a row of its own, without errors; the variant rows say what they compare with
        ctx.row("base", "forward", SKIP, declared=True, reason="no_reference_base")
    reusable = None
    if "contract" in checks and (got.error is None or got.contract):
        reusable = base_contract(ctx, got, want, inputs, grad_outs)
    for r in ctx.rows:
        if not r.seconds:
            r.seconds = time.perf_counter() - t0
    if got.error is None and want.error is None and grad_outs is not None:
        # The variants' expectation on the base values: the reference run, or without a
        # reference the Function's own contiguous run.
        if any(f.subject == "input" for f in got.contract):
            # the Function wrote into its inputs (a contract failure already reported): the
            # variants start from the case's values again, not from what it left there
            inputs = materialize(case, dtype, device, seed)
        variant_rows(ctx, Baseline(inputs, grad_outs, want, gen,
                                   want_inputs=ref_inputs if op.reference is not None else None,
                                   got=reusable, stochastic=got.drew,
                                   low=low if op.reference is not None else None), checks)
    after_variants(ctx, got, want if op.reference is not None else None, checks)
    return ctx.rows


def tensor_list_row(ctx: CaseContext, inputs: Inputs, checks: frozenset[str]) -> None:
    """A skip row (not declared: not checked is not passed) for positional args that are
    lists or tuples holding a tensor that requires grad: autograd.Function does not
    differentiate them, and gradlab's checks take one tensor per argument."""
    listed = [i for i, a in enumerate(inputs.args) if isinstance(a, (list, tuple)) and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in a)]
    if listed and "gradient" in checks:
        ctx.row("base", "gradient", SKIP, reason="tensor_list_input",
                note=f"args {listed} hold tensors that require grad")


def after_variants(ctx: CaseContext, got: Run, want: Run | None,
                   checks: frozenset[str]) -> None:
    """The rng_replay verdict of the variants that took the base's diagnosis and of the
    contract row, then the edges, last (once per case: edge_rows says when)."""
    rng_replayed([r for r in ctx.rows if r.hint == "rng_replay" or r.check == "contract"], got)
    if "edges" in checks:
        guarded_check(ctx, "edges", lambda: edge_rows(ctx, want if want and want.error is None
                                                       else None))


def spec_mistake(ctx: CaseContext, got: Run, want: Run, low_inputs: Inputs | None,
                 gen: torch.Generator) -> bool:
    """Whether the Function and the reference both raise in forward, alike (one exception
    type), on the case's own inputs: the spec's arguments are wrong (shapes that do not fit,
    values neither accepts), not the Function, which did what the reference does.  If so,
    the case's one row says it (reason SPEC_INPUTS).  Where the Function raises in a dtype
    other than float64 and the reference's float64 run did not, the reference is asked in
    that dtype too (low_inputs): constants of the case's own in float64, which neither
    multiplies with float32 values (cal9's stribor nets), are the spec's choice as well."""
    if (got.error is not None and want.error is None and got.stage == "forward"
            and low_inputs is not None and ctx.op.reference is not None):
        want = run_once(ctx.op.reference, low_inputs.clone(), None, gen)
    if (got.error is None or want.error is None or got.stage != "forward"
            or want.stage != "forward" or type(got.error) is not type(want.error)):
        return False
    ctx.row("base", "forward", ERROR, reason=SPEC_INPUTS, note=first_line(got.error))
    return True


def numerical_rows(target: Target, case: Case, device: str, options: Options,
                   seed: int) -> list[CheckRow]:
    """The rows made once per case and device: jacobian and second_order in the numerical
    dtype (float64), autocast (float32 inputs), capabilities and opcheck (the numerical
    dtype)."""
    checks = enabled_checks(target, options)
    ctx = CaseContext(target, case, target.numerical_dtype, device, options)
    gen = torch.Generator().manual_seed(seed + 7)
    try:
        inputs = materialize(case, target.numerical_dtype, device, seed)
    except Exception as exc:
        ctx.row("base", "jacobian", ERROR, reason="inputs_failed", note=first_line(exc))
        return ctx.rows
    if "opcheck" in checks:  # a torch.library op's; before: it needs no differentiable input
        guarded_check(ctx, "opcheck", lambda: opcheck_rows(ctx, inputs.clone()))
    if not inputs.diff_index:
        return ctx.rows
    first_ok = True
    # the case's values as drawn: a Function writing into its inputs (a contract failure the
    # case rows report) must not move the later checks to other values than its base run's
    pristine = inputs.clone()
    # the deterministic probe runs the Function again from the state its base run began in
    state = RngState.now(device)
    bw = None
    if "jacobian" in checks:
        t0 = time.perf_counter()
        try:
            if options.mode != "dense":
                # the probes' graph; second_order and capabilities take their base run from it
                bw = build_backward(target.op.function, inputs, inputs.diff_index)
            tol = target.op.numerical_tolerance(target.numerical_dtype)
            r = jacobian_check(ctx, "jacobian", target.op.function, inputs, tol, gen, bw=bw)
            surrogate_by_reference(ctx, r, target.op.function, target.op.reference, inputs,
                                   tol, gen)
            first_ok = not r.failed
            blame_precision(r, ctx, target.op, inputs, gen, outputs=True)
            if r.failed:  # did the Function draw random numbers, in forward or in backward?
                rng_judged([r], target.op.function, inputs, torch.Generator().manual_seed(seed),
                           target.op.reference)
        except Exception as exc:
            if isinstance(exc, InputFreed):  # the case's own inputs: none may be read again
                raise
            first_ok, bw = False, None
            ctx.crash_row("base", "jacobian", exc, seconds=time.perf_counter() - t0)
    if "second_order" in checks:
        second_order_row(ctx, target.op, pristine.clone(), gen, first_ok,
                         outs=bw.outputs if bw is not None else None)
        guarded_check(ctx, "second_order", lambda: special_second_order(
            ctx, target.op, pristine.clone()))
    if "forward_ad" in checks:  # its own generator: the other checks' draws stay as they were
        guarded_check(ctx, "forward_ad", lambda: forward_ad_row(
            ctx, inputs.clone(), torch.Generator().manual_seed(seed + 11), first_ok))
    if "autocast" in checks:
        guarded_check(ctx, "autocast", lambda: autocast_row(ctx, seed, gen, first_ok))
    if "capabilities" in checks:
        guarded_check(ctx, "capabilities", lambda: capability_rows(
            ctx, pristine.clone(), gen, base=base_of(bw), state=state))
    if "explore" in checks and options.explore > 0:
        guarded_check(ctx, "explore", lambda: explore_row(ctx, options.explore))
    return ctx.rows


def guarded_check(ctx: CaseContext, check: str, make_rows: Callable[[], object]) -> None:
    """Run one check of a case; what escapes it is its error row, the case's other rows stay."""
    try:
        make_rows()
    except Exception as exc:
        ctx.rows.append(escaped_row(exc, CheckRow(ctx.op.name, ctx.case.name, ctx.dtype,
                                                  ctx.device, "base", check, ERROR)))


def item_rows(item: Item, options: Options) -> list[CheckRow]:
    """The rows of one work item; a crash fails this item only and the run goes on.

    Global torch settings are given back after the item whatever the Function did, and a
    Function that changed one fails with a row naming the setting.
    """
    kind, t, case, dtype, device = item
    t = replace(t, op=ops.resolved(t.op))  # a spec's bundled op is imported here, not before
    item = (kind, t, case, dtype, device)
    seed = case_seed(options.seed, t.op.name, case.name)
    check = "forward" if kind == "case" else "jacobian"
    if device == "cuda" and not torch.cuda.is_available():
        # not checked is not passed, unless the run was told to skip what the machine lacks
        return [CheckRow(t.op.name, case.name, dtype, device, "base", check, SKIP,
                         reason="cuda_unavailable", declared=options.skip_unavailable)]
    before = TorchState.now()
    # one RNG state per case, replayed before every forward; the caller's given back after
    with preserved_rng(), case_rng(seed, device):
        rows = guarded_rows(item, options, seed)
        freed = next((r.note for r in rows if INPUT_FREED in r.note), "")
        if freed or any(LEAF_INPLACE in r.note for r in rows):
            # An in-place Function (ctx.mark_dirty) cannot take a leaf that requires grad, and
            # one that frees its input's memory (memcnn) cannot take a tensor read later; in a
            # model its input is always an intermediate: give it one.
            inplace = replace(t, op=replace(t.op, function=NonLeafInputs(t.op.function,
                                                                        bool(freed))))
            item = (kind, inplace, case, dtype, device)
            rows = guarded_rows(item, options, seed)
            if freed and kind == "case":
                rows.append(CheckRow(t.op.name, case.name, dtype, device, "base", "contract",
                                     policy.status("contract", "input_freed"),
                                     hint="input_freed", note=freed))
        tf32_judged(rows, item, lambda: guarded_rows(item, options, seed))
        after = TorchState.now()
        before.restore()
    changed = before.changed(after)
    if changed:
        rows.append(CheckRow(t.op.name, case.name, dtype, device, "base", "contract",
                             policy.status("contract", "global_state"), hint="global_state",
                             findings=[Finding("setting", -1, "global_state", got=(name, new),
                                               want=old) for name, old, new in changed]))
    if options.repro_dir and not any(r.reason == SPEC_INPUTS for r in rows):
        try:
            save_failures(rows, t, case, dtype, device, seed, options.repro_dir,
                          options.repro_command)
        except Exception as exc:  # no repro file is no reason to lose the rows
            for r in rows:
                if r.failed:
                    r.note = "; ".join(filter(None, [r.note, f"repro not saved: "
                                                               f"{first_line(exc)}"]))
    return rows


#: The dtypes whose CUDA convolutions and matmuls TF32 rounds (gradlab.tf32).
TF32_DTYPES = ("float32", "complex64")
#: The checks whose failure TF32's rounding can cause (the case item's comparisons).
TF32_CHECKS = ("forward", "gradient")


def tf32_judged(rows: list[CheckRow], item: Item, again: Callable[[], list[CheckRow]]) -> None:
    """A float32 CUDA case run with TF32 on: its failing forward and gradient rows (variants
    too) that do not fail when the case runs again with every TF32 setting off (`again`,
    inside gradlab.tf32.disabled) get the hint `tf32`, on the row and its findings.  A
    failure that stays is the Function's, and keeps its own hint.  (Not failing rather than
    passing: a variant that only localises a failure, or a forward row a variant adds only
    when it differs, is not made when all is well.)  A rerun with an error says nothing."""
    kind, _, _, dtype, device = item
    if kind != "case" or not device.startswith("cuda") or dtype not in TF32_DTYPES:
        return
    failing = [r for r in rows if r.failed and r.status != ERROR and r.check in TF32_CHECKS]
    if not failing or not tf32.enabled():
        return
    with tf32.disabled():
        rerun = again()
    if any(r.status == ERROR for r in rerun):
        return
    still = {(r.variant, r.check) for r in rerun if r.failed}
    for r in failing:
        if (r.variant, r.check) not in still:
            r.hint = "tf32"
            for f in r.findings:
                f.hint, f.pattern = "tf32", None


#: What autograd says when an in-place Function (ctx.mark_dirty) is given a leaf.
LEAF_INPLACE = "a leaf Variable that requires grad"


def guarded_rows(item: Item, options: Options, seed: int) -> list[CheckRow]:
    """The rows of one item; whatever escapes the checks becomes an error row."""
    kind, t, case, dtype, device = item
    try:
        return (case_rows(t, case, dtype, device, options, seed) if kind == "case"
                else numerical_rows(t, case, device, options, seed))
    except (Exception, SystemExit) as exc:
        # sys.exit() inside a Function is its crash, not the end of the run
        check = "forward" if kind == "case" else "jacobian"
        return [escaped_row(exc, CheckRow(t.op.name, case.name, dtype, device, "base", check,
                                          ERROR))]


def escaped_row(exc: BaseException, row: CheckRow) -> CheckRow:
    """The row for an exception that escaped every check: the Function's crash when its code is
    on the traceback, else an internal gradlab error with the whole traceback."""
    row.note = first_line(exc)
    if raised_in_user_code(exc):
        row.hint, row.crash_location = crash_hint(exc), crash_location(exc)
    else:
        row.reason = "internal_error"
        row.traceback = "".join(traceback.format_exception(exc))
    return row

"""The contract check: what backward returns and what the Function must leave untouched.

- the raw return value of the custom Function's backward, called directly (see
  gradlab.checks.numeric.rawbackward): one gradient per forward input, None for non-tensors, each
  with its input's shape, dtype and device;
- nothing written in place that must not be: inputs in forward (without ctx.mark_dirty),
  grad_output, saved inputs and saved outputs in backward;
- backward state kept in ctx: backward again on a graph gives the same gradients, and so after
  a later forward (state on the Function class or a global would be that forward's);
- outputs differentiable where the reference's are, and only there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs
from gradlab.checks.diagnosis import policy
from gradlab.checks.numeric import backprop
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.model import Target, Tolerance
from gradlab.results import PASS, SKIP, Finding
from gradlab.torchcompat import missing_note
from gradlab.torchstate import preserved_rng


def same(a: Tensor, b: Tensor) -> bool:
    """Bitwise-equal values, NaN equal to NaN (a NaN output is not an in-place write)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    if not a.is_floating_point():
        return False
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def snapshot(inputs: Inputs) -> dict[int, Tensor]:
    """Copies of the tensor args' values, by position."""
    return {i: inputs.args[i].detach().clone() for i in inputs.tensor_index}


def versions(inputs: Inputs) -> dict[int, int]:
    """The version counters of the tensor args, by position."""
    return {i: inputs.args[i]._version for i in inputs.tensor_index}


def forward_writes(before: dict[int, Tensor], inputs: Inputs,
                   outs: Sequence[Tensor], counted: dict[int, int] | None = None
                   ) -> list[Finding]:
    """Inputs forward changed in place without ctx.mark_dirty.

    Marked dirty means returned as the very input object: autograd hands a dirty input back
    itself (its history rebased onto the Function), while an input returned unmarked comes
    back as a new view of it (torch 2.x).  Shared storage alone does not tell: a forward that
    writes `x.data` and returns x unmarked shares it too, and autograd never learns of the
    write (no version bump, the input's history unchanged).  counted: the version counters
    before forward; one that moved is a write too where no value changed (an in-place write
    of the values already there: every graph that saved the input fails in backward).  An
    input that does not require grad is `inplace_buffer`: no gradient flows through it, so
    autograd's bookkeeping stays right, and a state buffer (a batch norm's running statistics,
    as torch's own SyncBatchNorm Function updates them) is written so by design."""
    found = []
    for i, old in before.items():
        cur = inputs.args[i]
        moved = counted is not None and i in counted and cur._version != counted[i]
        if not any(o is cur for o in outs) and (moved or not same(old, cur.detach())):
            found.append(Finding("input", i,
                                 "inplace_input" if cur.requires_grad else "inplace_buffer"))
    return found


def shares_storage(t: Tensor, outs: Sequence[Tensor]) -> bool:
    """True when `t`'s memory is an output's (an input returned, written with mark_dirty)."""
    ptr = t.untyped_storage().data_ptr()
    return any(o.untyped_storage().data_ptr() == ptr for o in outs)


@dataclass
class BackwardWatch:
    """Values (and version counters) before backward, to find what backward wrote into."""

    grad_outputs: list[tuple[int, Tensor]]
    inputs: dict[int, Tensor]
    outputs: list[Tensor]
    #: each leaf input's `.grad` before backward (the object, compared by identity)
    grads: dict[int, Tensor | None] = field(default_factory=dict)

    @classmethod
    def before(cls, grad_outputs: Sequence[Tensor], inputs: Inputs, outs: Sequence[Tensor],
               kept: dict[int, Tensor] | None = None,
               sources: Sequence[Tensor | None] | None = None) -> BackwardWatch:
        """kept: copies of inputs' current values already taken (not copied again).  sources:
        per grad_output, a tensor with its values that no Function is handed (the float64
        grad_output it was made from), compared with instead of a copy."""
        kept = kept or {}
        values = {i: kept[i] if i in kept else inputs.args[i].detach().clone()
                  for i in inputs.tensor_index}
        sources = sources or [None] * len(grad_outputs)
        return cls([(g._version, src if src is not None else g.detach().clone())
                    for g, src in zip(grad_outputs, sources, strict=True)], values,
                   [o.detach().clone() for o in outs],
                   {i: inputs.args[i].grad for i in inputs.tensor_index
                    if inputs.args[i].is_leaf})

    def writes(self, grad_outputs: Sequence[Tensor], inputs: Inputs,
               outs: Sequence[Tensor]) -> list[Finding]:
        """What changed since `before`."""
        found = []
        for k, (g, (ver, old)) in enumerate(zip(grad_outputs, self.grad_outputs, strict=True)):
            if g._version != ver or not same(g.detach(), old):
                found.append(Finding("grad_output", k, "inplace_grad_output"))
                break
        for i, old in self.inputs.items():
            if not same(old, inputs.args[i].detach()):
                found.append(Finding("input", i, "inplace_saved"))
        for k, old in enumerate(self.outputs):
            # outputs are often saved for backward too (exp saves its result)
            if not same(old, outs[k].detach()):
                found.append(Finding("output", k, "inplace_saved"))
        # backward setting an input's .grad itself ("mimicking" the engine): loss.backward()
        # then adds the gradient it returns on top (twice the gradient on a leaf), and
        # autograd.grad, which must not touch .grad, leaves it set
        found += [Finding("input", i, "grad_side_effect") for i, old in self.grads.items()
                  if inputs.args[i].grad is not old]
        return found


def backward_again(outs: Sequence[Tensor], inputs: Inputs, grad_outputs: Sequence[Tensor],
                   first: Sequence[Tensor | None],
                   tol: Tolerance) -> tuple[list[Finding], str]:
    """Backward run a second time on the graph of a run whose gradients were `first`
    (retain_graph=True), as a second loss or a gradient penalty does: a difference beyond `tol`
    is a backward that is not re-entrant (it changed ctx or a saved tensor); a rounding-level
    one (atomics, summation order) is only a note."""
    second = again(outs, inputs, grad_outputs)
    if isinstance(second, BaseException):
        return [Finding("backward", -1, "not_reentrant", got=first_line(second))], ""
    found, biggest = differences(inputs.diff_index, first, second, tol, "not_reentrant")
    note = (f"backward run twice differs at rounding level (up to {biggest:.3g}): "
            "nondeterministic summation order?") if biggest and not found else ""
    return found, note


def again(outs: Sequence[Tensor], inputs: Inputs, grad_outputs: Sequence[Tensor]
          ) -> list[Tensor | None] | BaseException:
    """The differentiable inputs' gradients by another backward on the graph of `outs`
    (retained), or what it raised; [] when nothing is differentiated."""
    diff = inputs.diff_index
    pairs = [(o, g) for o, g in zip(outs, grad_outputs, strict=True) if o.requires_grad]
    if not pairs or not diff:
        return []
    try:
        return backprop.grads([p[0] for p in pairs], [inputs.args[i] for i in diff],
                              [p[1] for p in pairs], retain_graph=True)
    except Exception as exc:
        return exc


def differences(diff: Sequence[int], first: Sequence[Tensor | None],
                second: Sequence[Tensor | None], tol: Tolerance,
                hint: str) -> tuple[list[Finding], float]:
    """Findings (with `hint`) for the inputs whose two gradients differ beyond `tol`, and the
    largest difference seen (rounding-level ones included)."""
    found, biggest = [], 0.0
    for i, a, b in zip(diff, first, second, strict=False):
        if a is None or b is None or same(a, b):
            continue
        err = float((a.double() - b.double()).abs().nan_to_num(nan=float("inf")).max())
        scale = float(a.double().abs().max())
        if err > tol.atol + tol.rtol * scale:
            found.append(Finding("input", i, hint, got=f"differs by {err:.3g}"))
        biggest = max(biggest, err)
    return found, biggest


def shifted(inputs: Inputs) -> Inputs:
    """Copies of `inputs` whose floating tensor args hold other values of the same case: each
    element takes its predecessor's value (flat order, the last the first's).

    Every element moves, so state a later forward leaves behind differs from the first one's
    unless the values are all equal; and each value is one the case drew, so an op with an
    elementwise domain (a log, a sqrt) stays in it.  Integer args (indices, sizes) and keyword
    tensors are kept.  An op whose domain is not elementwise (a positive-definite matrix) may
    refuse: the check is then skipped."""
    other = inputs.clone()
    for i in other.tensor_index:
        t = other.args[i]
        if (t.is_floating_point() or t.is_complex()) and t.numel() > 1:
            values = t.detach().reshape(-1).roll(1).reshape(t.shape).clone()
            other.args[i] = values.requires_grad_(t.requires_grad)
    return other


def state_outside_ctx(fn: Callable[..., Any], outs: Sequence[Tensor], inputs: Inputs,
                      grad_outputs: Sequence[Tensor], first: Sequence[Tensor | None],
                      tol: Tolerance) -> list[Finding]:
    """A second forward on other values, then backward on the first graph again: gradients
    other than `first` (beyond `tol`) mean backward used what the later forward left, state
    kept on the Function class or a global instead of ctx.  A second forward that raises
    skips the check (its values may be outside the op's domain).

    Costs one forward and one backward; the first graph stays as it was (the second forward
    runs on copies), so later backwards on it are still valid."""
    if not inputs.diff_index:
        return []
    try:
        with preserved_rng(), torch.enable_grad():  # the run's random stream is left alone
            other = shifted(inputs)
            later = flat_outputs(fn(*other.args, **other.kwargs))
            third = again(outs, inputs, grad_outputs)
            del later  # kept alive until the first graph's backward ran
    except Exception:
        return []
    if isinstance(third, BaseException):
        return [Finding("backward", -1, "state_outside_ctx", got=first_line(third))]
    return differences(inputs.diff_index, first, third, tol, "state_outside_ctx")[0]


def backward_checks(fn: Callable[..., Any], outs: Sequence[Tensor], inputs: Inputs,
                    grad_outputs: Sequence[Tensor], first: Sequence[Tensor | None],
                    tol: Tolerance) -> tuple[list[Finding], str]:
    """The contract checks that run backward again on a run's graph (its gradients `first`):
    re-entrancy (`backward_again`), then, when that held, state kept outside ctx."""
    # copies taken first: a backward that writes its grad_output (a finding of its own) must
    # not hand the state check other values
    fresh = [g.clone() for g in grad_outputs]
    found, note = backward_again(outs, inputs, grad_outputs, first, tol)
    if found:
        return found, note
    return state_outside_ctx(fn, outs, inputs, fresh, first, tol), note


def differentiability(got: Sequence[Tensor], want: Sequence[Tensor]
                      ) -> tuple[list[Finding], list[Finding]]:
    """Outputs whose requires_grad differs from the reference's: (failures, warnings), as
    gradlab.checks.diagnosis.policy says.

    Differentiable where the reference's is not: a failure (a running-statistics buffer updated
    from it keeps every step's graph alive, and a second backward through it raises).  Not
    differentiable where the reference's is: a warning (a loss through it gets no gradient)."""
    found = []
    for k, (a, b) in enumerate(zip(got, want, strict=False)):
        if a.requires_grad and not b.requires_grad:
            found.append(Finding("output", k, "output_differentiable"))
        elif b.requires_grad and not a.requires_grad:
            found.append(Finding("output", k, "output_not_differentiable"))
    return by_level(found)


def dropped_gradients(warnings: Sequence[Finding], dropped: Callable[[int], bool]
                      ) -> tuple[list[Finding], list[Finding]]:
    """(failures, the other warnings): each `output_not_differentiable` warning whose output
    `dropped(k)` says carries a nonzero reference gradient becomes `gradient_dropped`."""
    lost = [f for f in warnings if f.hint == "output_not_differentiable" and dropped(f.index)]
    return ([Finding("output", f.index, "gradient_dropped") for f in lost],
            [f for f in warnings if f not in lost])


def by_level(findings: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """Contract findings as (failures, warnings), by gradlab.checks.diagnosis.policy's level of each
    hint (information ones dropped)."""
    levels = [policy.level("contract", f.hint) for f in findings]
    return ([f for f, lv in zip(findings, levels, strict=True) if lv == policy.FAIL],
            [f for f, lv in zip(findings, levels, strict=True) if lv == policy.WARN])


@dataclass(frozen=True)
class Undifferentiated:
    """A reference whose outputs at `outputs` (positions among its floating outputs) are
    returned detached: constants, as the checked Function returns them."""

    fn: Callable[..., Any]
    outputs: frozenset[int]

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Tensor, ...]:
        outs = flat_outputs(self.fn(*args, **kwargs))
        return tuple(o.detach() if k in self.outputs else o for k, o in enumerate(outs))


def as_differentiated(target: Target, outs: Sequence[Tensor]) -> Target:
    """`target` with its reference's outputs detached where the Function's `outs` do not
    require grad (else as it is): where the Function returns a constant, its variants compare
    gradients without that output's share, as the base run does (its grad_output is zero);
    the contract row says that the reference differentiates it."""
    fixed = frozenset(k for k, o in enumerate(outs) if not o.requires_grad)
    if target.op.reference is None or not fixed:
        return target
    return replace(target, op=replace(target.op, reference=Undifferentiated(
        target.op.reference, fixed)))


def contract_row(ctx: CaseContext, variant: str, findings: Sequence[Finding], *,
                 passing: bool, unavailable: str = "", no_custom: bool = False,
                 note: str = "", warnings: Sequence[Finding] = ()) -> None:
    """A contract row: with `findings`, the status gradlab.checks.diagnosis.policy gives the first's
    hint (a failure; `warnings` follow them); else the first warning's (a warn, a failure under
    --strict); else, when asked for, PASS (saying so when only the in-place checks applied),
    or SKIP saying why when backward's raw return value could not be checked (never a
    pass).  A finding the base row already has is left out of a variant's (one ctx attribute
    seen by every variant is one finding of the case, not one row per variant)."""
    if variant != "base":
        findings, warnings = seen_at_base(ctx, findings), seen_at_base(ctx, warnings)
    fails, warns = by_level(findings)
    findings, warnings = fails, [*warns, *warnings]
    if findings:
        ctx.row(variant, "contract", policy.status("contract", findings[0].hint),
                hint=findings[0].hint, findings=[*findings, *warnings])
    elif warnings:
        ctx.row(variant, "contract", policy.status("contract", warnings[0].hint,
                                                   strict=ctx.options.strict),
                hint=warnings[0].hint, findings=list(warnings), note=note)
    elif passing and unavailable == missing_note("node_metadata"):
        # a torch older than the feature: declared, the note names the release needed
        ctx.row(variant, "contract", SKIP, declared=True, reason="old_torch", note=unavailable)
    elif passing and unavailable:
        ctx.row(variant, "contract", SKIP, reason="raw_backward_unavailable", note=unavailable)
    elif passing:
        ctx.row(variant, "contract", PASS, reason="no_custom_function" if no_custom else "",
                note=note)


def _key(f: Finding) -> tuple[Any, ...]:
    return (f.subject, f.index, f.hint, str(f.got), f.node)


def seen_at_base(ctx: CaseContext, findings: Sequence[Finding]) -> list[Finding]:
    """`findings` less those the case's base contract row already reports."""
    base = {_key(f) for r in ctx.rows if r.variant == "base" and r.check == "contract"
            for f in r.findings}
    return [f for f in findings if _key(f) not in base]

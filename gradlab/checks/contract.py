"""The contract check: what backward returns and what the Function must leave untouched.

- the raw return value of the custom Function's backward, called directly (see
  gradlab.checks.rawbackward): one gradient per forward input, None for non-tensors, each with
  its input's shape, dtype and device;
- nothing written in place that must not be: inputs in forward (without ctx.mark_dirty),
  grad_output, saved inputs and saved outputs in backward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from gradlab.cases import Inputs
from gradlab.checks.context import CaseContext, first_line
from gradlab.model import Tolerance
from gradlab.results import FAIL, PASS, SKIP, Finding


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


def forward_writes(before: dict[int, Tensor], inputs: Inputs,
                   outs: Sequence[Tensor]) -> list[Finding]:
    """Inputs forward changed in place without returning them (no ctx.mark_dirty)."""
    found = []
    for i, old in before.items():
        cur = inputs.args[i]
        if not shares_storage(cur, outs) and not same(old, cur.detach()):
            found.append(Finding("input", i, "inplace_input"))
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
                   [o.detach().clone() for o in outs])

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
        return found


def backward_again(outs: Sequence[Tensor], inputs: Inputs, grad_outputs: Sequence[Tensor],
                   first: Sequence[Tensor | None],
                   tol: Tolerance) -> tuple[list[Finding], str]:
    """Backward run a second time on the graph of a run whose gradients were `first`
    (retain_graph=True), as a second loss or a gradient penalty does: a difference beyond `tol`
    is a backward that is not re-entrant (it changed ctx or a saved tensor); a rounding-level
    one (atomics, summation order) is only a note."""
    diff = inputs.diff_index
    pairs = [(o, g) for o, g in zip(outs, grad_outputs, strict=True) if o.requires_grad]
    if not pairs or not diff:
        return [], ""
    try:
        second = torch.autograd.grad([p[0] for p in pairs], [inputs.args[i] for i in diff],
                                     [p[1] for p in pairs], allow_unused=True,
                                     retain_graph=True)
    except Exception as exc:
        return [Finding("backward", -1, "not_reentrant", got=first_line(exc))], ""
    found, biggest = [], 0.0
    for i, a, b in zip(diff, first, second, strict=True):
        if a is None or b is None or same(a, b):
            continue
        err = float((a.double() - b.double()).abs().nan_to_num(nan=float("inf")).max())
        scale = float(a.double().abs().max())
        if err > tol.atol + tol.rtol * scale:
            found.append(Finding("input", i, "not_reentrant", got=f"differs by {err:.3g}"))
        biggest = max(biggest, err)
    note = (f"backward run twice differs at rounding level (up to {biggest:.3g}): "
            "nondeterministic summation order?") if biggest and not found else ""
    return found, note


def contract_row(ctx: CaseContext, variant: str, findings: Sequence[Finding], *,
                 passing: bool, unavailable: str = "", no_custom: bool = False,
                 note: str = "") -> None:
    """A contract row: FAIL with `findings` (hint: the first's); else, when asked for, PASS
    (saying so when only the in-place checks applied), or SKIP saying why when backward's raw
    return value could not be checked (never a pass)."""
    if findings:
        ctx.row(variant, "contract", FAIL, hint=findings[0].hint, findings=list(findings))
    elif passing and unavailable:
        ctx.row(variant, "contract", SKIP, reason="raw_backward_unavailable", note=unavailable)
    elif passing:
        ctx.row(variant, "contract", PASS, reason="no_custom_function" if no_custom else "",
                note=note)

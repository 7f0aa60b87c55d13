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
from gradlab.checks.context import CaseContext
from gradlab.results import FAIL, PASS, SKIP, Finding


def same(a: Tensor, b: Tensor) -> bool:
    """Bitwise-equal values, NaN equal to NaN (a NaN output is not an in-place write)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
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
        shares = any(o.untyped_storage().data_ptr() == cur.untyped_storage().data_ptr()
                     for o in outs)
        if not shares and not same(old, cur.detach()):
            found.append(Finding("input", i, "inplace_input"))
    return found


@dataclass
class BackwardWatch:
    """Values (and version counters) before backward, to find what backward wrote into."""

    grad_outputs: list[tuple[int, Tensor]]
    inputs: dict[int, Tensor]
    outputs: list[Tensor]

    @classmethod
    def before(cls, grad_outputs: Sequence[Tensor], inputs: Inputs,
               outs: Sequence[Tensor]) -> BackwardWatch:
        return cls([(g._version, g.detach().clone()) for g in grad_outputs], snapshot(inputs),
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


def contract_row(ctx: CaseContext, variant: str, findings: Sequence[Finding], *,
                 passing: bool, unavailable: str = "", no_custom: bool = False) -> None:
    """A contract row: FAIL with `findings` (hint: the first's); else, when asked for, PASS
    (saying so when only the in-place checks applied), or SKIP saying why when backward's raw
    return value could not be checked (never a pass)."""
    if findings:
        ctx.row(variant, "contract", FAIL, hint=findings[0].hint, findings=list(findings))
    elif passing and unavailable:
        ctx.row(variant, "contract", SKIP, reason="raw_backward_unavailable", note=unavailable)
    elif passing:
        ctx.row(variant, "contract", PASS, reason="no_custom_function" if no_custom else "")

"""The contract check: what backward returns and what the Function must leave untouched.

- the raw return value of the custom Function's backward, called directly: one gradient per
  forward input, None for non-tensors, each with its input's shape, dtype and device (autograd
  quietly casts a wrong dtype and sums an expandable wrong shape down before anyone sees it);
- nothing written in place that must not be: inputs in forward (without ctx.mark_dirty),
  grad_output, saved inputs and saved outputs in backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, dtype_name, flat_outputs, relayout
from gradlab.checks.context import CaseContext
from gradlab.results import FAIL, PASS, Finding


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


def grad_output_as(g64: Tensor, like: Tensor, layout: str) -> Tensor:
    """grad_output with the values of `g64`, like's dtype and device, laid out as `layout`."""
    g = g64.to(dtype=like.dtype, device=like.device)
    out = relayout(g, "broadcast" if layout == "expanded" else layout)
    # a layout that does not apply to this shape (a 0-d noncontiguous) is a plain copy
    return out if out is not None else g.clone()


def raw_backward(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor],
                 go_layout: str) -> list[Finding]:
    """Call the custom Function's backward directly and check what it returns.

    Runs on its own forward of copied inputs so that a backward that writes into its inputs
    or grad_output cannot disturb the run being compared.  Only possible when the output
    comes straight from a custom Function's apply.
    """
    with torch.enable_grad():
        outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
    if len(outs) != 1 or len(grad_outs64) != 1:
        return []
    node = outs[0].grad_fn
    if node is None or not hasattr(node, "_forward_cls"):
        return []
    # Map the node's inputs back to our args: the Function may be called with a subset.
    if len(node.next_functions) != len(inputs.args) or inputs.kwargs:
        return []
    try:
        raw = node.apply(grad_output_as(grad_outs64[0], outs[0], go_layout))  # type: ignore[attr-defined]
    except Exception:
        return []  # the real backward reports the crash
    return returned_gradients(inputs.args, raw if isinstance(raw, tuple) else (raw,))


def returned_gradients(args: Sequence[Any], raw: Sequence[Any]) -> list[Finding]:
    """Count, None for non-tensors, and shape/dtype/device of each returned gradient."""
    found: list[Finding] = []
    n = len(args)
    if len(raw) != n and not (len(raw) > n and all(r is None for r in raw[n:])):
        found.append(Finding("gradients", -1, "wrong_count", got=len(raw), want=n))
    for i, (arg, grad) in enumerate(zip(args, raw, strict=False)):
        if not isinstance(arg, Tensor):
            if grad is not None:
                found.append(Finding("input", i, "non_tensor_grad", want=type(arg).__name__))
            continue
        if grad is None or not isinstance(grad, Tensor):
            continue
        if tuple(grad.shape) != tuple(arg.shape):
            found.append(Finding("input", i, "wrong_shape", got=list(grad.shape),
                                 want=list(arg.shape)))
        elif grad.dtype != arg.dtype:
            found.append(Finding("input", i, "wrong_dtype", got=dtype_name(grad.dtype),
                                 want=dtype_name(arg.dtype)))
        elif grad.device != arg.device:
            found.append(Finding("input", i, "wrong_device", got=str(grad.device),
                                 want=str(arg.device)))
    return found


def contract_row(ctx: CaseContext, variant: str, findings: Sequence[Finding], *,
                 passing: bool) -> None:
    """A contract row: FAIL with `findings` (hint: the first's), or PASS when asked for."""
    if findings:
        ctx.row(variant, "contract", FAIL, hint=findings[0].hint, findings=list(findings))
    elif passing:
        ctx.row(variant, "contract", PASS)

"""Causes a failing finite-difference comparison can have that are not a wrong backward.

- a kink in the example values: an input element at (or within the step of) a point where the
  function is not differentiable (relu or abs at 0, or a jump such as sign(x) in a second
  order).  The central difference lands between the slopes on either side there (or far
  outside them, across a jump), and the analytical value is one convention among them: the
  Function is not wrong, the example values are unlucky.  Such entries (dense) or probes
  (fast) are judged one-sidedly: the slopes just beside the point (differences that do not
  cross it, jac.one_sided) disagree with each other or with the central difference, and the
  analytical value lies between them.
- a forward that ignores in-place updates of an input (a cache keyed on the tensor, its values
  read once): every finite difference, which perturbs the input in place, is exactly zero,
  while a fresh tensor with the same perturbed values changes the output.  Hint
  `cached_forward`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, call
from gradlab.checks.diagnosis.hints import MAX_KINK_COLUMNS, is_kink
from gradlab.checks.numeric import jacobian as jac
from gradlab.model import Tolerance

#: When slopes make a kink (KINK_GAP, MAX_KINK_COLUMNS, is_kink): gradlab.checks.diagnosis.hints.
#: The relative and absolute step of the fresh-tensor perturbation that shows a forward
#: reading its input's values (cached_forward): large against rounding, small against any
#: domain boundary of the example values.
FRESH_STEP = 1e-3


def dense_kinks(fn: Callable[..., Any], inputs: Inputs, i: int, analytical: Tensor,
                wrong: Tensor, tol: Tolerance, keep: Sequence[int] | None = None) -> bool:
    """True when every wrong entry of input i's dense Jacobian (`wrong`: flat mask of the
    [n_out, n_in] Jacobian) is a kink in the example values (see the module docstring)."""
    x = inputs.args[i]
    n_in = max(jac.real_numel(x), 1)
    mask = wrong.reshape(-1, n_in)
    cols = torch.nonzero(mask.any(0)).flatten().tolist()
    if not cols or len(cols) > MAX_KINK_COLUMNS:
        return False
    a = analytical.reshape(-1, n_in)
    for c in cols:
        e = torch.zeros(jac.real_numel(x), dtype=torch.float64)
        e[c] = 1.0
        sides = jac.one_sided(fn, inputs, i, e, keep=keep)
        rows = mask[:, c]
        if not is_kink(a[rows, c], (sides[0][rows], sides[1][rows], sides[2][rows]), tol):
            return False
    return True


def probe_kinks(fn: Callable[..., Any], inputs: Inputs, i: int, cols: Sequence[int],
                v: Tensor, vjp: Tensor, tol: Tolerance, keep: Sequence[int] | None = None) -> bool:
    """True when every input element `cols` that bisection located for a failing probe (all of
    them, none left unexplained) is a kink in the example values, judged along the probe's v:
    (v^T J)[c] from backward (`vjp`, flat) against v^T of the slopes beside x along e_c.

    Element by element, not along the probe's u: two kinks on one u with different conventions
    (abs at 0, and within eps of 0) add up to a value between neither pair of slopes."""
    if not cols:
        return False
    x = inputs.args[i]
    for c in cols:
        e = torch.zeros(jac.real_numel(x), dtype=torch.float64)
        e[c] = 1.0
        sides = jac.one_sided(fn, inputs, i, e, keep=keep)
        along = tuple((v @ t).reshape(1) for t in sides)
        if not is_kink(vjp[c].reshape(1), (along[0], along[1], along[2]), tol):
            return False
    return True


def ignores_inplace(fn: Callable[..., Any], inputs: Inputs, i: int) -> bool:
    """True when fn's outputs change for a fresh tensor with new values at position i but not
    when the tensor it has seen is updated in place to the same values (a cache keyed on the
    tensor).  A forward that ignores the input altogether changes for neither."""
    work = inputs.clone()
    x = work.args[i]
    try:
        base = call(fn, work)
        new = x.detach() * (1 + FRESH_STEP) + FRESH_STEP
        fresh = Inputs([new.clone().requires_grad_(x.requires_grad) if k == i else a
                        for k, a in enumerate(work.args)], work.kwargs)
        # the in-place update first: a cache of one entry (the last tensor seen) would be
        # evicted by the fresh tensor and then miss the updated one
        x.detach().copy_(new)
        inplace = call(fn, work)
        changed = call(fn, fresh)
    except Exception:
        return False  # nothing can be said; the failure stands without a hint
    same = all(_equal(a, b) for a, b in zip(base, inplace, strict=True))
    moved = not all(_equal(a, b) for a, b in zip(base, changed, strict=True))
    return same and moved


def _equal(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.equal(a.detach(), b.detach()))


def cached_forward(fn: Callable[..., Any], inputs: Inputs, i: int, numerical: Tensor,
                   analytical: Tensor) -> bool:
    """True when input i's numerical Jacobian (or probes) is exactly zero where the analytical
    one is not, because forward ignores in-place updates of the input (ignores_inplace)."""
    return (not bool(numerical.any()) and bool(analytical.any())
            and ignores_inplace(fn, inputs, i))

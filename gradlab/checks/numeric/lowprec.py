"""The low-precision criterion (gradlab.tolerances): float32, float16 and bfloat16 results judged
against the error the reference itself makes in that dtype.

The gold is the reference run in float64 on the same values with the same grad_outputs (the run
the forward and gradient rows already compare with); the reference run once more in the checked
dtype on the Function's own inputs gives its own error against that gold.  A tensor passes when
max|yours - gold| <= k * max|reference's - gold| + floor (FlashAttention's test criterion):
max abs errors per tensor, because elementwise the reference is exact by chance in places.
This module measures; the pass/fail decision is gradlab.checks.diagnosis.policy's
`criterion_status`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from gradlab.cases import Inputs, plain_copy
from gradlab.checks.diagnosis.diagnose import ratio_range
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import OpDef, Tolerance
from gradlab.tolerances import amplified_factor, criterion_limit


@dataclass(frozen=True)
class Own:
    """The reference's own error in the checked dtype, for one tensor: the tolerance the
    criterion gives the Function's (atol only), and what it was made of."""

    tol: Tolerance
    #: max |reference in dtype - gold|
    error: float
    factor: float
    #: the spread of the reference's own per-element ratio to the gold (its rounding, as the
    #: factor hint sees it: gradlab.checks.diagnosis.hints.constant_ratio allows the Function as
    #: much)
    noise: float


def own_error(lows: Sequence[Tensor | None], gold: Tensor, dtype: str,
              factor: float, design: Tolerance | None = None, tf32: bool = False) -> Own | None:
    """The criterion's tolerance for a tensor whose gold is `gold`, from what the reference
    gave for it in `lows` (its run in `dtype`; its float64 run on the inputs moved by half a
    unit in the last place of `dtype`, when made); None when the first gave nothing comparable
    (the table applies).  design: the user's float64 tolerance, an error by design (an
    approximate method) that every dtype keeps, added to the limit.  tf32: float32 on a GPU with
    TF32 on; where the reference's own error shows it computed in TF32 (TF32_EVIDENCE), the
    floor is a TF32 unit: cuDNN picks its algorithm per layout and call, so a correct Function
    rounds other intermediates than the reference and may be 2 TF32 units off where the
    reference happens to be closer.  A reference that did not compute in TF32 keeps float32's
    floor, so a Function that loses more to TF32 than it fails (hint `tf32`)."""
    errs, noise = [], 0.0
    # numpy: run for every low-precision tensor compared, where torch's per-call dispatch
    # cost more than the arithmetic on these (mostly small) tensors
    gold_flat = flat_real(gold).numpy()
    for k, low in enumerate(lows):
        if low is None or low.shape != gold.shape or low.is_complex() != gold.is_complex():
            if k == 0:
                return None
            continue
        lw, gw = flat_real(low).numpy(), gold_flat
        finite = np.isfinite(lw) & np.isfinite(gw)
        if not finite.any():  # an empty tensor too
            return None
        if not finite.all():
            lw, gw = lw[finite], gw[finite]
        errs.append(float(np.abs(lw - gw).max()))
        lo, hi = ratio_range(lw, gw)
        noise = max(noise, (hi - lo) if lo is not None and hi is not None else 0.0)
    g = gold_flat[np.isfinite(gold_flat)]
    scale = float(np.abs(g).max()) if g.size else 0.0
    err = max(errs)
    if tf32 and err >= TF32_EVIDENCE * criterion_limit(0.0, scale, "tf32", factor):
        dtype = "tf32"
    k = amplified_factor(err, scale, dtype, factor)
    limit = criterion_limit(err, scale, dtype, k)
    tol = Tolerance(atol=limit, rtol=0.0)
    if design is not None:
        tol = Tolerance(limit + design.atol * max(scale, 1.0), design.rtol)
    return Own(tol, err, k, factor * noise)


def flat_real(t: Tensor) -> Tensor:
    """A tensor as a flat float64 CPU vector (a complex one as its real view)."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    # resolve_neg: numpy() refuses a tensor whose negative bit is set (own_error's numpy path)
    return t.reshape(-1).double().cpu().resolve_neg()


def reference_in_dtype(op: OpDef, inputs: Inputs, grad_outs64: Sequence[Tensor],
                       gen: torch.Generator, *, nudge: bool = False) -> Lows | None:
    """The reference's runs the criterion measures its own error with: in the inputs' own
    (low) dtype on copies of the same values (contiguous; in the inputs' layout on a GPU),
    and in float64 on those values moved by half a unit in the last place of that dtype
    (what the dtype's rounding of the inputs alone changes: where the function is
    ill-conditioned, e.g. a saturated softmax, two right algorithms differ by about that
    much; only when `nudge`, see NUDGED_FAMILIES); same grad_outputs.  None when the first
    raised."""
    if op.reference is None:
        return None
    gos = list(grad_outs64) or None
    run = run_once(op.reference, plain_copy(inputs, keep_layout=on_gpu(inputs)), gos, gen)
    if run.error is not None and on_gpu(inputs):  # a reference refusing that layout
        run = run_once(op.reference, plain_copy(inputs), gos, gen)
    if run.error is not None:
        return None
    if not nudge:
        return run, None
    moved = run_once(op.reference, nudged(inputs), gos, gen)
    return run, (moved if moved.error is None else None)


def on_gpu(inputs: Inputs) -> bool:
    """Whether the inputs live on a GPU, where the reference's own error is measured in the
    Function's layout: cuDNN picks its algorithm per layout, and with TF32 on one layout may
    round to TF32 where another does not (measured on an H200, conv2d groups=2: grad_input
    1.9e-6 off the float64 gold contiguous, 3.5e-3 channels_last)."""
    return any(isinstance(a, Tensor) and a.is_cuda
               for a in (*inputs.args, *inputs.kwargs.values()))


def nudged(inputs: Inputs) -> Inputs:
    """float64 copies of `inputs` whose differentiable tensors are moved by half a unit in the
    last place of their own dtype, with a random sign per element (seeded: the same each run)."""
    out = plain_copy(inputs, dtype=torch.float64)
    gen = torch.Generator().manual_seed(NUDGE_SEED)
    for i in inputs.diff_index:
        t, x = inputs.args[i], out.args[i]
        if not t.is_floating_point():
            continue
        eps = torch.finfo(t.dtype).eps
        sign = torch.randint(0, 2, x.shape, generator=gen).double().mul_(2).sub_(1)
        with torch.no_grad():
            x.mul_(1 + sign.to(x.device) * eps * NUDGE_ULPS)
    return out


#: The share of a TF32 unit (at the gold's magnitude) the reference's own float32 error must
#: reach to show that it computed in TF32: float32 alone stays about 1e3 times below it (8192
#: times finer), one TF32 rounding of a product's inputs lands at about half a unit, and a
#: size-1 or expanded variant's short reduction well above a hundredth (the fake-TF32 bundled
#: specs, tests/test_tf32.py: 0.25 left 4 modconv variants red).
TF32_EVIDENCE = 0.01
#: How far nudged moves each element, in units of its dtype's epsilon (relative): half a unit,
#: the inputs' own rounding.
NUDGE_ULPS = 0.5
#: The variant families whose values are extreme by design (near overflow, near zero): there
#: the function's conditioning, not the reference's luck, sets the error two right algorithms
#: make (float32 attention at the magnitude variant: a saturated softmax whose plain reference
#: underflows to exact zeros, while the fused kernel's backward is off by 2x its error), so
#: the criterion also takes the float64 reference on inputs nudged by NUDGE_ULPS.  Not in the
#: base case and the layout variants: there it would hide the 2% wrong attention scale's
#: forward in bfloat16 (tests/test_low_precision.py).
NUDGED_FAMILIES = ("magnitude", "small")
#: The seed of nudged's signs.
NUDGE_SEED = 2718

#: The reference's runs the criterion measures (reference_in_dtype).
Lows = tuple[Run, Run | None]


def variant_low(op: OpDef, base_low: Lows | None, family: str, new_values: bool,
                inputs: tuple[Inputs, Inputs], want: Run, gen: torch.Generator) -> Lows | None:
    """The reference's own run in the case's dtype for a variant (inputs: the base's and the
    variant's): the base's where the variant has the base's values and grad_outputs (off a
    GPU), else one more run of the reference on the variant's inputs with want's grad_outputs."""
    if base_low is None or want.error is not None:
        return None
    base, var = inputs
    if family == "requires_grad":
        keep = [k for k, i in enumerate(base.diff_index) if i in var.diff_index]
        low, moved = base_low
        return (low.with_grads([low.grads[k] for k in keep]),
                moved.with_grads([moved.grads[k] for k in keep]) if moved else None)
    if not new_values and not on_gpu(var):  # on a GPU the layout picks cuDNN's algorithm
        return base_low
    return reference_in_dtype(op, var, want.grad_outs64, gen,
                              nudge=family in NUDGED_FAMILIES)


def applies(op: OpDef, dtype: str, stochastic: bool = False) -> bool:
    """Whether rows in `dtype` take the criterion: a reference to run, a low-precision dtype
    whose tolerance the user left alone, and the same draws in every run (a stochastic
    Function's reference in another dtype draws other numbers)."""
    return op.reference is not None and not stochastic and op.judged_by_criterion(dtype)

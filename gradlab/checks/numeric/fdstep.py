"""The finite differences' step for a forward that is less accurate than float64.

gradcheck's step (1e-6) assumes a forward accurate to float64's rounding: the difference
quotient then carries ~1e-16/1e-6 of noise.  A float64 Function that computes in float32 and
casts (a fused kernel's choice) is noisy at ~1e-7 relative, and the same step measures that
noise (errors of 10% in the issue's logsumexp), not its derivative.  This module measures the
forward's noise from its outputs (the float32-cast evidence precision_loss uses) and picks the
step that balances it against the central difference's truncation error: h ~ cbrt(noise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from gradlab.cases import Inputs, call
from gradlab.checks.diagnosis.hints import FLOAT32_CAST_SHARE
from gradlab.checks.numeric.jacobian import EPS64, realview

#: The formats a float64 result may have been computed in and cast from, coarsest first, with
#: their machine epsilon (the relative noise of a value rounded to them).
CAST_FORMATS = ((torch.bfloat16, 2.0 ** -7), (torch.float16, 2.0 ** -10),
                (torch.float32, 2.0 ** -23))
#: At least this many non-integer finite output values before their format is believed (each
#: float64 value is exact in float32 by chance with odds of about 2**-29; integers are exact
#: in every format, so they are left out).  Pins: the issue's logsumexp, 4 outputs.
MIN_VALUES = 2
#: output_format judges at most this many values, evenly strided: a share estimated on 65536
#: values is within ~0.4% (one standard error at the worst share, 0.5), far inside the margin
#: FLOAT32_CAST_SHARE leaves, and it costs 1-2 ms instead of 25 ms on a 1e6-element output.
FORMAT_SAMPLE = 65536
#: A finite-difference error that changes by more than this fraction when the step doubles
#: depends on the step (noise or truncation), not on the derivative: a wrong derivative's
#: error is the same at every step.  Pins: tests/test_low_precision.py (float32 logsumexp).
STEP_DEPENDENT = 0.3


def forward_noise(fn: Callable[..., object], inputs: Inputs, outputs: Sequence[Tensor]) -> float:
    """The relative rounding noise of `fn`'s float64 outputs on `inputs`: the epsilon of the
    coarsest format (output_format) its outputs are held in, when its forward quantizes to it
    (quantizes); else float64's."""
    eps = output_format(outputs)
    if eps <= EPS64 or not quantizes(fn, inputs, outputs):
        return EPS64
    return eps


def quantizes(fn: Callable[..., object], inputs: Inputs, outputs: Sequence[Tensor]) -> bool:
    """Whether moving every differentiable input by NUDGE (relative, far above float64's
    resolution, far below float32's) leaves FLOAT32_CAST_SHARE of the outputs exactly as they
    were: a forward that computes in a coarser format rounds the nudge away, while one that
    copies float32-exact inputs in float64 (a max, a sort) moves with them."""
    moved = inputs.clone()
    gen = torch.Generator().manual_seed(0)
    for i in moved.diff_index:
        x = realview(moved.args[i].detach())
        if x.is_floating_point():
            sign = torch.randint(0, 2, x.shape, generator=gen).to(x) * 2 - 1
            x.mul_(1 + NUDGE * sign)
    try:
        again = call(fn, moved)
    except Exception:
        return False
    same = [(a.detach() == b.detach()).reshape(-1) for a, b in zip(again, outputs, strict=False)
            if a.shape == b.shape]
    flat = torch.cat(same) if same else torch.zeros(0, dtype=torch.bool)
    return bool(flat.numel()) and float(flat.double().mean()) >= FLOAT32_CAST_SHARE


#: quantizes' relative nudge: 1e6 units of float64's rounding, 1e-3 of float32's.
NUDGE = 1e-10


def output_format(outputs: Sequence[Tensor]) -> float:
    """The epsilon of the coarsest format that FLOAT32_CAST_SHARE of the float64 outputs'
    non-integer finite values (at most FORMAT_SAMPLE of them, strided) are exact in, else
    float64's; a float output of a coarser dtype (a Function returning float32 whatever it is
    given) is held in that dtype whatever its values: the coarsest such differentiable
    output's epsilon."""
    held = [eps for dtype, eps in CAST_FORMATS for o in outputs
            if o.requires_grad and realview(o).dtype == dtype]
    if held:
        return max(held)
    values = [realview(o.detach()).reshape(-1).cpu() for o in outputs
              if o.dtype in (torch.float64, torch.complex128)]
    if not values:
        return EPS64
    x = torch.cat(values)
    if x.numel() > FORMAT_SAMPLE:
        x = x[::-(-x.numel() // FORMAT_SAMPLE)]
    x = x[torch.isfinite(x)]
    x = x[x != x.round()]
    if x.numel() < MIN_VALUES:
        return EPS64
    for dtype, eps in CAST_FORMATS:
        if float((x.to(dtype).double() == x).double().mean()) >= FLOAT32_CAST_SHARE:
            return eps
    return EPS64


def noisy_step(noise: float) -> float:
    """The central difference's step for a forward of relative noise `noise`: cbrt(noise),
    where noise / h and the truncation h^2 |f'''| / 6 balance (gradcheck's 1e-6 is about
    cbrt of float64's epsilon, 6e-6)."""
    return float(math.pow(noise, 1.0 / 3.0))


def step_dependent(err_h: float, err_2h: float) -> bool:
    """Whether a finite-difference error measured at steps h and 2h is the step's own."""
    if not (math.isfinite(err_h) and math.isfinite(err_2h)):
        return False
    return abs(err_2h - err_h) > STEP_DEPENDENT * max(err_h, err_2h)

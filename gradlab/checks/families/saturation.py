"""Where the reference is flat: a wrong gradient only where the reference's is exactly 0.

A reference that clamps (artanh's argument held at 1 - 1e-15 past the Poincare ball's edge, a
probability clipped to [eps, 1 - eps]) has a zero gradient past the clamp.  A Function may keep
another convention there (torchdr's Artanh passes 1 / (1 - x^2) through at the clamped x, so a
point outside the ball still gets a gradient pointing back in), and the case's own values say
nothing about which is meant when they never reach the clamp: an input whose new values cross
it (a curvature moved, rows grown with the case's per-coordinate range that leave the ball) is
as uncertain as values beyond the case's sign or range (inputspace.outside).  So a failure
whose every wrong element is a finite gradient element where the reference's is exactly 0
over a region (not a stationary point), with every output right, at values within the case's
own range whose reference gradient has no exact 0, is a warn (pointjudge's `domain`).  Values
moved past the case's own range into a flat region (a value planted below a dead zone's
threshold the Function's code names) stay certain, as codefacts' thresholds are.  A NaN or
inf there stays certain (a focal loss whose gradient is NaN where the reference's saturated
sigmoid gives 0), and so does a wrong gradient where the case already reaches the flat
region (a ReLU whose backward passes negative inputs' gradient, at a case with both signs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, materialize
from gradlab.checks.diagnosis.diagnose import compare
from gradlab.checks.families.inputspace import SEED, Point
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Case, Tolerance


def values_moved(point: Point) -> bool:
    """The point moves values, sizes or float arguments only: no index tensor's positions
    (a source row another overwrites has a zero gradient by the indices' structure), no int,
    bool or string setting (x * n at n = 0 is flat everywhere by the setting), and no values
    rescaled (tiny or large: an underflow there is pointjudge's `scale`)."""
    return (not (point.lowered or point.raised)
            and all(isinstance(v, float) for _, v in point.ints)
            and not any(kind in ("tiny", "large") for _, kind in point.values))


def wrong_where_flat(got: Run, want: Run, tol: Tolerance) -> dict[int, Tensor]:
    """Each gradient (by its position in the runs' grads) wrong only at finite elements where
    the reference's is exactly 0, with those elements; {} where any output is wrong, any
    gradient is wrong elsewhere, or nothing is wrong."""
    if len(got.outs) != len(want.outs) or len(got.grads) != len(want.grads):
        return {}
    for g, w in zip(got.outs, want.outs, strict=True):
        if g.shape != w.shape or (g.numel() and not compare(g, w, tol, scaled=True).ok):
            return {}
    flat = {}
    for k, (g, w) in enumerate(zip(got.grads, want.grads, strict=True)):
        if g is None or w is None or g.shape != w.shape or not g.numel():
            continue
        diff = compare(g, w, tol, scaled=True)
        if diff.ok or diff.mask is None:
            continue
        off = diff.mask.reshape(g.shape)  # compare's own wrong elements (on the CPU)
        g64, w64 = g.detach().double().cpu(), w.detach().double().cpu()
        if not bool(torch.isfinite(g64[off]).all()) or not bool((w64[off] == 0).all()):
            return {}
        flat[k] = off
    return flat


#: The nudge (relative to each input's largest magnitude, at least 1) that tells a flat region
#: (a clamp: the gradient stays 0) from a stationary point (i0 at 0, x^2 at 0: it does not).
NUDGE = 1e-6


def stays_flat(ref: Callable[..., Any], inputs: Inputs, want: Run,
               flat: dict[int, Tensor]) -> bool:
    """The reference's gradient stays exactly 0 at the flat elements with every
    differentiable input nudged by NUDGE (seeded): a region, not a point."""
    nudged = inputs.clone()
    gen = torch.Generator().manual_seed(SEED)
    for i in nudged.diff_index:
        x = nudged.args[i].detach()
        if x.is_floating_point() and x.numel():
            scale = max(float(x.abs().max()), 1.0)
            x.add_(NUDGE * scale * (2 * torch.rand(x.shape, generator=gen, dtype=x.dtype) - 1))
    run = run_once(ref, nudged, want.grad_outs64 or None, gen)
    if run.error is not None or len(run.grads) != len(want.grads):
        return False
    grads: list[Tensor | None] = run.grads
    return all(grads[k] is not None and bool((grads[k].detach().cpu()[off] == 0).all())
               for k, off in flat.items())


def flat_beyond_case(ref: Callable[..., Any], case: Case, inputs: Inputs, got: Run,
                     want: Run, tol: Tolerance, device: str) -> bool:
    """The Function is wrong only where the reference is flat (wrong_where_flat), over a
    region (stays_flat), at values within the case's own range (_within), and the reference's
    gradient of each such input on the case's own values holds no exact 0."""
    flat = wrong_where_flat(got, want, tol)
    if not flat:
        return False
    try:
        own = materialize(case, "float64", device, SEED)
    except Exception:
        return False
    # the cheap test first: each a reference run, the nudge and the case's own
    if not all(_within(inputs.args[i], own.args[i]) for i in own.diff_index):
        return False
    if not stays_flat(ref, inputs, want, flat):
        return False
    run = run_once(ref, own, None, torch.Generator().manual_seed(SEED))
    if run.error is not None or len(run.grads) != len(want.grads):
        return False
    grads: list[Tensor | None] = run.grads
    return all(grads[k] is not None and not bool((grads[k] == 0).any()) for k in flat)


def _within(x: Any, own: Any) -> bool:
    """Every value of `x` lies within the range of `own` (the case's values of the same
    argument): the clamp is crossed by the values' combination (a row's norm), sizes or a
    float argument, not by values moved past the case's own (a planted value below a dead
    zone's threshold the case never reaches is a region the Function's code names: certain)."""
    if not (isinstance(x, Tensor) and isinstance(own, Tensor)) or not own.numel():
        return False
    if not x.numel():
        return True
    a, b = x.detach().double(), own.detach().double()
    return bool(a.min() >= b.min()) and bool(a.max() <= b.max())

"""Test Functions for the variant verdicts (issue 21): inputs the reference refuses, failures
that depend on the values rather than the layout, and a Function checked without a reference.

Each broken Function has a correct twin; the specs next to this file use them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
import torch.nn.grad
from torch import Tensor
from torch.autograd import Function

# --- a grouped conv that computes where the reference refuses ---------------------------------


def _chunked_conv(x: Tensor, w: Tensor, b: Tensor, groups: int) -> Tensor:
    # torch.chunk splits unevenly when groups does not divide the channels: no check, as a
    # C++ kernel that loops over ceil-sized groups would
    outs = [F.conv2d(xc, wc, None, 1, 1) for xc, wc in zip(x.chunk(groups, 1),
                                                            w.chunk(groups, 0), strict=True)]
    return torch.cat(outs, 1) + b.view(1, -1, 1, 1)


class ChunkedGroupConv(Function):
    """CORRECT grouped 3x3 conv (padding 1) that never checks that groups divides the output
    channels: it computes (uneven groups) where F.conv2d raises."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor, groups: int) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.groups = groups
        return _chunked_conv(x, w, b, groups)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        x, w = ctx.saved_tensors
        ws = w.chunk(ctx.groups, 0)
        gs = g.split([wc.shape[0] for wc in ws], 1)
        gx, gw = [], []
        for xc, wc, gc in zip(x.chunk(ctx.groups, 1), ws, gs, strict=True):
            gx.append(torch.nn.grad.conv2d_input(xc.shape, wc, gc, padding=1))
            gw.append(torch.nn.grad.conv2d_weight(xc, wc.shape, gc, padding=1))
        return torch.cat(gx, 1), torch.cat(gw, 0), g.sum((0, 2, 3)), None


def grouped_conv_reference(x: Tensor, w: Tensor, b: Tensor, groups: int) -> Tensor:
    return F.conv2d(x, w, b, 1, 1, 1, groups)


class ChunkedGroupConvTiledBackward(ChunkedGroupConv):
    """BROKEN at ragged sizes the reference accepts: the input gradient's last column is never
    written when the width is odd (tiles of 2 along the width, the remainder dropped)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        gx, gw, gb, _ = ChunkedGroupConv.backward(ctx, g)
        x, _ = ctx.saved_tensors
        if x.shape[-1] % 2:
            gx = gx.clone()
            gx[..., -1] = 0  # the remainder column never written
        return gx, gw, gb, None


# --- an approximate backward whose error depends on the values --------------------------------

#: Steps of the fixed-step RK4 integration ApproxExpSum's backward uses: with 20 steps, the
#: relative error of exp(s) is ~ s^5 / (120 * 20^4) (7e-6 at s = 2.7, 2e-11 at s = 0.2).
RK4_STEPS = 20


def rk4_exp(s: Tensor, steps: int = RK4_STEPS) -> Tensor:
    """exp(s) by integrating y' = y from 0 to s in `steps` fixed RK4 steps (an ODE solve)."""
    y = torch.ones_like(s)
    h = s / steps
    for _ in range(steps):
        k1 = y
        k2 = y + h / 2 * k1
        k3 = y + h / 2 * k2
        k4 = y + h * k3
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


class ApproxExpSum(Function):
    """APPROXIMATE by design: y = exp(x.sum(0)), its backward's exp(s) from a fixed-step ODE
    solve (an adjoint method's discretisation error, which grows with |s|).  Correct within
    its error, which depends on the values: the expanded variant repeats x's first row, so its
    column sums (3 * x[0]) are large where the example's are small."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        s = x.sum(0)
        ctx.save_for_backward(s)
        ctx.rows = x.shape[0]
        return torch.exp(s)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (s,) = ctx.saved_tensors
        return rows_of(g * rk4_exp(s), ctx.rows)


def rows_of(t: Tensor, rows: int) -> Tensor:
    """`t` repeated as `rows` rows (the gradient of a sum over dim 0)."""
    return t.unsqueeze(0).expand(rows, *t.shape).contiguous()


def exp_sum_reference(x: Tensor) -> Tensor:
    return torch.exp(x.sum(0))


def small_sums_example() -> Tensor:
    """3 x 4 float64 values whose column sums are small (|s| <= 0.2) but whose first row is
    not (|x[0]| ~ 0.9): the expanded variant's sums reach 2.7."""
    first = torch.tensor([0.9, -0.8, 0.85, -0.9], dtype=torch.float64)
    x = torch.stack([first, -0.5 * first + 0.05, -0.5 * first + 0.1])
    return x.requires_grad_()


class ExpSumRawGradOut(Function):
    """BROKEN for a non-contiguous grad_output: backward reads its raw memory as if it were
    contiguous (as a kernel handed data_ptr() would)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        s = x.sum(0)
        y = torch.exp(s)
        ctx.save_for_backward(y)
        ctx.rows = x.shape[0]
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        raw = g.as_strided(g.shape, [1])  # the strides of a contiguous 1-D tensor
        return rows_of(raw * y, ctx.rows)


class ExpSum(Function):
    """Correct twin of ApproxExpSum and ExpSumRawGradOut (exact backward)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.exp(x.sum(0))
        ctx.save_for_backward(y)
        ctx.rows = x.shape[0]
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return rows_of(g * y, ctx.rows)


# --- an approximate method whose error merely varies with the magnitude -----------------------

#: ApproxSin's relative error in backward: DELTA * tanh(|x|) (below DELTA * 0.77 for the
#: example's |x| <= 1, DELTA at the magnitude variant's |x| ~ 1000).
DELTA = 1e-6


class ApproxSin(Function):
    """APPROXIMATE by design: y = sin(x); backward's cos(x) carries a relative error that grows
    with |x| up to DELTA (a solver at its tolerance, as an SDE adjoint's discretisation error)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.cos(x) * (1 + DELTA * torch.tanh(x.abs()))


class SinOverflowing(Function):
    """BROKEN at large magnitudes: backward's cos(x) through exp of |x| (overflows to inf)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        big = torch.exp(x.abs())
        return g * torch.cos(x) * big / big


class Sin(Function):
    """Correct twin of ApproxSin and SinOverflowing."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


def sin_reference(x: Tensor) -> Tensor:
    return torch.sin(x)


#: The tolerance ApproxSin is checked with: its base values pass (error <= 0.77 DELTA), the
#: magnitude variant's do not (error DELTA), by a small factor.
APPROX_SIN_RTOL = 0.9 * DELTA
assert math.tanh(1.0) * DELTA < APPROX_SIN_RTOL < DELTA


# --- a bug only repeated values show --------------------------------------------------------


class MaxOverRowsTies(Function):
    """BROKEN for tied values: every row that ties for the max gets the whole gradient (the
    reference, amax, shares it evenly).  The expanded variant repeats the first row, so every
    row ties; a plain contiguous copy of those values fails alike: value_dependent, not
    expanded_only."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.amax(0)
        ctx.save_for_backward((x == y).to(x.dtype))
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g * mask


class MaxOverRows(Function):
    """Correct twin: ties share the gradient evenly, as amax's."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.amax(0)
        ctx.save_for_backward((x == y).to(x.dtype))
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g * mask / mask.sum(0)


def amax_reference(x: Tensor) -> Tensor:
    return x.amax(0)


# --- a 0-d scale parameter (ternary quantization's learned scale) -----------------------------


class ZeroDimScale(Function):
    """CORRECT `w * x` with a 0-d scale w: w's gradient is 0-d, as w is; every variant must
    hand w over as 0-d (the ragged one once grew it to [1] and called this wrong-shaped)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return w * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum()


class ZeroDimScaleSignBug(Function):
    """Broken twin: w's gradient sums g * |x| (the sign dropped, as a ternary quantizer's
    magnitude-only scale gradient would)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return w * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, (g * x.abs()).sum()


def scale_reference(x: Tensor, w: Tensor) -> Tensor:
    return w * x

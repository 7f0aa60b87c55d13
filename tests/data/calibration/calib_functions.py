"""Functions for the hint-calibration tests: each wrong-hint case of issue 21 (must-have 4), a
classic case that keeps its hint, and the correct twins.

- GELU (tanh approximation) whose backward forgot the factor 3 of one term: near a constant
  factor by cosine (0.9996), but its per-element ratio spreads 0.7..1.4: no factor hint;
- Sin whose backward is off by exactly 2, or negated: `constant_factor` (ratio 2) and `sign`;
- Double whose backward drops the last partial tile of 8s (indices 24..29 of 30), or gets
  indices 17..29 wrong (no tile boundary: a slice);
- Mul whose backward detaches grad_output (second order: grad_output 0, not "input 2");
- Mul whose gradient for w is gated on needs_input_grad[0] (missing in a requires_grad subset);
- SinCosKept declared without double backward (second_order: false) whose double backward runs,
  silently wrong;
- Scale whose forward caches its weight by tensor identity (ignores in-place updates);
- ReLU and abs checked at 0 and within the finite-difference step of 0 (kinks), and an abs
  whose backward has the wrong sign at positive values.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

#: sqrt(2 / pi), the tanh approximation's constant.
K = math.sqrt(2 / math.pi)
#: The cubic term's coefficient of the tanh approximation.
C = 0.044715


def gelu_reference(x: Tensor) -> Tensor:
    return 0.5 * x * (1 + torch.tanh(K * (x + C * x ** 3)))


class Gelu(Function):
    """GELU (tanh approximation) with its right derivative."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return gelu_reference(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        t = torch.tanh(K * (x + C * x ** 3))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K * (1 + 3 * C * x * x))


class GeluForgot3(Gelu):
    """GELU whose backward forgot the factor 3 of the cubic term's derivative."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        t = torch.tanh(K * (x + C * x ** 3))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K * (1 + C * x * x))


class Sin(Function):
    """sin with its right derivative."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.cos(x)


class SinCosKept(Sin):
    """sin whose backward multiplies by cos(x) computed in forward and kept on ctx as a plain
    attribute: first order right, double backward silently misses the -sin(x) share."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.cos = torch.cos(x).detach()
        return torch.sin(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.cos


class SinTwice(Sin):
    """sin whose backward is off by exactly 2."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * g * torch.cos(x)


class SinNegated(Sin):
    """sin whose backward has its sign flipped."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return -g * torch.cos(x)


def sin_reference(x: Tensor) -> Tensor:
    return torch.sin(x)


class Double(Function):
    """y = 2x."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


class DoubleTail8(Double):
    """y = 2x whose backward runs a grid of n // 8 tiles of 8 along the last dim: the last
    partial tile (24..29 of 30) is never written."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        out = g * 2
        n = g.shape[-1]
        out[..., (n // 8) * 8:] = 0
        return out


class DoubleFrom17(Double):
    """y = 2x whose backward halves indices 17.. of the last dim (17 is no tile boundary)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        out = g * 2
        out[..., 17:] *= 0.5
        return out


class DoubleTopRows(Double):
    """y = 2x whose backward halves the first two rows of the last two dims (one side only:
    a range of one dim, not a border band)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        out = g * 2
        out[..., :2, :] *= 0.5
        return out


def double_reference(x: Tensor) -> Tensor:
    return x * 2


class Mul(Function):
    """y = x * w."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        return g * w, g * x


class MulDetachedGrad(Mul):
    """y = x * w whose backward detaches grad_output: right first order, but double backward
    has no path to grad_output (second order: a missing gradient for grad_output 0)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        return g.detach() * w, g.detach() * x


class MulGatedWrong(Mul):
    """y = x * w whose gradient for w is gated on needs_input_grad[0] (x's entry)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        gx = g * w if ctx.needs_input_grad[0] else None
        gw = g * x if ctx.needs_input_grad[0] else None
        return gx, gw


class MulNoGradW(Mul):
    """y = x * w whose backward returns no gradient for w at all."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        _, w = ctx.saved_tensors
        return g * w, None


def mul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x * w


#: The broken ScaleCached's cache: id of a weight -> (a weak reference to it, its values).
_CACHE: dict[int, tuple[weakref.ref[Tensor], Tensor]] = {}


def cached_values(w: Tensor) -> Tensor:
    """w's values as first seen: a cache keyed on the tensor (later in-place updates unseen)."""
    hit = _CACHE.get(id(w))
    if hit is not None and hit[0]() is w:
        return hit[1]
    value = w.detach().clone()
    _CACHE[id(w)] = (weakref.ref(w), value)
    return value


class Scale(Function):
    """y = x * w (w read every call)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, g * x


class ScaleCached(Scale):
    """y = x * w whose forward reads w's values once per tensor (a cache keyed on it)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        wc = cached_values(w)
        ctx.save_for_backward(x, wc)
        return x * wc


class Relu(Function):
    """relu with torch's convention at 0 (gradient 0)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


def relu_reference(x: Tensor) -> Tensor:
    return torch.relu(x)


class Abs(Function):
    """abs with torch's convention at 0 (gradient 0)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.sign(x)


class AbsWrongSign(Abs):
    """abs whose backward has the wrong sign at positive values."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.where(x > 0, -torch.ones_like(x), torch.sign(x))


def abs_reference(x: Tensor) -> Tensor:
    return torch.abs(x)


#: Example values with a kink of relu and abs: one element exactly 0, one within the
#: finite-difference step (1e-6) of 0; the others away from it.
KINK_VALUES = [[0.0, 3e-7, 0.5, -0.7, 1.3], [-0.2, 0.9, -1.1, 0.4, 2.0]]

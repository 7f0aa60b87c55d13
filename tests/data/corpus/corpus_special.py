"""The hint corpus's hand-written Functions: bugs no base-op mutation makes (a dropout that
draws a new mask in backward, state outside ctx, a cache that ignores in-place updates, an
output not marked non-differentiable, ...), each beside its correct twin.  corpus_entries.py
lists them as entries.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

F64 = torch.float64


def values(*shape: int, seed: int = 0, dtype: torch.dtype = F64, n: int = 1) -> list[Tensor]:
    """n seeded tensors uniform in [-0.8, 1.2) (away from a clamp's kink at 0), requiring
    grad."""
    gen = torch.Generator().manual_seed(seed)
    return [(torch.rand(shape, generator=gen, dtype=F64) * 2 - 0.8).to(dtype).requires_grad_()
            for _ in range(n)]


def args_of(*shape: int, n: int = 1, dtype: torch.dtype = F64) -> Callable[[], list[Any]]:
    return lambda: values(*shape, n=n, dtype=dtype)


# --------------------------------------------------------------------------------------------
# dropout: the mask must be the same in forward and backward

#: the drop probability
P = 0.3


def dropout_mask(like: Tensor) -> Tensor:
    """The kept elements, scaled by 1 / (1 - P): one draw from the global generator."""
    keep = torch.rand(like.shape, dtype=like.dtype, device=like.device) >= P
    return keep.to(like.dtype) / (1 - P)


def dropout_reference(x: Tensor) -> Tensor:
    return x * dropout_mask(x)


class DropoutReplay(Function):
    """Correct and memory-lean: keeps the RNG state, not the mask; backward replays the draw
    and restores the generator."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.rng = torch.get_rng_state()
        return x * dropout_mask(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        now = torch.get_rng_state()
        torch.set_rng_state(ctx.rng)
        mask = dropout_mask(g)
        torch.set_rng_state(now)
        return g * mask


class DropoutFreshMask(Function):
    """BROKEN: backward draws a new mask instead of replaying forward's."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * dropout_mask(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * dropout_mask(g)


# --------------------------------------------------------------------------------------------
# state outside ctx, a cache that ignores in-place updates


class Exp(Function):
    """Correct: the output saved with save_for_backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class ExpStateOnClass(Function):
    """BROKEN: the output kept on the Function class; a second forward before the first
    backward (two micro-batches, a second loss) overwrites it."""

    last: Tensor | None = None

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ExpStateOnClass.last = y  # differentiable: only the place is wrong, not the math
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        assert ExpStateOnClass.last is not None
        return g * ExpStateOnClass.last


#: BROKEN state of MulStateInModule: the last weight seen, at module level
LAST_WEIGHT: dict[str, Tensor] = {}


class MulStateInModule(Function):
    """BROKEN: the weight kept in a module-level dict, not on ctx."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        LAST_WEIGHT["w"] = w
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (x,) = ctx.saved_tensors
        return g * LAST_WEIGHT["w"], g * x


class Mul(Function):
    """Correct: both inputs saved, both gradients gated on their own needs_input_grad."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        return (g * w if ctx.needs_input_grad[0] else None,
                g * x if ctx.needs_input_grad[1] else None)


class MulGateSwapped(Function):
    """BROKEN: each gradient gated on the other input's needs_input_grad entry."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        return (g * w if ctx.needs_input_grad[1] else None,
                g * x if ctx.needs_input_grad[0] else None)


def mul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x * w


#: ExpCached's cache: id(input) -> (a weak reference to the input, its version, exp(input))
CACHE: dict[int, tuple[weakref.ref[Tensor], int, Tensor]] = {}


def cached_exp(x: Tensor, versioned: bool) -> Tensor:
    """exp(x) from the cache when x (the same tensor object, alive) was seen before, and,
    when versioned, has not been written in place since."""
    hit = CACHE.get(id(x))
    if hit is None or hit[0]() is not x or (versioned and hit[1] != x._version):
        hit = (weakref.ref(x), x._version, x.detach().exp())
        CACHE[id(x)] = hit
    return hit[2].clone()


class ExpCached(Function):
    """BROKEN: caches exp(x) per input tensor and never notices that x changed in place."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = cached_exp(x, versioned=False)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class ExpCachedVersioned(ExpCached):
    """Correct twin: the cache entry holds the input's version counter and is refreshed when
    an in-place update moved it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = cached_exp(x, versioned=True)
        ctx.save_for_backward(y)
        return y


class ExpForwardExpm1(Function):
    """BROKEN forward: expm1 typed for exp (the backward is exp's, and right for both)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.expm1(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * x.exp()


class MulConstantGradForFloat(Function):
    """BROKEN: returns d/dc of x * c for the python float c (must be None)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, c: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.c = c
        return x * c

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (x,) = ctx.saved_tensors
        return g * ctx.c, (g * x).sum()


class MulConstant(MulConstantGradForFloat):
    """Correct twin: None for the float."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return g * ctx.c, None


def mulconstant_reference(x: Tensor, c: float) -> Tensor:
    return x * c


# --------------------------------------------------------------------------------------------
# outputs that are (not) differentiable: x centred along its last dim, and the mean


def _centre(x: Tensor) -> tuple[Tensor, Tensor]:
    m = x.mean(-1, keepdim=True)
    return x - m, m


def _centre_backward(gy: Tensor) -> Tensor:
    return gy - gy.mean(-1, keepdim=True)


def centre_stats_reference(x: Tensor) -> tuple[Tensor, Tensor]:
    """The mean is a statistic (a running buffer's update): detached."""
    y, m = _centre(x)
    return y, m.detach()


class CentreStats(Function):
    """Correct: the mean is marked non-differentiable, as the reference's is detached."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        y, m = _centre(x)
        ctx.mark_non_differentiable(m)
        return y, m

    @staticmethod
    def backward(ctx: Any, gy: Tensor, gm: Tensor | None) -> Tensor:
        return _centre_backward(gy)


class CentreStatsNotMarked(CentreStats):
    """BROKEN: the mean is returned differentiable (not marked), and backward ignores its
    gradient: a buffer that stores it keeps the graph alive, and a loss through it gets a
    silently zero gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        return _centre(x)


def centre_reference(x: Tensor) -> tuple[Tensor, Tensor]:
    """Both outputs differentiable."""
    return _centre(x)


class Centre(Function):
    """Correct: both outputs differentiable; with materialize_grads off, an output nobody
    used has no gradient (None), and backward says what that means."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        ctx.n = x.shape[-1]
        return _centre(x)

    @staticmethod
    def backward(ctx: Any, gy: Tensor | None, gm: Tensor | None) -> Tensor | None:
        grad = _centre_backward(gy) if gy is not None else None
        if gm is not None:
            share = (gm / ctx.n).expand(*gm.shape[:-1], ctx.n)
            grad = share if grad is None else grad + share
        return grad


class CentreNoneUnchecked(Centre):
    """BROKEN: materialize_grads off, and backward uses both gradients unchecked: a loss on
    one output only (the other's gradient None) raises."""

    @staticmethod
    def backward(ctx: Any, gy: Tensor, gm: Tensor) -> Tensor:
        return _centre_backward(gy) + gm / ctx.n


class ExpInnerX2(Function):
    """exp whose own backward is off by 2 (the helper ExpOuter's backward calls)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return 2 * g * y


class ExpOuter(Function):
    """BROKEN one order up: backward is right, but it computes exp(x) through ExpInnerX2,
    whose wrong backward is what double backward differentiates."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * ExpInnerX2.apply(x)

"""The hint corpus's hand-written entries: bugs no base-op mutation makes, and the bug classes.

Each broken Function is the mistake as people write it; its twin is the fix.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bugclasses"))
import bugclass_functions as bf
from corpus_ops import Entry

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


# --------------------------------------------------------------------------------------------
# a false claim of no double backward; a kink in the example values; a grouped op


class ExpOnce(Exp):
    """Correct for `second_order=False`: backward is once_differentiable, so double backward
    raises as declared."""

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class Relu(Function):
    """Correct, with torch's convention at 0 (derivative 0 there)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


class ReluSlope2(Relu):
    """BROKEN: slope 2 in backward (a leaky-relu's scale pasted in)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * 2 * (x > 0).to(g.dtype)


def relu_at_kink() -> list[Tensor]:
    """Example values with exact zeros: relu's kink, where left and right differences
    disagree and any derivative in [0, 1] is a convention."""
    (x,) = values(3, 4)
    with torch.no_grad():
        x[0, 0] = 0.0
        x[2, 1] = 0.0
    return [x]


#: the group count of the grouped op: channels must be a multiple of it
GROUPS = 2


def _group_centre(x: Tensor) -> Tensor:
    """x minus its mean over each group of channels (dim 1) and positions, channel by channel
    group, as a kernel would loop: channels past GROUPS * (C // GROUPS) are left as they are
    (no input validation)."""
    y = x.clone()
    size = x.shape[1] // GROUPS
    for k in range(GROUPS):
        part = x[:, k * size:(k + 1) * size]
        y[:, k * size:(k + 1) * size] = part - part.mean((1, 2), keepdim=True)
    return y


def group_centre_reference(x: Tensor) -> Tensor:
    """The same with a reshape: refuses channels that are no multiple of GROUPS."""
    n, c, length = x.shape
    v = x.reshape(n, GROUPS, c // GROUPS, length)
    if v.shape[2] * GROUPS != c:
        raise ValueError(f"channels {c} are no multiple of groups {GROUPS}")
    return (v - v.mean((2, 3), keepdim=True)).reshape(n, c, length)


class GroupCentre(Function):
    """Correct: the op is linear and self-adjoint, so backward is the op on grad_output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return _group_centre(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return _group_centre(g)


class GroupCentreX2(GroupCentre):
    """BROKEN: backward scaled by 2."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * _group_centre(g)


# --------------------------------------------------------------------------------------------
# the list


def H(*codes: str) -> frozenset[str]:
    return frozenset(codes)


def special() -> list[Entry]:
    """The hand-written entries and the bug classes (tests/data/bugclasses)."""
    one, two = args_of(3, 4), args_of(3, 4, n=2)
    return [
        Entry("dropout-freshmask", DropoutFreshMask, DropoutReplay, dropout_reference, one,
              H("rng_replay"), "backward draws a fresh dropout mask", pending="rng_replay"),
        Entry("exp-state_on_class", ExpStateOnClass, Exp, torch.exp, one,
              H("state_outside_ctx"), "the output kept on the Function class",
              twin_id="special-exp", pending="state_outside_ctx"),
        Entry("mul-state_in_module", MulStateInModule, Mul, mul_reference, two,
              H("state_outside_ctx"), "the weight kept in a module-level dict",
              twin_id="special-mul", pending="state_outside_ctx"),
        Entry("exp-cached", ExpCached, ExpCachedVersioned, torch.exp, one, H("cached_forward"),
              "forward caches exp(x) and ignores in-place updates of x",
              pending="cached_forward"),
        Entry("centre-not_marked", CentreStatsNotMarked, CentreStats, centre_stats_reference,
              one, H("output_differentiable"), "a statistic output not marked "
              "non-differentiable", pending="output_differentiable"),
        Entry("mul-gate_swapped", MulGateSwapped, Mul, mul_reference, two,
              H("requires_grad_subset"), "gradients gated on the other input's "
              "needs_input_grad", twin_id="special-mul"),
        Entry("exp-forward_expm1", ExpForwardExpm1, Exp, torch.exp, one, H("forward"),
              "forward computes expm1 instead of exp", twin_id="special-exp"),
        Entry("mulconstant-grad_for_float", MulConstantGradForFloat, MulConstant,
              mulconstant_reference, lambda: [*values(3, 4), 2.5], H("non_tensor_grad"),
              "a gradient returned for a python float"),
        Entry("exp-second_order_claimed", Exp, ExpOnce, torch.exp, one,
              H("second_order_claimed"), "second_order: False claimed, double backward runs",
              options={"second_order": False}, says="once_differentiable"),
        Entry("relu-slope2_at_kink", ReluSlope2, Relu, torch.relu, relu_at_kink,
              H("constant_factor"), "backward scaled by 2 (example values at the kink)"),
        Entry("groupcentre-x2", GroupCentreX2, GroupCentre, group_centre_reference,
              args_of(2, 4, 3), H("constant_factor"),
              "backward scaled by 2 (the reference refuses ragged channel counts)"),
        # the bug classes, as tests/test_bug_classes.py checks them
        Entry("bugclass-output_on_ctx", bf.ExpOutputOnCtx, bf.Exp, torch.exp, one,
              H("ctx_output"), "the output kept on ctx"),
        Entry("bugclass-input_on_ctx", bf.MulInputOnCtx, bf.Mul, bf.mul_reference, two,
              H("ctx_input"), "an input kept on ctx"),
        Entry("bugclass-not_reentrant", bf.ScaleConsumesCtx, bf.Scale, bf.scale_reference, one,
              H("not_reentrant"), "backward changes state on ctx"),
        Entry("bugclass-inplace_not_marked", bf.ClampInPlaceNotMarked, bf.ClampInPlace,
              torch.relu, one, H("inplace_input"), "forward writes its input, no mark_dirty"),
        Entry("bugclass-magnitude_naive", bf.SoftplusNaive, bf.Softplus,
              bf.softplus_reference, args_of(3, 4, dtype=torch.float32), H("magnitude_only"),
              "exp(x) / (1 + exp(x)) overflows at large x"),
        Entry("bugclass-ragged_floor", bf.DoubleTiledFloor, bf.DoubleTiled,
              bf.double_reference, args_of(4, 16), H("ragged_only", "tail_tile"),
              "n // TILE tiles: the remainder dropped"),
    ]

"""The hint corpus's hand-written entries: the list, and the edge cases it adds (a false claim of
no double backward, a kink in the example values, a grouped op whose reference refuses ragged
sizes).  The broken Functions and twins they share are in corpus_special.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bugclasses"))
import bugclass_functions as bf
from corpus_ops import Entry
from corpus_special import (
    Centre,
    CentreNoneUnchecked,
    CentreStats,
    CentreStatsNotMarked,
    DropoutFreshMask,
    DropoutReplay,
    Exp,
    ExpCached,
    ExpCachedVersioned,
    ExpForwardExpm1,
    ExpOuter,
    ExpStateOnClass,
    Mul,
    MulConstant,
    MulConstantGradForFloat,
    MulGateSwapped,
    MulStateInModule,
    args_of,
    centre_reference,
    centre_stats_reference,
    dropout_reference,
    mul_reference,
    mulconstant_reference,
    values,
)

# --------------------------------------------------------------------------------------------
# a false claim of no double backward; a kink in the example values; a grouped op


class ExpKept(Exp):
    """Declared `second_order=False`, yet double backward runs: exp(x) kept on ctx as a plain
    attribute, so the second derivative silently misses its x-share (issue 28: a warn that
    names once_differentiable; a double backward that is right would pass)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.y = x.exp().detach()
        return x.exp()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.y


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
        Entry("exp-second_order_claimed", ExpKept, ExpOnce, torch.exp, one,
              H("second_order_claimed"), "second_order: False claimed, double backward runs "
              "silently wrong",
              options={"second_order": False}, says="once_differentiable"),
        Entry("relu-slope2_at_kink", ReluSlope2, Relu, torch.relu, relu_at_kink,
              H("constant_factor"), "backward scaled by 2 (example values at the kink)"),
        Entry("groupcentre-x2", GroupCentreX2, GroupCentre, group_centre_reference,
              args_of(2, 4, 3), H("constant_factor"),
              "backward scaled by 2 (the reference refuses ragged channel counts)"),
        Entry("centre-none_unchecked", CentreNoneUnchecked, Centre, centre_reference, one,
              H("undefined_grad"), "materialize_grads off, a None output gradient used"),
        Entry("exp-inner_backward_x2", ExpOuter, Exp, torch.exp, one, H("second_order_only"),
              "backward right, but built on a Function whose backward is off by 2",
              twin_id="special-exp"),
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

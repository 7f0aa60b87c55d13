"""Bug classes found on the contract row, each broken Function beside its correct twin."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function


class ExpOutputOnCtx(Function):
    """BROKEN: the output kept as ctx.y: output -> node -> ctx -> output, a reference cycle."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.y


class Exp(Function):
    """Correct twin: the output saved with save_for_backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class MulInputOnCtx(Function):
    """BROKEN: the weight kept as ctx.w: an optimizer step between forward and backward goes
    unnoticed and the gradient uses the new weight."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        ctx.w = w
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x


class Mul(Function):
    """Correct twin of MulInputOnCtx, with an intermediate (not an input) on ctx: allowed."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.scale = torch.ones(())  # an intermediate: not an input or output, fine on ctx
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale


def mul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x * w


class ScaleConsumesCtx(Function):
    """BROKEN: backward updates a factor kept on ctx, so a second backward through the same graph
    (retain_graph=True: a second loss, a gradient penalty) gets twice the gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.factor = [3.0]
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        factor = ctx.factor[0]
        ctx.factor[0] = factor * 2  # "scheduled" growth that belongs in forward, not here
        return g * factor


class Scale(Function):
    """Correct twin: backward reads ctx and leaves it alone."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.factor = 3.0
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.factor


def scale_reference(x: Tensor) -> Tensor:
    return x * 3


class ClampInPlace(Function):
    """Correct in-place Function: clamps its input in place and says so with mark_dirty (it
    cannot take a leaf that requires grad; in a model its input is an intermediate)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (y > 0).to(g.dtype)


class ClampInPlaceNotMarked(Function):
    """BROKEN: clamps its input in place without mark_dirty: autograd does not know the input
    changed, so every later reader of it gets a gradient without the clamp."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.clamp_(min=0)
        y = x.clone()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (y > 0).to(g.dtype)


class SoftplusNaive(Function):
    """BROKEN at large inputs: backward is exp(x) / (1 + exp(x)), inf / inf = NaN at x = 100 in
    float32 where the derivative is 1."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        e = x.exp()
        return g * e / (1 + e)


class Softplus(Function):
    """Correct twin: the derivative as sigmoid(x), stable at any magnitude."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


def softplus_reference(x: Tensor) -> Tensor:
    return torch.nn.functional.softplus(x)


TILE = 8


class DoubleTiledFloor(Function):
    """BROKEN for sizes that are no multiple of the tile: backward walks n // TILE tiles of the
    last dim and never writes the remainder."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        gx = torch.zeros_like(g)
        n = g.shape[-1]
        for t in range(n // TILE):
            gx[..., t * TILE:(t + 1) * TILE] = 2 * g[..., t * TILE:(t + 1) * TILE]
        return gx


class DoubleTiled(Function):
    """Correct twin: cdiv(n, TILE) tiles, the last one partial."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        gx = torch.zeros_like(g)
        n = g.shape[-1]
        for t in range(-(-n // TILE)):
            gx[..., t * TILE:(t + 1) * TILE] = 2 * g[..., t * TILE:(t + 1) * TILE]
        return gx


def double_reference(x: Tensor) -> Tensor:
    return x * 2

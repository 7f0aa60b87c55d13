"""Functions for the outputs-and-contract tests (issue 21): outputs that do not require grad,
an input written through `.data`, and backward state kept outside ctx, each a broken Function
beside its correct twin."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

#: batch-norm's epsilon
EPS = 1e-5


def _normalise(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(y, mean, var, rstd) of a batch norm over dim 0 without affine parameters."""
    mean = x.mean(0)
    var = x.var(0, unbiased=False)
    rstd = (var + EPS).rsqrt()
    return (x - mean) * rstd, mean, var, rstd


def _normalise_backward(y: Tensor, rstd: Tensor, g: Tensor) -> Tensor:
    """Batch norm's input gradient from its output y and 1/std."""
    return rstd * (g - g.mean(0) - y * (g * y).mean(0))


class BatchStats(Function):
    """Correct: a batch norm returning its batch statistics (to update running buffers) marked
    non-differentiable, as nn.BatchNorm's kernels do."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y, mean, var, _ = _normalise(x)
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable(mean, var)
        return y, mean, var

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gmean: Tensor, _gvar: Tensor) -> Tensor:
        # recomputed from x with differentiable ops: double backward is right too
        (x,) = ctx.saved_tensors
        y, _, _, rstd = _normalise(x)
        return _normalise_backward(y, rstd, g)


class BatchStatsLeaky(Function):
    """BROKEN: the same without mark_non_differentiable: the statistics require grad, so a
    running buffer updated from them keeps every batch's graph alive."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y, mean, var, _ = _normalise(x)
        ctx.save_for_backward(x)
        return y, mean, var

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gmean: Tensor, _gvar: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        y, _, _, rstd = _normalise(x)
        return _normalise_backward(y, rstd, g)


def batch_stats_reference(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Plain autograd: the statistics returned detached."""
    y, mean, var, _ = _normalise(x)
    return y, mean.detach(), var.detach()


def batch_stats_differentiable(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Plain autograd with differentiable statistics (a loss on them gets a gradient)."""
    y, mean, var, _ = _normalise(x)
    return y, mean, var


class MaxWithIndex(Function):
    """Correct: the max over the last dim and its integer index (never differentiable)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        values, index = x.max(-1)
        ctx.save_for_backward(index)
        ctx.shape = x.shape
        return values, index

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gindex: Tensor | None) -> Tensor:
        (index,) = ctx.saved_tensors
        out = g.new_zeros(ctx.shape)
        return out.scatter(-1, index.unsqueeze(-1), g.unsqueeze(-1))


def max_with_index_reference(x: Tensor) -> tuple[Tensor, Tensor]:
    values, index = x.max(-1)
    return values, index


def tanh_with_norm(x: Tensor) -> tuple[Tensor, Tensor]:
    """Correct (a plain callable): tanh, and its norm returned detached (a logged metric)."""
    y = torch.tanh(x)
    return y, y.norm().detach()


class DoubleDataWrite(Function):
    """BROKEN (seen in a real package): doubles its input through .data and returns it without
    ctx.mark_dirty: autograd neither bumps the input's version nor rebases its history, so every
    other reader of the input gets a gradient of the old values."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.data.mul_(2)
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * g


class DoubleDataWriteMarked(Function):
    """Correct: the same write, said with ctx.mark_dirty (given non-leaf inputs, as in a model)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.data.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * g


class DoubleClone(Function):
    """Correct: writes a clone of its input and returns that."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.clone()
        y.data.mul_(2)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * g


class Double(Function):
    """Correct: writes nothing."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return 2 * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * g


def double_reference(x: Tensor) -> Tensor:
    return 2 * x


class SquareStateOnClass(Function):
    """BROKEN: keeps its input on the Function class, not on ctx: a second forward before the
    first one's backward (two micro-batches, a checkpointed block) overwrites it."""

    saved: Tensor | None = None

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        SquareStateOnClass.saved = x.detach()
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        assert SquareStateOnClass.saved is not None
        return 2 * SquareStateOnClass.saved * g


#: the global SquareStateGlobal keeps its input in
_LAST: dict[str, Tensor] = {}


class SquareStateGlobal(Function):
    """BROKEN: the same with a module-level dict."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        _LAST["x"] = x.detach()
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * _LAST["x"] * g


class Square(Function):
    """Correct: the same with ctx.save_for_backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


#: SquareShapeCache's constants, keyed by shape (the same for every call of a shape)
_TWOS: dict[tuple[int, ...], Tensor] = {}


class SquareShapeCache(Function):
    """Correct: a global cache keyed by shape holding a constant (state outside ctx that no
    forward changes for a given shape)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        key = tuple(x.shape)
        if key not in _TWOS:
            _TWOS[key] = torch.full(x.shape, 2.0, dtype=x.dtype)
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return _TWOS[tuple(x.shape)].to(g.dtype) * x * g


def square_reference(x: Tensor) -> Tensor:
    return x * x


class StatsFirstHalfGradient(Function):
    """BROKEN (for the Jacobian's output numbers): the statistics first, marked
    non-differentiable, then the normalised output, whose gradient is half the right one."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y, mean, var, _ = _normalise(x)
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable(mean, var)
        return mean, var, y

    @staticmethod
    def backward(ctx: Any, _gmean: Tensor, _gvar: Tensor, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        y, _, _, rstd = _normalise(x)
        return 0.5 * _normalise_backward(y, rstd, g)

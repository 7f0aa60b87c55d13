"""Functions whose gradients are wrong only at repeated values (tests/test_repeats.py), each
beside a correct twin.

- a max over the last dim whose backward gives every tied maximum the full gradient (a point
  cloud padded by repeating points: the sum over a tied group is k times too big); its twins
  give it to one index (torch.max's convention: another valid subgradient than the reference
  amax's even split) or split it evenly;
- the same bug over any dim given as an argument, and in a 2x2 max-pool's windows;
- an embedding whose backward assigns (`gw[idx] = g`: a repeated token keeps one occurrence)
  instead of accumulating with `index_add_`;
- a gather along dim 1 whose backward accumulates with `scatter_add_` (correct).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function


class MaxAllTies(Function):
    """BROKEN at ties: every element equal to the max gets the full gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.amax(-1)
        ctx.save_for_backward((x == y.unsqueeze(-1)).to(x.dtype))
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g.unsqueeze(-1) * mask


class MaxOneIndex(Function):
    """Correct twin: the gradient goes to one index of the max (argmax), as torch.max(dim)'s
    backward; at a tie the reference (amax) splits it evenly: another valid subgradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y, idx = x.max(-1)
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (idx,) = ctx.saved_tensors
        gx = g.new_zeros(ctx.shape)
        return gx.scatter(-1, idx.unsqueeze(-1), g.unsqueeze(-1))


class MaxSplit(Function):
    """Correct twin: ties share the gradient evenly, as amax's backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.amax(-1)
        ctx.save_for_backward((x == y.unsqueeze(-1)).to(x.dtype))
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g.unsqueeze(-1) * mask / mask.sum(-1, keepdim=True)


def amax_reference(x: Tensor) -> Tensor:
    return x.amax(-1)


class EmbeddingAssign(Function):
    """BROKEN for repeated indices: the weight's gradient is assigned, so a repeated index
    keeps one occurrence's gradient instead of their sum."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.rows = weight.shape[0]
        return weight[idx]

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        gw = g.new_zeros((ctx.rows, g.shape[-1]))
        gw[idx] = g
        return gw, None


class Embedding(Function):
    """Correct twin: repeated indices accumulate (index_add_)."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.rows = weight.shape[0]
        return weight[idx]

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        gw = g.new_zeros((ctx.rows, g.shape[-1]))
        return gw.index_add(0, idx, g), None


def embedding_reference(weight: Tensor, idx: Tensor) -> Tensor:
    return torch.nn.functional.embedding(idx, weight)


class Gather(Function):
    """Correct: a gather along dim 1 whose backward accumulates (scatter_add)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return x.gather(1, idx)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        return g.new_zeros(ctx.shape).scatter_add(1, idx, g), None


def gather_reference(x: Tensor, idx: Tensor) -> Tensor:
    return x.gather(1, idx)


class MaxOverDimAllTies(Function):
    """BROKEN at ties, as MaxAllTies, over the dim given as an argument (the point dim of a
    (batch, points, channels) cloud: dim 1)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int) -> Tensor:
        y = x.amax(dim, keepdim=True)
        ctx.save_for_backward((x == y).to(x.dtype))
        ctx.dim = dim
        return y.squeeze(dim)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (mask,) = ctx.saved_tensors
        return g.unsqueeze(ctx.dim) * mask, None


def amax_dim_reference(x: Tensor, dim: int) -> Tensor:
    return x.amax(dim)


class MaxPool2dAllTies(Function):
    """BROKEN at ties: a 2x2 max-pool (stride 2) whose backward gives every tied maximum of a
    window the full gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.nn.functional.max_pool2d(x, 2)
        up = y.repeat_interleave(2, -2).repeat_interleave(2, -1)
        ctx.save_for_backward((x == up).to(x.dtype))
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g.repeat_interleave(2, -2).repeat_interleave(2, -1) * mask


def max_pool2d_reference(x: Tensor) -> Tensor:
    return torch.nn.functional.max_pool2d(x, 2)

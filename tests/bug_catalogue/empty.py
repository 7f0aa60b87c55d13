"""Empty tensors: a backward that divides by, chunks by, or launches over a zero size.

Forward handles the empty case (returns an empty result); backward does not: a division
by a zero count, `chunk(0)`, a `.view(n, -1)` of no elements, a kernel grid of 0 blocks
(`launch`), the last element of an empty dim.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, launch, rand

BLOCK = 128  # a kernel's block size: grid = cdiv(numel, BLOCK)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockMean(Function):
    """Mean over `bins` equal blocks of the last dim; BROKEN: backward's block size is
    L // bins, a ZeroDivisionError for bins == 0 (forward returns an empty result)."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, bins: int) -> Tensor:
        ctx.shape = x.shape
        if bins == 0:
            return x.new_zeros((*x.shape[:-1], 0))
        return x.reshape(*x.shape[:-1], bins, -1).mean(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        if cls.guard and g.shape[-1] == 0:
            return g.new_zeros(ctx.shape), None
        size = ctx.shape[-1] // g.shape[-1]
        return g.repeat_interleave(size, -1) / size, None


class BlockMeanFixed(BlockMean):
    guard = True


def block_mean_ref(x: Tensor, bins: int) -> Tensor:
    return x.reshape(*x.shape[:-1], bins, -1).mean(-1)


class GeluKernel(Function):
    """gelu; BROKEN: backward launches its kernel on cdiv(numel, BLOCK) blocks, even 0."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        if x.numel():
            launch(cdiv(x.numel(), BLOCK))
        return F.gelu(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if not (cls.guard and x.numel() == 0):
            launch(cdiv(x.numel(), BLOCK))
        cdf = 0.5 * (1 + torch.erf(x / 2 ** 0.5))
        pdf = torch.exp(-0.5 * x * x) / (2 * torch.pi) ** 0.5
        return g * (cdf + x * pdf)


class GeluKernelFixed(GeluKernel):
    guard = True


class Pdist(Function):
    """Pairwise distances of the rows (upper triangle); BROKEN: backward's per-row count is
    numel // rows, a ZeroDivisionError for zero rows."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return F.pdist(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        n = x.shape[0]
        if cls.guard and n == 0:
            return torch.zeros_like(x)
        _ = g.numel() // n  # pairs per row, as the kernel sizes its loop
        i, j = torch.triu_indices(n, n, 1)
        d = x[i] - x[j]
        w = (g / d.norm(dim=-1).clamp_min(1e-300))[:, None] * d
        return torch.zeros_like(x).index_add(0, i, w).index_add(0, j, -w)


class PdistFixed(Pdist):
    guard = True


class TileChunks(Function):
    """x.repeat(reps) (1-D); BROKEN: backward sums g.chunk(reps), which refuses reps == 0."""

    reshape = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, reps: int) -> Tensor:
        ctx.n = x.shape[0]
        return x.repeat(reps)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        if cls.reshape:
            # no -1: an empty x leaves it ambiguous
            return g.reshape(g.numel() // ctx.n if ctx.n else 0, ctx.n).sum(0), None
        reps = g.shape[0] // ctx.n
        return torch.stack(g.chunk(reps)).sum(0), None


class TileChunksFixed(TileChunks):
    reshape = True


class CumProd(Function):
    """cumprod over the last dim; BROKEN: backward reads the last element of that dim."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(-1)
        ctx.save_for_backward(x)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        n = x.shape[-1]
        if not (cls.guard and n == 0):
            _ = x.index_select(-1, torch.tensor([n - 1]))  # the kernel's total, read first
        # d y_k / d x_i = prod_{j <= k, j != i} x_j: products of the others, no division
        gx = torch.zeros_like(x)
        for i in range(n):
            others = torch.cat([x[..., :i], torch.ones_like(x[..., i:i + 1]), x[..., i + 1:]], -1)
            gx[..., i] = (g[..., i:] * others.cumprod(-1)[..., i:]).sum(-1)
        return gx


class CumProdFixed(CumProd):
    guard = True


class AddColumn(Function):
    """a + b[:, None]; BROKEN: a shortcut skips the reduction of an empty gradient and
    returns it at a's shape [n, 0] for b's [n] (autograd refuses the shape)."""

    sum_dim = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        return a + b[:, None]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gb = g.sum(1) if cls.sum_dim or g.numel() else g   # "nothing to reduce"
        return g, gb


class AddColumnFixed(AddColumn):
    sum_dim = True


class RepeatRows(Function):
    """x.repeat_interleave(reps, 0); BROKEN: backward launches on cdiv(g.numel(), BLOCK)."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, reps: int) -> Tensor:
        ctx.shape = x.shape
        return x.repeat_interleave(reps, 0)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        if cls.guard and g.numel() == 0:
            return g.new_zeros(ctx.shape), None
        launch(cdiv(g.numel(), BLOCK))
        return g.reshape(ctx.shape[0], -1, *ctx.shape[1:]).sum(1), None


class RepeatRowsFixed(RepeatRows):
    guard = True


class SquareKernel(Function):
    """x * x through a kernel whose backward launch has no zero-size guard."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if not (cls.guard and g.numel() == 0):
            launch(cdiv(g.numel(), 256))
        return 2 * x * g


class SquareKernelFixed(SquareKernel):
    guard = True


def pdist_ref(x: Tensor) -> Tensor:
    """F.pdist in plain ops (F.pdist's own backward crashes on zero rows: issue 197099)."""
    i, j = torch.triu_indices(x.shape[0], x.shape[0], 1)
    return (x[i] - x[j]).norm(dim=-1)


PT = "https://github.com/pytorch/pytorch"
ENTRIES = (
    Entry("pt78868-pool-empty-output", "pytorch/pytorch", "issue 78868", f"{PT}/issues/78868",
          "empty_tensor", "an output size of 0: backward divides by it",
          "x [1,1], bins 0", BlockMean, BlockMeanFixed, lambda: [rand(2, 6), 3],
          block_mean_ref,
          smallest_inputs=lambda: [rand(1, 1), 0],
          note='adaptive pooling modelled as a mean over equal blocks'),
    Entry("pt78152-gelu-empty", "pytorch/pytorch", "issue 78152", f"{PT}/issues/78152",
          "empty_tensor", "an input with no elements: backward launches a grid of 0 blocks",
          "x [0]", GeluKernel, GeluKernelFixed, lambda: [rand(3, 4)], F.gelu,
          smallest_inputs=lambda: [rand(0)]),
    Entry("pt197099-pdist-zero-rows", "pytorch/pytorch", "issue 197099",
          f"{PT}/issues/197099", "empty_tensor",
          "an input with zero rows: backward divides by the row count",
          "x [0,1]", Pdist, PdistFixed, lambda: [rand(4, 3)], pdist_ref,
          smallest_inputs=lambda: [rand(0, 1)]),
    Entry("pt45201-repeat-zero", "pytorch/pytorch", "issue 45201", f"{PT}/issues/45201",
          "empty_tensor", "repeat(0): backward chunks the gradient into 0 pieces",
          "x [1], reps 0", TileChunks, TileChunksFixed, lambda: [rand(4), 3],
          lambda x, reps: x.repeat(reps),
          smallest_inputs=lambda: [rand(1), 0]),
    Entry("pt31782-cumprod-empty", "pytorch/pytorch", "issue 31782", f"{PT}/issues/31782",
          "empty_tensor", "a zero-length dim: backward reads its last element",
          "x [1,0]", CumProd, CumProdFixed, lambda: [rand(2, 4)], lambda x: x.cumprod(-1),
          smallest_inputs=lambda: [rand(1, 0)],
          note="the crash's exact cause in torch 1.4 is not in the report; modelled as "
               'reading the last element of the empty dim'),
    Entry("pt15223-unsqueeze-empty", "pytorch/pytorch", "issue 15223", f"{PT}/issues/15223",
          "empty_tensor",
          "an [n, 0] operand (n > 1) broadcast against b[:, None]: b's gradient comes back [n, 0]",
          "a [2,0], b [2]", AddColumn, AddColumnFixed, lambda: [rand(4, 3), rand(4, seed=1)],
          lambda a, b: a + b[:, None],
          smallest_inputs=lambda: [rand(2, 0), rand(2, seed=1)]),
    Entry("oneflow8371-repeat-interleave-zero", "Oneflow-Inc/oneflow", "issue 8371",
          "https://github.com/Oneflow-Inc/oneflow/issues/8371", "empty_tensor",
          "repeat_interleave with 0 repeats: an empty output whose backward fails",
          "x [1,1], reps 0", RepeatRows, RepeatRowsFixed, lambda: [rand(2, 3), 2],
          lambda x, reps: x.repeat_interleave(reps, 0),
          smallest_inputs=lambda: [rand(1, 1), 0],
          note="oneflow's failure modelled as a zero-block kernel launch"),
    Entry("slang3696-zero-size-kernel", "shader-slang/slang", "issue 3696",
          "https://github.com/shader-slang/slang/issues/3696", "empty_tensor",
          "a 0-size tensor through a kernel's backward launch", "x [0]",
          SquareKernel, SquareKernelFixed, lambda: [rand(3, 4)], lambda x: x * x,
          smallest_inputs=lambda: [rand(0)],
          note='a slang kernel modelled as x*x whose backward launch has no zero-size '
               'guard'),
)

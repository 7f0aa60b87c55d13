"""Index arithmetic: a backward that writes where it must accumulate, or counts wrongly.

An index tensor with a repeated value (a token twice in a batch, a point gathered twice)
makes `gx[idx] = g` keep one occurrence's gradient; the authors' tests drew distinct
indices (a permutation, `torch.unique`). Scatter reductions go wrong at a zero or a tie.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from .base import Entry, last_writer, rand, vals

ACCUM = "accumulate"


class IndexRows(Function):
    """x[idx]; BROKEN: backward assigns `gx[idx] = g` (repeats keep one gradient)."""

    mode = "assign"

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.n = x.shape[0]
        return x[idx]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        gx = g.new_zeros((ctx.n, *g.shape[1:]))
        if cls.mode == ACCUM:
            gx = gx.index_add(0, idx, g)
        elif cls.mode == "iadd":
            gx[idx] += g          # advanced-index += is a put: no accumulation either
        elif cls.mode == "put":
            gx = gx.index_put((idx,), g)
        elif cls.mode == "copy":
            gx = gx.index_copy(0, idx, g)
        else:
            gx[idx] = g
        return gx, None


class IndexRowsFixed(IndexRows):
    mode = ACCUM


class TakeIadd(IndexRows):
    mode = "iadd"


class GetindexPut(IndexRows):
    mode = "put"


class IndexSelectCopy(IndexRows):
    mode = "copy"


class GatherDim1(Function):
    """x.gather(1, idx); BROKEN: backward scatters instead of scatter-adding."""

    add = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.shape = x.shape
        return x.gather(1, idx)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        z = g.new_zeros(ctx.shape)
        return (z.scatter_add(1, idx, g) if cls.add else z.scatter(1, idx, g)), None


class GatherDim1Fixed(GatherDim1):
    add = True


class IndexFillValue(Function):
    """x.index_fill(0, idx, value); BROKEN: value's gradient counts a repeated row twice."""

    unique = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, value: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        return x.index_fill(0, idx, value)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        (idx,) = ctx.saved_tensors
        rows = torch.unique(idx) if cls.unique else idx
        return g.index_fill(0, idx, 0), g.index_select(0, rows).sum(), None


class IndexFillValueFixed(IndexFillValue):
    unique = True


def index_fill_ref(x: Tensor, value: Tensor, idx: Tensor) -> Tensor:
    hit = torch.zeros(x.shape[0], dtype=torch.bool).index_fill(0, idx, True)
    return torch.where(hit[:, None], value.expand_as(x), x)


class IndexCopySrc(Function):
    """x.index_copy(0, idx, src); BROKEN: every src row gets a gradient, even one that a
    later row with the same index overwrote."""

    mask = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, src: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        return x.index_copy(0, idx, src)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        (idx,) = ctx.saved_tensors
        gsrc = g.index_select(0, idx)
        if cls.mask:
            gsrc = last_writer(idx, g.shape[0]).t().to(g.dtype) @ g
        return g.index_fill(0, idx, 0), gsrc, None


class IndexCopySrcFixed(IndexCopySrc):
    mask = True


def index_copy_ref(x: Tensor, src: Tensor, idx: Tensor) -> Tensor:
    w = last_writer(idx, x.shape[0]).to(x.dtype)
    hit = w.sum(1, keepdim=True)
    return x * (1 - hit) + w @ src


class GatherRowsWrapped(Function):
    """x[idx]; BROKEN: backward gathers (source-indexed, indices wrapped) where it must
    scatter-add (output-indexed)."""

    fixed = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        ctx.n = x.shape[0]
        return x[idx]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (idx,) = ctx.saved_tensors
        if cls.fixed:
            return g.new_zeros((ctx.n, *g.shape[1:])).index_add(0, idx, g), None
        k = idx.numel()
        return g[idx[torch.arange(ctx.n) % k] % k], None


class GatherRowsFixed(GatherRowsWrapped):
    fixed = True


def groups(x: Tensor, idx: Tensor, n: int) -> list[Tensor]:
    return [x[idx == j] for j in range(n)]


class ScatterProd(Function):
    """Product of the values scattered to each of n slots; BROKEN: the gradient is
    g * out / x, zeroed where x == 0 (wrong: there it is the product of the others)."""

    nan_at_zero = False
    fixed = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, idx: Tensor, n: int) -> Tensor:
        out = torch.stack([grp.prod() for grp in groups(x, idx, n)])
        ctx.save_for_backward(x, idx, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        x, idx, out = ctx.saved_tensors
        if cls.fixed and not x.numel():
            return torch.zeros_like(x), None, None
        if cls.fixed:
            others = torch.stack([torch.cat([x[:i], x[i + 1:]])[torch.cat(
                [idx[:i], idx[i + 1:]]) == idx[i]].prod() for i in range(x.numel())])
            return g[idx] * others, None, None
        gx = g[idx] * out[idx] / x
        return (gx if cls.nan_at_zero else gx.masked_fill(x == 0, 0)), None, None


class ScatterProdFixed(ScatterProd):
    fixed = True


class ScatterMulNan(ScatterProd):
    nan_at_zero = True


def scatter_prod_ref(x: Tensor, idx: Tensor, n: int) -> Tensor:
    return torch.stack([grp.prod() for grp in groups(x, idx, n)])


class ScatterAmax(Function):
    """Max of the values scattered to each slot; BROKEN: every tied maximum gets the full
    gradient (it must be split evenly among them)."""

    split = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, idx: Tensor, n: int) -> Tensor:
        out = torch.stack([grp.max() for grp in groups(x, idx, n)])
        ctx.save_for_backward(x, idx, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        x, idx, out = ctx.saved_tensors
        hit = (x == out[idx]).to(g.dtype)
        if cls.split:
            count = torch.zeros_like(out).index_add(0, idx, hit)
            hit = hit / count[idx]
        return g[idx] * hit, None, None


class ScatterAmaxFixed(ScatterAmax):
    split = True


def scatter_amax_ref(x: Tensor, idx: Tensor, n: int) -> Tensor:
    return torch.stack([grp.amax() for grp in groups(x, idx, n)])


def ix(*v: int) -> Tensor:
    return torch.tensor(v, dtype=torch.long)


def rows_ref(x: Tensor, idx: Tensor) -> Tensor:
    return x[idx]


PT = "https://github.com/pytorch/pytorch"
DUP = "an index tensor with a repeated value"
ENTRIES = (
    Entry("pt1528-index-dup", "pytorch/pytorch", "issue 1528", f"{PT}/issues/1528",
          "repeated_index", f"{DUP}: only the last copy's gradient survives",
          "x [1], idx [0, 0]", IndexRows, IndexRowsFixed,
          lambda: [rand(5, 3), ix(3, 0, 4)], rows_ref,
          smallest_inputs=lambda: [rand(1), ix(0, 0)]),
    Entry("pt1631-gather-dup", "pytorch/pytorch", "issue 1631", f"{PT}/issues/1631",
          "repeated_index", f"{DUP} along the gathered dim", "x [1], idx [0, 0]",
          GatherDim1, GatherDim1Fixed,
          lambda: [rand(2, 4), torch.tensor([[0, 2, 3], [1, 0, 3]])],
          lambda x, idx: x.gather(1, idx),
          smallest_inputs=lambda: [rand(1, 1), torch.tensor([[0, 0]])]),
    Entry("pt57006-index-fill-dup", "pytorch/pytorch", "issue 57006", f"{PT}/issues/57006",
          "repeated_index", f"{DUP}: value's gradient counts the row twice",
          "x [1,1], value [], idx [0, 0]", IndexFillValue, IndexFillValueFixed,
          lambda: [rand(4, 3), rand(seed=1), ix(1, 3)], index_fill_ref,
          smallest_inputs=lambda: [rand(1, 1), rand(seed=1), ix(0, 0)]),
    Entry("pt473-index-copy-dup", "pytorch/pytorch", "issue 473", f"{PT}/issues/473",
          "repeated_index", f"{DUP}: an overwritten source row still gets a gradient",
          "x [1,1], src [2,1], idx [0, 0]", IndexCopySrc, IndexCopySrcFixed,
          lambda: [rand(4, 3), rand(2, 3, seed=1), ix(2, 0)], index_copy_ref,
          smallest_inputs=lambda: [rand(1, 1), rand(2, 1, seed=1), ix(0, 0)]),
    Entry("autograd39-take-dup", "HIPS/autograd", "issue 39",
          "https://github.com/HIPS/autograd/issues/39", "repeated_index",
          f"{DUP}: `grad[idx] += g` does not accumulate repeats", "x [1], idx [0, 0]",
          TakeIadd, IndexRowsFixed, lambda: [rand(5), ix(3, 0, 4)], rows_ref,
          smallest_inputs=lambda: [rand(1), ix(0, 0)]),
    Entry("aidotnet894-gather-wrapped", "ooples/AiDotNet.Tensors", "PR 894",
          "https://github.com/ooples/AiDotNet.Tensors/pull/894", "index_adjoint",
          "any gather that is not the identity: backward gathers instead of scatter-adding",
          "x [3,1], idx [1, 2, 0]", GatherRowsWrapped, GatherRowsFixed,
          lambda: [rand(4, 3), ix(1, 0, 2)], rows_ref,
          smallest_inputs=lambda: [rand(3, 1), ix(1, 2, 0)]),
    Entry("flaggems359-index-select-dup", "flagos-ai/FlagGems", "PR 359",
          "https://github.com/flagos-ai/FlagGems/pull/359", "repeated_index",
          f"{DUP} (the PR's test drew torch.unique indices)", "x [1,1], idx [0, 0]",
          IndexSelectCopy, IndexRowsFixed, lambda: [rand(5, 3), ix(3, 0, 4)], rows_ref,
          smallest_inputs=lambda: [rand(1, 1), ix(0, 0)]),
    Entry("nabla139-getindex-dup", "invenia/Nabla.jl", "issue 139",
          "https://github.com/invenia/Nabla.jl/issues/139", "repeated_index",
          f"{DUP}: x[[1,2,3,3]] gives gradient [1,1,1], not [1,1,2]", "x [1], idx [0, 0]",
          GetindexPut, IndexRowsFixed, lambda: [rand(4), ix(2, 0, 1)], rows_ref,
          smallest_inputs=lambda: [rand(1), ix(0, 0)]),
    Entry("pt76523-scatter-prod-zero", "pytorch/pytorch", "PR 76523", f"{PT}/pull/76523",
          "special_value", "an exact zero among the values of a product's group",
          "x [2] = [0, 2], idx [0, 0], n 1", ScatterProd, ScatterProdFixed,
          lambda: [rand(6), ix(0, 1, 0, 2, 1, 2), 3], scatter_prod_ref,
          smallest_inputs=lambda: [vals(0.0, 2.0), ix(0, 0), 1]),
    Entry("pt76523-scatter-amax-ties", "pytorch/pytorch", "PR 76523", f"{PT}/pull/76523",
          "ties", "tied maxima in one group: each gets the whole gradient",
          "x [2] = [1, 1], idx [0, 0], n 1", ScatterAmax, ScatterAmaxFixed,
          lambda: [rand(6), ix(0, 1, 0, 2, 1, 2), 3], scatter_amax_ref,
          smallest_inputs=lambda: [vals(1.0, 1.0), ix(0, 0), 1]),
    Entry("scatter189-mul-zero-nan", "rusty1s/pytorch_scatter", "issue 189",
          "https://github.com/rusty1s/pytorch_scatter/issues/189", "special_value",
          "an exact zero in scatter_mul's input: the gradient g * out / x is NaN",
          "x [2] = [0, 2], idx [0, 0], n 1", ScatterMulNan, ScatterProdFixed,
          lambda: [rand(6), ix(0, 1, 0, 2, 1, 2), 3], scatter_prod_ref,
          smallest_inputs=lambda: [vals(0.0, 2.0), ix(0, 0), 1]),
)

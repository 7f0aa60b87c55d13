"""Shape conditions: right on the shapes the author tested, wrong on others.

A rank the tests never used (4-D into a norm tested on 3-D), a non-square output, a length
that is no multiple of the block size, a batch larger than a kernel's step, a feature size
that is no power of two, a single element equal to zero.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand, vals, vjp

GROUPS = 2
EPS = 1e-5
SCAN_BLOCK = 4    # a scan kernel's chunk length
BATCH_STEP = 4    # deformable conv's im2col_step (32 in mmcv; 4 keeps the tensors small)


def group_norm_ref(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.group_norm(x, GROUPS, w, b, EPS)


class GroupNorm(Function):
    """Group norm; BROKEN: backward takes the per-group element count from the gradient's
    last dim before flattening (right for [N, C, L], wrong for [N, C, H, W])."""

    flatten_first = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return group_norm_ref(x, w, b)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:]) if cls.flatten_first else g.shape[-1]
        m = spatial * (c // GROUPS)
        per = math.prod(x.shape[1:]) // GROUPS  # no -1: an empty batch leaves it ambiguous
        xg = x.reshape(n, GROUPS, per)
        mu = xg.mean(-1, keepdim=True)
        rstd = (xg.var(-1, unbiased=False, keepdim=True) + EPS).rsqrt()
        xhat = ((xg - mu) * rstd).reshape(x.shape)
        shape = [1, c] + [1] * (x.dim() - 2)
        dxhat = (g * w.reshape(shape)).reshape(n, GROUPS, per)
        xh = xhat.reshape(n, GROUPS, per)
        dx = rstd * (dxhat - dxhat.sum(-1, keepdim=True) / m
                     - xh * (dxhat * xh).sum(-1, keepdim=True) / m)
        dims = [0, *range(2, x.dim())]
        return dx.reshape(x.shape), (g * xhat).sum(dims), g.sum(dims)


class GroupNormFixed(GroupNorm):
    flatten_first = True


class AvgPoolSwappedGrid(Function):
    """2x2 average pooling; BROKEN: backward's grid takes (out_w, out_h) for (rows, cols),
    so a non-square output leaves some positions without gradient."""

    swapped = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return F.avg_pool2d(x, 2)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        oh, ow = g.shape[-2:]
        rows, cols = (ow, oh) if cls.swapped else (oh, ow)
        covered = torch.zeros_like(g)
        covered[..., :min(rows, oh), :min(cols, ow)] = 1
        up = (g * covered).repeat_interleave(2, -1).repeat_interleave(2, -2) / 4
        return F.pad(up, (0, ctx.shape[-1] - up.shape[-1], 0, ctx.shape[-2] - up.shape[-2]))


class AvgPoolGridFixed(AvgPoolSwappedGrid):
    swapped = False


class BlockCumsum(Function):
    """cumsum over the last dim; BROKEN: the blockwise reverse scan of backward drops the
    carry out of the last, partial block."""

    carry_partial = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        return x.cumsum(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        n = g.shape[-1]
        out, carry = [], torch.zeros_like(g[..., :1])
        for start in reversed(range(0, n, SCAN_BLOCK)):
            blk = g[..., start:start + SCAN_BLOCK]
            local = blk.flip(-1).cumsum(-1).flip(-1) + carry
            out.insert(0, local)
            partial = blk.shape[-1] < SCAN_BLOCK
            carry = local[..., :1] if cls.carry_partial or not partial else carry
        return torch.cat(out, -1) if out else torch.zeros_like(g)


class BlockCumsumFixed(BlockCumsum):
    carry_partial = True


def recurrence_ref(f: Tensor, x: Tensor) -> Tensor:
    hs, h = [], torch.zeros_like(x[..., 0])
    for t in range(x.shape[-1]):
        h = f[..., t] * h + x[..., t]
        hs.append(h)
    return torch.stack(hs, -1)


class LinearRecurrence(Function):
    """h_t = f_t h_{t-1} + x_t over the last dim; BROKEN: backward's reverse scan runs in
    blocks and scales the carry from the next block by the boundary's one decay factor,
    not by the product of the decays between t and the boundary."""

    right_carry = False

    @classmethod
    def forward(cls, ctx: Any, f: Tensor, x: Tensor) -> Tensor:
        out = recurrence_ref(f, x)
        ctx.save_for_backward(f, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        f, h = ctx.saved_tensors
        n = g.shape[-1]
        dh = [torch.zeros_like(g[..., 0])] * n
        for start in reversed(range(0, n, SCAN_BLOCK)):
            stop = min(start + SCAN_BLOCK, n)
            carry = dh[stop] if stop < n else torch.zeros_like(g[..., 0])
            acc, span = torch.zeros_like(carry), torch.ones_like(carry)
            for t in reversed(range(start, stop)):
                step = f[..., t + 1] if t + 1 < stop else torch.zeros_like(carry)
                acc = g[..., t] + step * acc                  # the block's own scan
                span = span * (f[..., t + 1] if t + 1 < n else 0.0)
                edge = f[..., stop] if stop < n else torch.zeros_like(carry)
                dh[t] = acc + carry * (span if cls.right_carry else edge)
        dh_t = torch.stack(dh, -1)
        hprev = torch.cat([torch.zeros_like(h[..., :1]), h[..., :-1]], -1)
        return dh_t * hprev, dh_t


class LinearRecurrenceFixed(LinearRecurrence):
    right_carry = True


def pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


class LayerNormPadded(Function):
    """Layer norm over the last dim, computed on a block padded with zeros to the next
    power of two; BROKEN: the variance sums (0 - mean)^2 over the padding too."""

    masked = False

    @classmethod
    def stats(cls, x: Tensor) -> tuple[Tensor, Tensor]:
        n = x.shape[-1]
        xp = F.pad(x, (0, pow2(n) - n))
        mean = xp.sum(-1, keepdim=True) / n
        dev = xp - mean
        if cls.masked:
            dev = dev[..., :n]
        return mean, (dev * dev).sum(-1, keepdim=True) / n

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        mean, var = cls.stats(x)
        return (x - mean) * (var + EPS).rsqrt()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors

        def norm(t: Tensor) -> Tensor:
            mean, var = cls.stats(t)
            return (t - mean) * (var + EPS).rsqrt()

        return vjp(norm, [x], g)[0]


class LayerNormPaddedFixed(LayerNormPadded):
    masked = True


def layer_norm_ref(x: Tensor) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], eps=EPS)


class BatchStepLinear(Function):
    """x @ w over a batch processed BATCH_STEP rows at a time (im2col_step); BROKEN: the
    weight gradient keeps only the first step's rows."""

    all_steps = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        steps = range(0, x.shape[0], BATCH_STEP)
        gw = torch.zeros_like(w)
        for k, i in enumerate(steps):
            if cls.all_steps or k == 0:
                gw = gw + x[i:i + BATCH_STEP].t() @ g[i:i + BATCH_STEP]
        return g @ w.t(), gw


class BatchStepLinearFixed(BatchStepLinear):
    all_steps = True


class ProdDim(Function):
    """x.prod(0); BROKEN: where an element is zero, backward takes a path that squeezes
    the result: a one-element input gets a 0-d gradient (an invalid gradient shape)."""

    keep_shape = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.prod(0)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        others = torch.stack([torch.cat([x[:i], x[i + 1:]]).prod(0) for i in range(x.shape[0])]
                             ) if x.shape[0] else torch.zeros_like(x)
        gx = g * others
        if (x == 0).any() and not cls.keep_shape:
            gx = gx.squeeze()
        return gx


class ProdDimFixed(ProdDim):
    keep_shape = True


PT = "https://github.com/pytorch/pytorch"
ENTRIES = (
    Entry("liger1375-groupnorm-4d", "linkedin/Liger-Kernel", "issue 1375",
          "https://github.com/linkedin/Liger-Kernel/issues/1375", "rank",
          "a 4-D [N, C, H, W] input (the tests used 3-D [N, C, L])",
          "x [1,2,2,2], w [2], b [2]", GroupNorm, GroupNormFixed,
          lambda: [rand(2, 4, 3), rand(4, seed=1), rand(4, seed=2)], group_norm_ref,
          smallest_inputs=lambda: [rand(1, 2, 2, 2), rand(2, seed=1), rand(2, seed=2)]),
    Entry("pt36820-pool-grid-swapped", "pytorch/pytorch", "PR 36820", f"{PT}/pull/36820",
          "non_square", "a non-square output (out_h != out_w): the grid's extents are swapped",
          "x [1,1,2,4] (output [1,1,1,2])", AvgPoolSwappedGrid, AvgPoolGridFixed,
          lambda: [rand(1, 2, 4, 4)], lambda x: F.avg_pool2d(x, 2),
          smallest_inputs=lambda: [rand(1, 1, 2, 4)],
          note="max_pool3d's CUDA grid modelled as 2-D average pooling with swapped "
               'extents'),
    Entry("mamba537-block-tail-carry", "state-spaces/mamba", "PR 537",
          "https://github.com/state-spaces/mamba/pull/537", "tail_tile",
          "a length that is no multiple of the block: the partial block's carry is dropped",
          f"x [1,{SCAN_BLOCK + 1}]", BlockCumsum, BlockCumsumFixed, lambda: [rand(2, 8)],
          lambda x: x.cumsum(-1),
          smallest_inputs=lambda: [rand(1, SCAN_BLOCK + 1)],
          note='the PR fixes a pointer overshoot in a Triton scan kernel; modelled as '
               "a blockwise reverse cumsum that drops the partial block's carry"),
    Entry("accelscan15-inter-block-carry", "proger/accelerated-scan", "PR 15",
          "https://github.com/proger/accelerated-scan/pull/15", "block_carry",
          "a sequence longer than one block (the tests' small decays f hid the error)",
          f"f [1,{SCAN_BLOCK + 2}], x [1,{SCAN_BLOCK + 2}]", LinearRecurrence,
          LinearRecurrenceFixed,
          lambda: [rand(2, 8, low=0.0, high=0.05), rand(2, 8, seed=1)], recurrence_ref,
          smallest_inputs=lambda: [rand(1, SCAN_BLOCK + 2, low=0.0, high=1.0),
                                   rand(1, SCAN_BLOCK + 2, seed=1)],
          note='the complex scan modelled as a real recurrence; the wrong carry as the '
               "boundary's single decay factor"),
    Entry("triton9838-layernorm-pad-var", "triton-lang/triton", "issue 9838",
          "https://github.com/triton-lang/triton/issues/9838", "tail_tile",
          "a feature size that is no power of two: padding enters the variance",
          "x [1,3]", LayerNormPadded, LayerNormPaddedFixed, lambda: [rand(2, 8)],
          layer_norm_ref,
          smallest_inputs=lambda: [rand(1, 3)]),
    Entry("mmcv565-dcn-batch-step", "open-mmlab/mmcv", "PR 565",
          "https://github.com/open-mmlab/mmcv/pull/565", "batch_handling",
          "a batch larger than im2col_step: only the first step's weight gradient is kept",
          f"x [{BATCH_STEP + 1},1], w [1,1]", BatchStepLinear, BatchStepLinearFixed,
          lambda: [rand(2, 3), rand(3, 2, seed=1)], lambda x, w: x @ w,
          smallest_inputs=lambda: [rand(BATCH_STEP + 1, 1), rand(1, 1, seed=1)],
          note='deformable conv modelled as a batched matmul processed im2col_step '
               'rows at a time'),
    Entry("pt82644-prod-zero-shape", "pytorch/pytorch", "issue 82644", f"{PT}/issues/82644",
          "special_value", "a one-element input equal to 0: the gradient comes back 0-d",
          "x [1] = [0]", ProdDim, ProdDimFixed, lambda: [rand(3, 2)], lambda x: x.prod(0),
          smallest_inputs=lambda: [vals(0.0)],
          note="torch's prod backward path at zeros modelled as a squeeze of the "
               'gradient'),
)

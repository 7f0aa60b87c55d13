"""Layout bugs: a backward (or forward) that assumes its tensor is laid out contiguously.

`out.sum().backward()` hands backward a stride-0 expanded grad_output, a `.t()` or `cat`
downstream a strided one; a permuted or narrowed input reaches forward. A kernel indexing
the raw memory reads other elements than the tensor's (`raw_contiguous`), a `.view` raises,
an assertion refuses.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand, raw_contiguous, store_like


class RowScale(Function):
    """y = x * s[:, None]; BROKEN: backward reads grad_output's memory as if contiguous."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, s: Tensor) -> Tensor:
        ctx.save_for_backward(x, s)
        return x * s[:, None]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, s = ctx.saved_tensors
        g = raw_contiguous(g) if cls.raw else g
        return g * s[:, None], (g * x).sum(1)


class RowScaleFixed(RowScale):
    raw = False


def attention_ref(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return torch.softmax(q @ k.t() / math.sqrt(q.shape[-1]), -1) @ v


class Attention(Function):
    """softmax(q k^T / sqrt(d)) v; BROKEN: backward reads dout's memory as if contiguous.

    Backward recomputes the probabilities from the saved inputs, so that it stays
    differentiable (a saved intermediate would make double backward silently wrong)."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        ctx.save_for_backward(q, k, v)
        return attention_ref(q, k, v)

    @classmethod
    def backward(cls, ctx: Any, dout: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = ctx.saved_tensors
        p = torch.softmax(q @ k.t() / math.sqrt(q.shape[-1]), -1)
        dout = raw_contiguous(dout) if cls.raw else dout
        dv = p.t() @ dout
        dp = dout @ v.t()
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
        return ds @ k, ds.t() @ q, dv


class AttentionFixed(Attention):
    raw = False


class AvgPool2(Function):
    """2x2 average pooling (RoI-align-like); BROKEN: backward reads grad raw."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return F.avg_pool2d(x, 2)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        g = raw_contiguous(g) if cls.raw else g
        up = g.repeat_interleave(2, -1).repeat_interleave(2, -2) / 4
        # an odd last row or column is dropped by the pooling: it gets no gradient
        return F.pad(up, (0, ctx.shape[-1] - up.shape[-1], 0, ctx.shape[-2] - up.shape[-2]))


class AvgPool2Fixed(AvgPool2):
    raw = False


class LinearView(Function):
    """x @ w^T; BROKEN: backward flattens grad_output with .view (raises when strided)."""

    flatten = staticmethod(lambda g, n: g.view(-1, n))

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        g2 = cls.flatten(g, w.shape[0])
        return (g2 @ w).view(x.shape), g2.t() @ x.flatten(0, -2)


class LinearReshape(LinearView):
    flatten = staticmethod(lambda g, n: g.flatten(0, -2))  # no -1: n may be 0


class Correlation(Function):
    """Channel-summed product of two feature maps; BROKEN: asserts a contiguous grad."""

    check = True

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return (a * b).sum(1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        if cls.check:
            assert g.is_contiguous(), "grad_output must be contiguous"
        g = g.unsqueeze(1)
        return g * b, g * a


class CorrelationFixed(Correlation):
    check = False


class PointDists(Function):
    """Squared distances between two point sets; BROKEN: refuses a non-contiguous grad."""

    check = True

    @classmethod
    def forward(cls, ctx: Any, p: Tensor, q: Tensor) -> Tensor:
        ctx.save_for_backward(p, q)
        return ((p[:, None] - q[None]) ** 2).sum(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        p, q = ctx.saved_tensors
        if cls.check and not g.is_contiguous():
            raise ValueError("grad_dists must be contiguous")
        diff = 2 * (p[:, None] - q[None]) * g[..., None]
        return diff.sum(1), -diff.sum(0)


class PointDistsFixed(PointDists):
    check = False


class MatmulWeightRaw(Function):
    """x @ w; BROKEN: the weight gradient reads grad_output raw (DCN's weight grad)."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        gw = x.t() @ (raw_contiguous(g) if cls.raw else g)
        return g @ w.t(), gw


class MatmulWeightFixed(MatmulWeightRaw):
    raw = False


class MeanLast(Function):
    """Mean over the last dim; BROKEN: backward reads its (often expanded) grad raw."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.n = x.shape[-1]
        return x.mean(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        g = raw_contiguous(g) if cls.raw else g
        return g[..., None].expand(*g.shape, ctx.n) / ctx.n


class MeanLastFixed(MeanLast):
    raw = False


class SoftplusRaw(Function):
    """softplus; BROKEN: backward indexes grad as the output's contiguous layout (cat's
    backward hands each input a narrowed view)."""

    raw = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return F.softplus(x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return (raw_contiguous(g) if cls.raw else g) * torch.sigmoid(x)


class SoftplusFixed(SoftplusRaw):
    raw = False


class BoxBlurRaw(Function):
    """[1, 1, 1] / 3 blur along the last dim; BROKEN: forward reads the image raw."""

    raw = True

    @staticmethod
    def blur(t: Tensor) -> Tensor:
        p = F.pad(t, (1, 1))
        return (p[..., :-2] + p[..., 1:-1] + p[..., 2:]) / 3

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        return cls.blur(raw_contiguous(x) if cls.raw else x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        return cls.blur(g)


class BoxBlurFixed(BoxBlurRaw):
    raw = False


class MatmulStoreLikeInput(Function):
    """x @ w; BROKEN: the input gradient is stored in x's own layout (expanded x: one row)."""

    stored = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        gx = g @ w.t()
        return (store_like(gx, x) if cls.stored else gx), x.t() @ g


class MatmulStoreFixed(MatmulStoreLikeInput):
    stored = False


class PairDistFlat(Function):
    """Squared distances; BROKEN: backward flattens the saved input with .view."""

    flat = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return ((x[:, None] - y[None]) ** 2).sum(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        if cls.flat:
            x = x.view(-1).view(x.shape)
        diff = 2 * (x[:, None] - y[None]) * g[..., None]
        return diff.sum(1), -diff.sum(0)


class PairDistFixed(PairDistFlat):
    flat = False


def dists_ref(p: Tensor, q: Tensor) -> Tensor:
    return ((p[:, None] - q[None]) ** 2).sum(-1)


PT = "https://github.com/pytorch/pytorch"
ENTRIES = (
    Entry("pt64529-sum-expanded-grad", "pytorch/pytorch", "issue 64529", f"{PT}/issues/64529",
          "grad_output_layout", "out.sum().backward(): grad_output is a stride-0 expanded tensor",
          "x [2,1], s [2]; grad_output expanded from a scalar",
          RowScale, RowScaleFixed, lambda: [rand(3, 4), rand(3, seed=1)],
          lambda x, s: x * s[:, None],
          smallest_inputs=lambda: [rand(2, 1), rand(2, seed=1)], grad_kind="expanded",
          note='the report shows the layout; the bug modelled is what it breaks: a '
               'kernel indexing grad_output as contiguous'),
    Entry("fa355-noncontig-dout", "Dao-AILab/flash-attention", "issue 355",
          "https://github.com/Dao-AILab/flash-attention/issues/355", "grad_output_layout",
          "dout not contiguous (a transpose or slice after the attention)",
          "q, k, v [2,2]; dout = a [2,2] tensor's .t()",
          Attention, AttentionFixed, lambda: [rand(3, 4), rand(3, 4, seed=1), rand(3, 4, seed=2)],
          attention_ref,
          smallest_inputs=lambda: [rand(2, 2), rand(2, 2, seed=1), rand(2, 2, seed=2)],
          grad_kind="transposed"),
    Entry("mmcv737-roialign-grad", "open-mmlab/mmcv", "PR 737",
          "https://github.com/open-mmlab/mmcv/pull/737", "grad_output_layout",
          "a head that hands RoIAlign a non-contiguous grad_output (Sparse R-CNN's DII head)",
          "x [1,1,4,4] (output [1,1,2,2]); grad_output transposed in the last two dims",
          AvgPool2, AvgPool2Fixed, lambda: [rand(1, 2, 4, 4)], lambda x: F.avg_pool2d(x, 2),
          smallest_inputs=lambda: [rand(1, 1, 4, 4)], grad_kind="transposed",
          note='RoIAlign modelled as 2x2 average pooling with the same raw grad_output '
               'read'),
    Entry("apex1601-view-grad", "NVIDIA/apex", "PR 1601",
          "https://github.com/NVIDIA/apex/pull/1601", "grad_output_layout",
          "grad_output not contiguous: backward's .view raises",
          "x [2,2,1], w [2,1]; grad_output transposed in its last two dims",
          LinearView, LinearReshape, lambda: [rand(2, 3, 4), rand(5, 4, seed=1)],
          lambda x, w: x @ w.t(),
          smallest_inputs=lambda: [rand(2, 2, 1), rand(2, 1, seed=1)], grad_kind="transposed"),
    Entry("flownet39-assert-contig", "NVIDIA/flownet2-pytorch", "issue 39",
          "https://github.com/NVIDIA/flownet2-pytorch/issues/39", "grad_output_layout",
          "grad_output not contiguous: backward asserts contiguity",
          "a, b [1,1,1,2]; out.sum().backward()",
          Correlation, CorrelationFixed, lambda: [rand(1, 3, 2, 4), rand(1, 3, 2, 4, seed=1)],
          lambda a, b: (a * b).sum(1),
          smallest_inputs=lambda: [rand(1, 1, 1, 2), rand(1, 1, 1, 2, seed=1)],
          grad_kind="expanded"),
    Entry("p3d196-grad-dists-contig", "facebookresearch/pytorch3d", "issue 196",
          "https://github.com/facebookresearch/pytorch3d/issues/196", "grad_output_layout",
          "a renderer hands the distance kernel a non-contiguous grad: it raises",
          "p [1,3], q [2,3]; grad_output expanded (out.sum())",
          PointDists, PointDistsFixed, lambda: [rand(4, 3), rand(5, 3, seed=1)], dists_ref,
          smallest_inputs=lambda: [rand(1, 3), rand(2, 3, seed=1)], grad_kind="expanded"),
    Entry("dcnv2-3-weight-grad-sum", "chengdazhi/Deformable-Convolution-V2-PyTorch", "issue 3",
          "https://github.com/chengdazhi/Deformable-Convolution-V2-PyTorch/issues/3",
          "grad_output_layout",
          "loss = out.sum(): the weight gradient reads the expanded grad raw (ones_like is right)",
          "x [2,1], w [1,1]; out.sum().backward()",
          MatmulWeightRaw, MatmulWeightFixed, lambda: [rand(3, 4), rand(4, 2, seed=1)],
          lambda x, w: x @ w,
          smallest_inputs=lambda: [rand(2, 1), rand(1, 1, seed=1)], grad_kind="expanded",
          note="the deformable conv's weight gradient modelled as a matmul's"),
    Entry("nn345-mean-gradoutput", "torch/nn", "PR 345", "https://github.com/torch/nn/pull/345",
          "grad_output_layout",
          "two Means chained: the second hands the first a non-contiguous (expanded) grad",
          "x [2,2]; grad_output expanded",
          MeanLast, MeanLastFixed, lambda: [rand(3, 4)], lambda x: x.mean(-1),
          smallest_inputs=lambda: [rand(2, 2)], grad_kind="expanded"),
    Entry("pt195210-cat-narrow-grad", "pytorch/pytorch", "PR 195210", f"{PT}/pull/195210",
          "grad_output_layout",
          "torch.cat after the op: backward gets a narrowed, strided view of the grad",
          "x [2,2]; torch.cat([y, z], 1) downstream",
          SoftplusRaw, SoftplusFixed, lambda: [rand(3, 4)], F.softplus,
          smallest_inputs=lambda: [rand(2, 2)], grad_kind="narrow",
          note='the triton_op kernel modelled as softplus with a raw grad_output read'),
    Entry("ssim1-noncontig-image", "MrNeRF/optimized-fused-ssim", "issue 1",
          "https://github.com/MrNeRF/optimized-fused-ssim/issues/1", "noncontiguous_input",
          "a permuted (non-contiguous) image: the kernel reads its raw memory",
          "x [2,2] transposed",
          BoxBlurRaw, BoxBlurFixed, lambda: [rand(1, 2, 3, 4)], BoxBlurRaw.blur,
          smallest_inputs=lambda: [rand(2, 2).t()]),
    Entry("pt30303-expanded-input", "pytorch/pytorch", "issue 30303", f"{PT}/issues/30303",
          "noncontiguous_input",
          "an expanded (stride-0) input: its gradient is stored in its own layout, one row wins",
          "x = a [1,2] row expanded to [2,2], w [2,2]",
          MatmulStoreLikeInput, MatmulStoreFixed, lambda: [rand(3, 4), rand(4, 2, seed=1)],
          lambda x, w: x @ w,
          smallest_inputs=lambda: [rand(1, 2).expand(2, 2), rand(2, 2, seed=1)],
          note="the report's cause was inside torch's CUDA reshape; modelled as a "
               "kernel storing the input gradient in the expanded input's own layout"),
    Entry("pt69997-cdist-noncontig", "pytorch/pytorch", "issue 69997", f"{PT}/issues/69997",
          "noncontiguous_input",
          "a non-contiguous input (a slice): backward's .view of the saved input raises",
          "x = a [2,2,2] tensor's [:, 0, :], y [2,2]",
          PairDistFlat, PairDistFixed, lambda: [rand(4, 3), rand(5, 3, seed=1)], dists_ref,
          smallest_inputs=lambda: [rand(2, 2, 2)[:, 0, :], rand(2, 2, seed=1)]),
)

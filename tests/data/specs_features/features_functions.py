"""Functions for the feature specs (features.yaml, features_broken.yaml), imported from the spec
file's own folder: a filter bank with fixed taps, and a weighted, masked cross-entropy with an
int64 target, each with a hand-written backward, and broken twins.

Regenerate taps.pt with `python features_functions.py` (writes it next to this file).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


def _bank(taps: Tensor, channels: int) -> Tensor:
    """Every filter (a row of taps) applied to every channel: a grouped conv1d weight."""
    return taps.repeat(channels, 1).unsqueeze(1)


class FilterBank(torch.autograd.Function):
    """y[n, c * F + f] = conv1d(x[n, c], taps[f], stride): an analysis filter bank (the first
    level of a wavelet transform).  The taps are constants: backward returns None for them."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, taps: Tensor, stride: int) -> Tensor:
        weight = _bank(taps.to(x.dtype), x.shape[1])
        ctx.save_for_backward(weight)
        ctx.shape, ctx.stride = x.shape, stride
        return F.conv1d(x, weight, stride=stride, groups=x.shape[1])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None]:
        (weight,) = ctx.saved_tensors
        gx = None
        if ctx.needs_input_grad[0]:
            # in grad's dtype: under torch.autocast the forward conv ran in bfloat16
            weight = weight.to(grad.dtype)
            gx = torch.nn.grad.conv1d_input(ctx.shape, weight, grad, stride=ctx.stride,
                                            groups=ctx.shape[1])
        return gx, None, None


def filter_bank_reference(x: Tensor, taps: Tensor, stride: int) -> Tensor:
    return F.conv1d(x, _bank(taps.to(x.dtype), x.shape[1]), stride=stride, groups=x.shape[1])


class WeightedCrossEntropy(torch.autograd.Function):
    """mean over the kept samples of -weight[t] * log_softmax(logits)[n, t]; `target` int64
    class indices, `keep` a bool mask, `weight` a keyword tensor of per-class weights."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, keep: Tensor,
                weight: Tensor) -> Tensor:
        logp = torch.log_softmax(logits, dim=1)
        w = weight.to(logits.dtype)[target] * keep.to(logits.dtype)
        count = max(int(keep.sum()), 1)
        ctx.save_for_backward(logp, target, w)
        ctx.count = count
        return -(w * logp.gather(1, target.unsqueeze(1)).squeeze(1)).sum() / count

    @staticmethod
    @once_differentiable  # a hand-written loss gradient: double backward raises, as declared
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None, None]:
        logp, target, w = ctx.saved_tensors
        onehot = F.one_hot(target, logp.shape[1]).to(logp.dtype)
        glogits = (logp.exp() - onehot) * (w / ctx.count).unsqueeze(1) * grad
        return glogits, None, None, None


def cross_entropy_reference(logits: Tensor, target: Tensor, keep: Tensor, *,
                            weight: Tensor) -> Tensor:
    w = weight.to(logits.dtype)[target] * keep.to(logits.dtype)
    per = F.cross_entropy(logits, target, reduction="none")
    return (w * per).sum() / max(int(keep.sum()), 1)


class CrossEntropyNoMean(WeightedCrossEntropy):
    """BROKEN: backward forgets the 1/count of the mean (off by a constant factor)."""

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None, None]:
        logp, target, w = ctx.saved_tensors
        onehot = F.one_hot(target, logp.shape[1]).to(logp.dtype)
        return (logp.exp() - onehot) * w.unsqueeze(1) * grad, None, None, None


def _taps() -> dict[str, Tensor]:
    """Haar and Daubechies-2 analysis filters (low-pass, high-pass), float64."""
    r2 = math.sqrt(2.0)
    r3 = math.sqrt(3.0)
    haar = torch.tensor([[1 / r2, 1 / r2], [1 / r2, -1 / r2]], dtype=torch.float64)
    lo = torch.tensor([1 + r3, 3 + r3, 3 - r3, 1 - r3], dtype=torch.float64) / (4 * r2)
    hi = lo.flip(0) * torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    return {"haar": haar, "db2": torch.stack([lo, hi])}


if __name__ == "__main__":
    torch.save(_taps(), Path(__file__).with_name("taps.pt"))

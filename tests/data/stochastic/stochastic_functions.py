"""Stochastic custom Functions (they draw from torch's global generators), correct and broken.

- LeanDropout: memory-lean dropout: forward saves the RNG state before drawing its mask and
  backward replays that state (under a forked RNG, so the caller's stream is left alone) to
  draw the same mask again, instead of keeping the mask;
- MaskedDropout: dropout that saves its mask (save_for_backward);
- NoisyScale: x * w + sigma * randn_like(x), the noise drawn in forward only (its backward
  needs no random numbers);
- the broken twins of LeanDropout: backward draws a fresh mask (FreshMaskDropout), replays
  the state taken after drawing (LateStateDropout), or forgets the mask (UnmaskedDropout);
- NoisyScaleWrongGrad: a stochastic Function broken for another reason (a wrong formula).

Each draws with `torch.rand_like(x)` (or randn_like), as its plain-autograd reference does, so
both draw the same numbers from the same state.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

#: The drop probability of every dropout here.
P = 0.3
#: The noise level of NoisyScale.
SIGMA = 0.5


def rng_state(x: Tensor) -> Tensor:
    """The state of the generator that draws for `x` (CUDA's on a CUDA tensor)."""
    return torch.cuda.get_rng_state(x.device) if x.is_cuda else torch.get_rng_state()


def mask_from(state: Tensor, x: Tensor) -> Tensor:
    """The keep-mask forward drew for `x`, drawn again from `state` without moving the
    caller's generators (torch.random.fork_rng restores them)."""
    devices = [x.device] if x.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        if x.is_cuda:
            torch.cuda.set_rng_state(state, x.device)
        else:
            torch.set_rng_state(state)
        return keep_mask(x)


def keep_mask(x: Tensor) -> Tensor:
    """The dropout mask, scaled: 1/(1-P) where kept, 0 where dropped."""
    return (torch.rand_like(x) > P).to(x.dtype) / (1 - P)


def dropout_reference(x: Tensor) -> Tensor:
    """Dropout in plain autograd, drawing the same way as the Functions."""
    return x * ((torch.rand_like(x) > P).to(x.dtype) / (1 - P))


class LeanDropout(torch.autograd.Function):
    """Dropout that saves the RNG state, not the mask: backward draws the same mask again."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.state = rng_state(x)  # before drawing: the mask is the next draw from it
        ctx.like = torch.empty_like(x, device="meta")
        return x * keep_mask(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        like = torch.empty_strided(ctx.like.shape, ctx.like.stride(), dtype=g.dtype,
                                   device=g.device)
        return g * mask_from(ctx.state, like)


class FreshMaskDropout(LeanDropout):
    """Broken: backward draws a fresh mask from the generators as they are then."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        like = torch.empty_strided(ctx.like.shape, ctx.like.stride(), dtype=g.dtype,
                                   device=g.device)
        return g * keep_mask(like)


class LateStateDropout(LeanDropout):
    """Broken: the RNG state is saved after drawing the mask, so backward replays the next
    draw's state (another mask)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        out = x * keep_mask(x)
        ctx.state = rng_state(x)  # after drawing: wrong
        ctx.like = torch.empty_like(x, device="meta")
        return out


class MaskedDropout(torch.autograd.Function):
    """Dropout that keeps its mask for backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        mask = keep_mask(x)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (mask,) = ctx.saved_tensors
        return g * mask


class NoisyScale(torch.autograd.Function):
    """x * w + SIGMA * noise: Gaussian noise drawn in forward; the gradients need none of it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w + SIGMA * torch.randn_like(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, g * x


def noisy_scale_reference(x: Tensor, w: Tensor) -> Tensor:
    """NoisyScale in plain autograd."""
    return x * w + SIGMA * torch.randn_like(x)


class NoisyScaleWrongGrad(NoisyScale):
    """Broken, but not by its draws: the gradient of w is x * x instead of x (neither this
    backward nor the right one needs the noise, so rng_replay would name the wrong cause)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, g * x * x


class UnmaskedDropout(LeanDropout):
    """Broken: backward forgets the mask (scales every element), so the draws forward made
    are not replayed at all."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g / (1 - P)

"""`blur`: a depthwise 3x3 blur whose backward is itself a custom Function (double backward).

F.conv2d is a cross-correlation, so the adjoint of "correlate with k" is "correlate with k
flipped in both spatial dims".  The backward Function therefore correlates with the flipped
kernel, and *its* backward flips back to the original kernel.  A symmetric kernel (the
binomial one) hides a missing flip, which is why the cases include an asymmetric kernel too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gradlab.model import OpDef

#: The StyleGAN2 blur: outer product of [1, 2, 1] with itself, normalised to sum 1.
BINOMIAL: tuple[tuple[float, ...], ...] = tuple(
    tuple(a * b / 16.0 for b in (1.0, 2.0, 1.0)) for a in (1.0, 2.0, 1.0)
)
#: No symmetry at all: its 180-degree rotation and both single-axis mirrors differ from it, so a
#: backward with a missing or half-done flip gives a different gradient.
ASYMMETRIC: tuple[tuple[float, ...], ...] = (
    (1 / 18, 2 / 18, 0.0),
    (3 / 18, 5 / 18, 1 / 18),
    (0.0, 4 / 18, 2 / 18),
)
#: Kernels that can be named in a case (plain strings keep `Case.args` readable and hashable).
NAMED_KERNELS: dict[str, tuple[tuple[float, ...], ...]] = {
    "binomial": BINOMIAL,
    "asymmetric": ASYMMETRIC,
}

#: A kernel as a caller may give it: a [3, 3] tensor, nested numbers, or a name.
KernelLike = Tensor | Sequence[Sequence[float]] | str


def kernel_2d(
    kernel: KernelLike, dtype: torch.dtype | None = None, device: torch.device | None = None
) -> Tensor:
    """Normalise `kernel` (tensor, nested numbers or name) to a [3, 3] tensor."""
    if isinstance(kernel, str):
        if kernel not in NAMED_KERNELS:
            raise ValueError(f"unknown blur kernel {kernel!r} (known: {', '.join(NAMED_KERNELS)})")
        kernel = NAMED_KERNELS[kernel]
    if isinstance(kernel, Tensor):
        if kernel.requires_grad:
            # The Functions return None for the kernel: a kernel that wants a gradient would
            # silently get none, so refuse it instead.
            raise ValueError("blur does not differentiate its kernel; pass one without grad")
        k = kernel.to(dtype=dtype, device=device)
    else:
        k = torch.tensor(kernel, dtype=dtype, device=device)
    if k.shape != (3, 3):
        raise ValueError(f"blur kernel must be 3x3, got shape {tuple(k.shape)}")
    return k


def depthwise_kernels(kernel: Tensor, channels: int) -> tuple[Tensor, Tensor]:
    """The per-channel [C, 1, 3, 3] weight for F.conv2d and its spatial flip (for the adjoint)."""
    weight = kernel.reshape(1, 1, 3, 3).expand(channels, 1, 3, 3).contiguous()
    return weight, torch.flip(weight, dims=(2, 3))


def _depthwise(x: Tensor, weight: Tensor) -> Tensor:
    """Correlate every channel of x with its own 3x3 kernel, keeping H and W.

    The kernel takes x's dtype: under torch.autocast the forward's conv runs in half precision,
    so the gradients reaching the backward Functions are half while the kernels are float32
    (a no-op without autocast)."""
    return F.conv2d(x, weight.to(x.dtype), padding=1, groups=x.shape[1])


class BlurFunctionBackward(torch.autograd.Function):
    """The blur's gradient map g -> corr(g, flip(k)), as a Function so it can be differentiated."""

    @staticmethod
    def forward(ctx: Any, grad_out: Tensor, weight: Tensor, weight_flip: Tensor) -> Tensor:
        ctx.save_for_backward(weight, weight_flip)
        return _depthwise(grad_out, weight_flip)

    @staticmethod
    def backward(ctx: Any, grad_grad: Tensor) -> tuple[Tensor | None, None, None]:
        weight, _ = ctx.saved_tensors
        grad = None
        if ctx.needs_input_grad[0]:
            # Adjoint of correlating with flip(k) is correlating with flip(flip(k)) = k.  Plain
            # autograd ops here, so third order works too.
            grad = _depthwise(grad_grad, weight)
        return grad, None, None


class BlurFunction(torch.autograd.Function):
    """y = corr(x, k) per channel; backward goes through BlurFunctionBackward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, weight_flip: Tensor) -> Tensor:
        ctx.save_for_backward(weight, weight_flip)
        return _depthwise(x, weight)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, None, None]:
        weight, weight_flip = ctx.saved_tensors
        grad = None
        if ctx.needs_input_grad[0]:
            grad = BlurFunctionBackward.apply(grad_out, weight, weight_flip)
        return grad, None, None


def blur(x: Tensor, kernel: KernelLike = "binomial") -> Tensor:
    """Blur every channel of a [B, C, H, W] tensor with the same 3x3 kernel (custom Functions).

    >>> blur(torch.ones(1, 2, 4, 4), "binomial")[0, 0, 1:3, 1:3]
    tensor([[1., 1.],
            [1., 1.]])
    """
    if x.dim() != 4:
        # A 3-D input would be read as unbatched [C, H, W] with groups=H: wrong, not an error.
        raise ValueError(f"blur expects [B, C, H, W], got shape {tuple(x.shape)}")
    weight, weight_flip = depthwise_kernels(kernel_2d(kernel, x.dtype, x.device), x.shape[1])
    out: Tensor = BlurFunction.apply(x, weight, weight_flip)
    return out


def blur_reference(x: Tensor, kernel: KernelLike = "binomial") -> Tensor:
    """Plain-autograd baseline: one depthwise F.conv2d."""
    weight, _ = depthwise_kernels(kernel_2d(kernel, x.dtype, x.device), x.shape[1])
    return _depthwise(x, weight)


class Blur(nn.Module):
    """A fixed 3x3 blur over `channels` channels, through the custom Functions."""

    weight: Tensor
    weight_flip: Tensor

    def __init__(self, channels: int, kernel: KernelLike = "binomial") -> None:
        super().__init__()
        self.channels = channels
        # Buffers follow the module through .to(dtype/device), like any nn parameter.
        weight, weight_flip = depthwise_kernels(kernel_2d(kernel), channels)
        self.register_buffer("weight", weight)
        self.register_buffer("weight_flip", weight_flip)

    def forward(self, x: Tensor) -> Tensor:
        # A grouped conv with C' kernels over C channels does not always fail (C'=2C gives 2C
        # output channels), so a channel mismatch is checked here rather than left to conv2d.
        if x.dim() != 4 or x.shape[1] != self.channels:
            raise ValueError(f"Blur({self.channels}) got input of shape {tuple(x.shape)}")
        out: Tensor = BlurFunction.apply(x, self.weight, self.weight_flip)
        return out

    def extra_repr(self) -> str:
        return f"channels={self.channels}"


OP = OpDef(
    name="blur",
    summary="depthwise 3x3 blur whose backward is a Function",
    function=blur,
    reference=blur_reference,
    second_order=True,
)

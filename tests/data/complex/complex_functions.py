"""Functions with complex inputs or outputs, which gradlab refuses (it checks real derivatives
only): each would pass if checked on its real part alone."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class MulNoConj(torch.autograd.Function):
    """a * b whose backward forgets the conjugate (right for real values only)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return g * b, g * a


def mul_reference(a: Tensor, b: Tensor) -> Tensor:
    return a * b


class Rfft(torch.autograd.Function):
    """A real-to-complex FFT whose backward is off by the irfft's scaling (a complex output:
    today's flat outputs would drop it, and nothing would be compared)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.n = x.shape[-1]
        return torch.fft.rfft(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return torch.fft.irfft(g, n=ctx.n)


def rfft_reference(x: Tensor) -> Tensor:
    return torch.fft.rfft(x)

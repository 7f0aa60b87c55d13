"""Complex Functions, each broken one beside its correct twin: a multiply whose backward
forgets the conjugate, |z|^2 whose backward returns the conjugate gradient, a real-to-complex
FFT whose backward is the inverse FFT (the adjoint's scaling and one-sided bins wrong)."""

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


class Mul(torch.autograd.Function):
    """a * b, its backward conjugating as PyTorch's convention asks (grad_a = g * conj(b))."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return g * b.conj(), g * a.conj()


def mul_reference(a: Tensor, b: Tensor) -> Tensor:
    return a * b


class Abs2Conj(torch.autograd.Function):
    """|z|^2 (a real output) whose backward returns the conjugate of the right gradient."""

    @staticmethod
    def forward(ctx: Any, z: Tensor) -> Tensor:
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (z,) = ctx.saved_tensors
        return (2 * g * z).conj()


class Abs2(torch.autograd.Function):
    """|z|^2 with the right gradient 2 g z (dL/dx + i dL/dy)."""

    @staticmethod
    def forward(ctx: Any, z: Tensor) -> Tensor:
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (z,) = ctx.saved_tensors
        return 2 * g * z


def abs2_reference(z: Tensor) -> Tensor:
    return z.abs() ** 2


class RfftWrong(torch.autograd.Function):
    """A real-to-complex FFT whose backward is irfft: off by the scaling n and by the
    one-sided bins' doubling."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.n = x.shape[-1]
        return torch.fft.rfft(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return torch.fft.irfft(g, n=ctx.n)


class Rfft(torch.autograd.Function):
    """rfft with its adjoint as backward: Re(sum_k g_k e^{+2 pi i k t / n}) over the kept bins,
    n * Re(ifft(g zero-padded to n))."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.n = x.shape[-1]
        return torch.fft.rfft(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return torch.fft.ifft(g, n=ctx.n).real * ctx.n


def rfft_reference(x: Tensor) -> Tensor:
    return torch.fft.rfft(x)


class MulJvp(torch.autograd.Function):
    """a * b with a jvp (forward mode: no conjugate) beside its conjugating backward."""

    @staticmethod
    def forward(a: Tensor, b: Tensor) -> Tensor:
        return a * b

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
        a, b = inputs
        ctx.save_for_backward(a, b)
        ctx.save_for_forward(a, b)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return g * b.conj(), g * a.conj()

    @staticmethod
    def jvp(ctx: Any, da: Tensor, db: Tensor) -> Tensor:
        a, b = ctx.saved_tensors
        return da * b + a * db


class MulJvpWrong(MulJvp):
    """MulJvp whose jvp uses conj(b): a conjugate where forward mode has none."""

    @staticmethod
    def jvp(ctx: Any, da: Tensor, db: Tensor) -> Tensor:
        a, b = ctx.saved_tensors
        return da * b.conj() + a * db

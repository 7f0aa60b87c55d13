"""Custom Functions with a hand-written jvp (forward-mode AD) for tests/test_forward_ad.py:
a correct one, broken twins, and one without jvp."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class Tanh(torch.autograd.Function):
    """tanh with a correct backward and a correct jvp: (1 - tanh(x)^2) * x_t."""

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)

    @staticmethod
    def jvp(ctx: Any, x_t: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return x_t * (1 - y * y)


class TanhJvpUsesX(Tanh):
    """The twin whose jvp uses x where tanh(x) belongs (backward right)."""

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def jvp(ctx: Any, x_t: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return x_t * (1 - x * x)


class TanhJvpDoubled(Tanh):
    """Backward right, jvp twice the derivative."""

    @staticmethod
    def jvp(ctx: Any, x_t: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return 2 * x_t * (1 - y * y)


class TanhJvpNone(Tanh):
    """A jvp that returns None for a differentiable output: torch raises (a crash, not an
    absent jvp)."""

    @staticmethod
    def jvp(ctx: Any, x_t: Tensor) -> None:
        return None


class TanhNoJvp(torch.autograd.Function):
    """A correct tanh without a jvp: forward mode raises."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class MulJvpSecondWrong(torch.autograd.Function):
    """x * w, whose jvp gets w's part wrong (x_t * w + x * w_t expected, x_t * w + w_t given)."""

    @staticmethod
    def forward(x: Tensor, w: Tensor) -> Tensor:
        return x * w

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor], output: Tensor) -> None:
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w, g * x

    @staticmethod
    def jvp(ctx: Any, x_t: Tensor, w_t: Tensor) -> Tensor:
        _, w = ctx.saved_tensors
        return x_t * w + w_t


def tanh(x: Tensor) -> Tensor:
    return Tanh.apply(x)


def tanh_jvp_uses_x(x: Tensor) -> Tensor:
    return TanhJvpUsesX.apply(x)


def tanh_jvp_doubled(x: Tensor) -> Tensor:
    return TanhJvpDoubled.apply(x)


def tanh_no_jvp(x: Tensor) -> Tensor:
    return TanhNoJvp.apply(x)


def mul_jvp_second_wrong(x: Tensor, w: Tensor) -> Tensor:
    return MulJvpSecondWrong.apply(x, w)


def mul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x * w

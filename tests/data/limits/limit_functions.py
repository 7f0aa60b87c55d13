"""Functions that run past a small time limit in one step, for tests/test_limits.py."""

from __future__ import annotations

import time
from typing import Any

from torch import Tensor
from torch.autograd import Function

#: Far past any timeout the tests set: the parent must stop these.
HANG_S = 600.0


class HangsInBackward(Function):
    """y = 2x whose backward never returns (a sleep the parent must kill)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        time.sleep(HANG_S)
        return g * 2


class _Hang(Function):
    """The identity whose backward never returns."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        time.sleep(HANG_S)
        return g


class HangsInDoubleBackward(Function):
    """y = x^2, right to first order; its backward's own backward never returns."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return _Hang.apply(2 * x) * g


def double(x: Tensor) -> Tensor:
    return x * 2


def square(x: Tensor) -> Tensor:
    return x * x


class Square(Function):
    """Correct: y = x^2."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g

"""A Function that allows only `.backward()` (reentrant activation checkpointing refuses
`torch.autograd.grad`) is checked through `.backward()` (gradlab.checks.numeric.backprop): a
correct one passes, and a wrong gradient inside it still fails."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torch.utils.checkpoint import checkpoint

import gradlab
from gradlab.checks.numeric import backprop


class Tanh(Function):
    """tanh; doubled: BROKEN, backward twice the derivative."""

    doubled = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) * (2.0 if cls.doubled else 1.0)


class TanhDoubled(Tanh):
    doubled = True


def block(x: Tensor, w: Tensor, fn: type[Function]) -> Tensor:
    return fn.apply(x @ w) @ w.T


def red(fn: type[Function]) -> set[tuple[str, str]]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    w = torch.randn(4, 4, dtype=torch.float64, generator=gen).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # checkpoint's note on inputs without grad
        report = gradlab.check(lambda a, b: checkpoint(block, a, b, fn, use_reentrant=True),
                               [x, w], reference=lambda a, b: (a @ b).tanh() @ b.T)
    return {(r.check, r.hint) for r in report.rows if r.status in ("fail", "error")}


def test_a_checkpointed_block_that_refuses_autograd_grad_passes() -> None:
    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"(incompatible|not compatible) with \.grad"):
        torch.autograd.grad(checkpoint(block, x, w, Tanh, use_reentrant=True).sum(), x)
    assert red(Tanh) == set()


def test_a_wrong_gradient_inside_the_checkpoint_still_fails() -> None:
    assert ("gradient", "constant_factor") in red(TanhDoubled) or any(
        check == "gradient" for check, _ in red(TanhDoubled)), red(TanhDoubled)


def test_what_backward_raises_too_is_raised_as_autograd_grad_raised_it() -> None:
    class Raises(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            raise RuntimeError("no backward here")

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="no backward here"):
        backprop.grads([Raises.apply(x)], [x], [torch.ones(2)])
    assert x.grad is None  # the leaf's .grad is put back as it was

"""The blur op: forward, first and second order, and the flip that a symmetric kernel hides."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from gradlab.cases import materialize
from gradlab.model import Case
from gradlab.ops.blur import (
    ASYMMETRIC,
    BINOMIAL,
    Blur,
    blur,
    blur_reference,
    depthwise_kernels,
    kernel_2d,
)
from gradlab.spec import resolve


def make_args(case: Case, seed: int = 0) -> list[Any]:
    """Case args as float64 tensors (TensorArg) or the plain values themselves."""
    return materialize(case, "float64", "cpu", seed).args


(TARGET,) = resolve("blur")  # the cases live in gradlab/specs/blur.yaml
OP = TARGET.op
CASES = {c.name: c for c in OP.cases}


def test_cases_cover_symmetric_and_asymmetric_kernels() -> None:
    # Kernels are names or nested numbers in the spec; a symmetric one hides a missing flip.
    kernels = [kernel_2d(c.args[1], torch.float64) for c in OP.cases]
    assert any(torch.equal(torch.flip(k, (0, 1)), k) for k in kernels)
    assert any(not torch.equal(torch.flip(k, (0, 1)), k) for k in kernels)
    assert OP.second_order


def test_kernels() -> None:
    k = kernel_2d(ASYMMETRIC, torch.float64)
    assert k.sum().item() == pytest.approx(1.0)
    assert kernel_2d(BINOMIAL).sum().item() == pytest.approx(1.0)
    # No symmetry the flip could hide behind: rotation and both mirrors all differ.
    for dims in [(0, 1), (0,), (1,)]:
        assert not torch.equal(torch.flip(k, dims), k)
    # The three spellings of a kernel agree.
    assert torch.equal(kernel_2d("asymmetric", torch.float64), k)
    assert torch.equal(kernel_2d(k.tolist(), torch.float64), k)


@pytest.mark.parametrize("name", list(CASES))
def test_forward_matches_reference(name: str) -> None:
    x, kernel = make_args(CASES[name])
    torch.testing.assert_close(blur(x, kernel), blur_reference(x, kernel), rtol=0, atol=1e-14)
    # Written out by hand for one output pixel away from the border: a cross-correlation.
    k = kernel_2d(kernel, torch.float64)
    expected = (x[-1, -1, 1:4, 2:5] * k).sum()
    torch.testing.assert_close(blur(x, kernel)[-1, -1, 2, 3], expected)


@pytest.mark.parametrize("name", list(CASES))
def test_size1_variants(name: str) -> None:
    """Batch, channels or height of 1: the same blur, first and second order."""
    case = CASES[name]
    for ((pos, dim),) in case.size1:
        shape = list(case.args[pos].shape)
        shape[dim] = 1
        args = make_args(replace(case, args=(replace(case.args[0], shape=tuple(shape)),
                                             *case.args[1:])))
        torch.testing.assert_close(blur(*args), blur_reference(*args), rtol=0, atol=1e-14)
        assert torch.autograd.gradgradcheck(blur, args)


def test_kernel_as_list_or_tensor() -> None:
    x = make_args(CASES["asymmetric"])[0]
    as_list = [list(row) for row in ASYMMETRIC]
    as_tensor = torch.tensor(ASYMMETRIC, dtype=torch.float32)  # cast to x's dtype inside
    ref = blur(x, "asymmetric")
    torch.testing.assert_close(blur(x, as_list), ref)
    torch.testing.assert_close(blur(x, as_tensor), ref)


def test_bad_kernels_are_refused() -> None:
    x = torch.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="unknown blur kernel"):
        blur(x, "gaussian")
    with pytest.raises(ValueError, match="3x3"):
        blur(x, [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match=r"\[B, C, H, W\]"):
        blur(torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="does not differentiate"):
        blur(x, torch.ones(3, 3, requires_grad=True))


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name: str) -> None:
    assert torch.autograd.gradcheck(blur, make_args(CASES[name]))


@pytest.mark.parametrize("name", list(CASES))
def test_gradgradcheck(name: str) -> None:
    assert torch.autograd.gradgradcheck(blur, make_args(CASES[name]))


def test_backward_is_a_function() -> None:
    """The gradient's own graph goes through BlurFunctionBackward, not plain conv2d."""
    x = make_args(CASES["asymmetric"])[0]
    # blur is linear, so the gradient depends on grad_output only: give it one that needs grad.
    g = torch.randn_like(x).requires_grad_()
    (gx,) = torch.autograd.grad(blur(x, "asymmetric"), x, g, create_graph=True)
    assert gx.grad_fn is not None
    # autograd names the node of Function `F` "FBackward".
    assert type(gx.grad_fn).__name__ == "BlurFunctionBackwardBackward"


def test_second_order_through_grad_output() -> None:
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    assert not blur(x).requires_grad
    x.requires_grad_()
    g = torch.randn(1, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(blur(x), x, g, create_graph=True)
    # Second order w.r.t. grad_output only (x does not enter the gradient: blur is linear).
    (gg,) = torch.autograd.grad(gx.sum(), g)
    torch.testing.assert_close(gg, blur_reference(torch.ones_like(x), BINOMIAL))


def test_module_matches_function() -> None:
    x = make_args(CASES["asymmetric"])[0]
    module = Blur(3, kernel="asymmetric").double()
    torch.testing.assert_close(module(x), blur(x, "asymmetric"))
    assert module.weight.shape == (3, 1, 3, 3)
    # Blur(3) applied to 6 channels would not fail inside conv2d on its own.
    with pytest.raises(ValueError, match="Blur"):
        module(torch.zeros(1, 6, 4, 4, dtype=torch.float64))


class NoFlipBlurBackward(torch.autograd.Function):
    """BROKEN on purpose: the gradient correlates with k instead of flip(k)."""

    @staticmethod
    def forward(ctx: Any, grad_out: Tensor, weight: Tensor) -> Tensor:
        ctx.save_for_backward(weight)
        return F.conv2d(grad_out, weight, padding=1, groups=grad_out.shape[1])

    @staticmethod
    def backward(ctx: Any, grad_grad: Tensor) -> tuple[Tensor, None]:
        (weight,) = ctx.saved_tensors
        return F.conv2d(grad_grad, weight, padding=1, groups=grad_grad.shape[1]), None


class NoFlipBlur(torch.autograd.Function):
    """BROKEN on purpose: BlurFunction with the kernel flip forgotten."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor) -> Tensor:
        ctx.save_for_backward(weight)
        return F.conv2d(x, weight, padding=1, groups=x.shape[1])

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None]:
        (weight,) = ctx.saved_tensors
        return NoFlipBlurBackward.apply(grad_out, weight), None


def no_flip_blur(x: Tensor, kernel: Any) -> Tensor:
    weight, _ = depthwise_kernels(kernel_2d(kernel, x.dtype), x.shape[1])
    out: Tensor = NoFlipBlur.apply(x, weight)
    return out


def test_missing_flip_is_only_caught_by_the_asymmetric_kernel() -> None:
    """Why the asymmetric case exists: the binomial kernel equals its flip."""
    assert torch.autograd.gradcheck(no_flip_blur, make_args(CASES["binomial"]))
    assert not torch.autograd.gradcheck(
        no_flip_blur, make_args(CASES["asymmetric"]), raise_exception=False
    )
    # The correct twin passes on the same inputs.
    assert torch.autograd.gradcheck(blur, make_args(CASES["asymmetric"]))

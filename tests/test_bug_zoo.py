"""The bug zoo: each bug class gradlab claims to catch, as a broken Function and a correct twin.

Every broken Function is written the way a person actually gets it wrong; its twin is the fix.
`gradlab.check` runs with default options (second_order / size1 only where the bug class needs
them).  A broken Function must fail with the expected hint on a row that names the offending
input (and, for wrong numbers, says where); the twin must pass.  Shapes are tiny float64.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.ops.conv2d import conv2d_reference
from gradlab.render.words import location, message
from gradlab.results import CheckRow, Report

F64 = torch.float64


# --------------------------------------------------------------------------------------------
# helpers


def rand(*shape: int, seed: int = 0, dtype: torch.dtype = F64, low: float = -1.0,
         high: float = 1.0, min_abs: float = 0.0) -> Tensor:
    """Deterministic uniform values in [low, high) (|v| >= min_abs), requiring grad."""
    gen = torch.Generator().manual_seed(seed)
    v = low + (high - low) * torch.rand(shape, generator=gen, dtype=F64)
    if min_abs:
        sign = torch.where(v < 0, -1.0, 1.0).to(F64)
        v = torch.where(v.abs() < min_abs, sign * min_abs, v)
    return v.to(dtype).requires_grad_()


def table(rows: Sequence[CheckRow]) -> list[tuple[str, str, str, str, str, str]]:
    """The rows in a form that reads well in an assertion message."""
    return [(r.variant, r.check, r.status, r.hint, message(r), location(r)) for r in rows]


def names_input(message: str, i: int) -> bool:
    """The message names input i: "input 1", "gradient 1", or as torch's own errors do,
    "index 1" / 1-based "position 2"."""
    pattern = rf"\b(input ?{i}|gradient {i}|index {i}|position {i + 1})\b"
    return re.search(pattern, message) is not None


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def assert_passes(r: Report) -> None:
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


# --------------------------------------------------------------------------------------------
# 1. missing chain rule


class ExpNoChain(Function):
    """BROKEN: returns d exp(x)/dx = exp(x), forgetting to multiply by grad_output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y


class Exp(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return grad * y


# --------------------------------------------------------------------------------------------
# 2. constant factor, sign


class SquareNoTwo(Function):
    """BROKEN: d(x**2)/dx written as x (the 2 forgotten)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * x


class Square(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class CosSign(Function):
    """BROKEN: d cos(x)/dx written as sin(x) (the minus forgotten)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.cos()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * x.sin()


class Cos(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.cos()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return -grad * x.sin()


# --------------------------------------------------------------------------------------------
# 3. swapped gradients


class BilinearSwapped(Function):
    """BROKEN: f(a, b) = a * b**2 with both gradients right but returned in the wrong order."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        grad_a = grad * b * b
        grad_b = grad * 2 * a * b
        return grad_b, grad_a


class Bilinear(Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return grad * b * b, grad * 2 * a * b


def bilinear_ref(a: Tensor, b: Tensor) -> Tensor:
    return a * b**2


# --------------------------------------------------------------------------------------------
# 4. transposed weight gradient


class LinearWT(Function):
    """BROKEN: y = x @ W.T, grad_W written as x.T @ grad (that is dL/dW transposed)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return grad @ w, x.t() @ grad


class Linear(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return grad @ w, grad.t() @ x


def linear_ref(x: Tensor, w: Tensor) -> Tensor:
    return F.linear(x, w)


# --------------------------------------------------------------------------------------------
# 5. assuming contiguous memory (input, grad_output)


class SquareRawInput(Function):
    """BROKEN: a 'fast path' that reads x's raw memory as if it were contiguous (a kernel that
    takes data_ptr() and assumes row-major strides)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        raw = x.as_strided(x.shape, contiguous_strides(x.shape))
        return raw * raw

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class SquareContiguousInput(Function):
    """The fix: make the input contiguous before reading it raw."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        xc = x.contiguous()
        raw = xc.as_strided(xc.shape, contiguous_strides(xc.shape))
        return raw * raw

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class SquareRawGradOut(Function):
    """BROKEN: backward reads grad_output's raw memory as if contiguous (wrong for the stride-0
    grad_output that `y.sum().backward()` hands it)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        g = grad.as_strided(grad.shape, contiguous_strides(grad.shape))
        return g * 2 * x


class SquareContiguousGradOut(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        gc = grad.contiguous()
        g = gc.as_strided(gc.shape, contiguous_strides(gc.shape))
        return g * 2 * x


def square_ref(x: Tensor) -> Tensor:
    return x**2


# --------------------------------------------------------------------------------------------
# 6. gradient gated on the wrong needs_input_grad entry


class MulGateSwapped(Function):
    """BROKEN: f(a, b) = a * b with the needs_input_grad indices swapped."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = grad * b
        if ctx.needs_input_grad[0]:
            grad_b = grad * a
        return grad_a, grad_b


class Mul(Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = grad * b
        if ctx.needs_input_grad[1]:
            grad_b = grad * a
        return grad_a, grad_b


def mul_ref(a: Tensor, b: Tensor) -> Tensor:
    return a * b


# --------------------------------------------------------------------------------------------
# 7. a tensor stashed on ctx breaks second order


class SquareCtxStash(Function):
    """BROKEN for double backward: x kept as a detached ctx attribute, not save_for_backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.x = x.detach()
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad * 2 * ctx.x


# the correct twin is Square (save_for_backward)


# --------------------------------------------------------------------------------------------
# 8. grad_output written in place


class SquareInplaceGrad(Function):
    """BROKEN: saves an allocation by scaling grad_output in place and returning it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        grad.mul_(2 * x)
        return grad


# the correct twin is Square (out of place)


# --------------------------------------------------------------------------------------------
# 9. wrong number of gradients


class MulOneGrad(Function):
    """BROKEN: two tensor inputs, one gradient returned."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        _, b = ctx.saved_tensors
        return grad * b


# --------------------------------------------------------------------------------------------
# 10. .squeeze() on a 1-channel bias gradient


class Conv2dSqueeze(Function):
    """BROKEN: the seed conv2d's bias gradient with `.squeeze(0)`: 0-d for out_channels == 1."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return F.conv2d(x, w, b)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        grad_x = torch.nn.grad.conv2d_input(x.shape, w, grad)
        grad_w = torch.nn.grad.conv2d_weight(x, w.shape, grad)
        return grad_x, grad_w, grad.sum((0, 2, 3)).squeeze(0)


class Conv2d(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return F.conv2d(x, w, b)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        grad_x = torch.nn.grad.conv2d_input(x.shape, w, grad)
        grad_w = torch.nn.grad.conv2d_weight(x, w.shape, grad)
        return grad_x, grad_w, grad.sum((0, 2, 3))


def conv_args(out_channels: int, dtype: torch.dtype = F64, in_channels: int = 2) -> list[Any]:
    return [rand(1, in_channels, 4, 4, seed=1, dtype=dtype),
            rand(out_channels, in_channels, 3, 3, seed=2, dtype=dtype),
            rand(out_channels, seed=3, dtype=dtype)]


# --------------------------------------------------------------------------------------------
# 11. depthwise blur with the kernel flip forgotten


BINOMIAL = [[a * b / 16 for b in (1.0, 2.0, 1.0)] for a in (1.0, 2.0, 1.0)]
ASYMMETRIC = [[0.1, 0.3, 0.0], [0.05, 0.2, 0.15], [0.0, 0.12, 0.08]]


def _depthwise(kernel: Sequence[Sequence[float]], like: Tensor) -> Tensor:
    k = torch.tensor(kernel, dtype=like.dtype, device=like.device)
    return k.expand(like.shape[1], 1, 3, 3)


class BlurNoFlip(Function):
    """BROKEN: backward correlates grad_output with k instead of flip(k)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, kernel: list[list[float]]) -> Tensor:
        ctx.kernel = kernel  # a python list: fine on ctx
        return F.conv2d(x, _depthwise(kernel, x), padding=1, groups=x.shape[1])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        w = _depthwise(ctx.kernel, grad)
        return F.conv2d(grad, w, padding=1, groups=grad.shape[1]), None


class BlurFlip(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, kernel: list[list[float]]) -> Tensor:
        ctx.kernel = kernel
        return F.conv2d(x, _depthwise(kernel, x), padding=1, groups=x.shape[1])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        w = _depthwise(ctx.kernel, grad).flip(-2, -1)
        return F.conv2d(grad, w, padding=1, groups=grad.shape[1]), None


def blur_ref(x: Tensor, kernel: list[list[float]]) -> Tensor:
    return F.conv2d(x, _depthwise(kernel, x), padding=1, groups=x.shape[1])


# --------------------------------------------------------------------------------------------
# 12. forward differs from the reference


class AddBiasWrongAxis(Function):
    """BROKEN: bias broadcast along rows (b[:, None]) instead of columns; square x hides it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, b: Tensor) -> Tensor:
        return x + b[:, None]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, grad.sum(0)


class AddBias(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, b: Tensor) -> Tensor:
        return x + b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, grad.sum(0)


def add_bias_ref(x: Tensor, b: Tensor) -> Tensor:
    return x + b


class LeakyReluTypo(Function):
    """BROKEN: slope 0.01 typed in forward, 0.1 in backward (reference: slope 0.1)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.01 * x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad, 0.1 * grad)


class LeakyRelu(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad, 0.1 * grad)


def leaky_ref(x: Tensor) -> Tensor:
    return F.leaky_relu(x, 0.1)


# --------------------------------------------------------------------------------------------
# 13. missing gradient


class MulMissingGrad(Function):
    """BROKEN: the gradient of b was never written (None), though b requires grad."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        _, b = ctx.saved_tensors
        return grad * b, None


# --------------------------------------------------------------------------------------------
# 14. gradient for a non-tensor argument


class MulConstantGradForFloat(Function):
    """BROKEN: returns d/dc of x * c for the python float c (must be None)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, c: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.c = c
        return x * c

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        (x,) = ctx.saved_tensors
        return grad * ctx.c, (grad * x).sum()


class MulConstant(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, c: float) -> Tensor:
        ctx.c = c
        return x * c

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return grad * ctx.c, None


def mulconstant_ref(x: Tensor, c: float) -> Tensor:
    return x * c


# --------------------------------------------------------------------------------------------
# 15. forward modifies its input in place


class SoftmaxShiftInplace(Function):
    """BROKEN: subtracts the row max from x *in place* (to save memory), no mark_dirty."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.sub_(x.max(dim=-1, keepdim=True).values)
        e = x.exp()
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))


class Softmax(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        e = (x - x.max(dim=-1, keepdim=True).values).exp()
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))


def softmax_ref(x: Tensor) -> Tensor:
    return torch.softmax(x, -1)


# --------------------------------------------------------------------------------------------
# 16. backward modifies a saved tensor in place


class SquareInplaceSaved(Function):
    """BROKEN: backward doubles the saved input in place (x.mul_(2)) to save an allocation."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * x.mul_(2)


# --------------------------------------------------------------------------------------------
# the zoo


def one(dtype: torch.dtype = F64) -> list[Any]:
    return [rand(3, 4, dtype=dtype)]


def two(dtype: torch.dtype = F64) -> list[Any]:
    return [rand(3, 4, seed=1, dtype=dtype), rand(3, 4, seed=2, dtype=dtype)]


ALL = frozenset(("forward", "gradient", "contract", "jacobian", "second_order"))
FIRST_ORDER = ALL - {"second_order"}


@dataclass(frozen=True)
class Bug:
    """One bug class: the broken Function, its correct twin and what gradlab must report."""

    id: str
    broken: type[Function]
    correct: type[Function]
    args: Callable[..., list[Any]]
    ref: Callable[..., Any]
    #: the failing row must carry one of these hints ...
    hints: frozenset[str]
    #: ... be this check (None: any) ...
    check: str | None = None
    #: ... on a variant starting with one of these (empty: any; "base" is the base run) ...
    variants: tuple[str, ...] = ()
    statuses: frozenset[str] = frozenset({"fail"})
    #: ... name this input in its message (None: no single input is at fault) ...
    input: int | None = None
    #: ... and say where (location non-empty): for wrong numbers.
    located: bool = False
    #: checks whose base rows must still pass (the bug shows only in a variant / one order up).
    base_clean: frozenset[str] = frozenset()
    #: extra gradlab.check options the bug class needs.
    options: dict[str, Any] = field(default_factory=dict)


def H(*hints: str) -> frozenset[str]:
    return frozenset(hints)


BUGS = [
    Bug("missing_chain_rule", ExpNoChain, Exp, one, torch.exp, H("no_chain_rule"),
        check="gradient", variants=("base",), input=0, located=True),
    Bug("constant_factor", SquareNoTwo, Square, one, square_ref, H("constant_factor"),
        check="gradient", variants=("base",), input=0, located=True),
    Bug("sign_flipped", CosSign, Cos, one, torch.cos, H("sign", "constant_factor"),
        check="gradient", variants=("base",), input=0, located=True),
    Bug("swapped_gradients", BilinearSwapped, Bilinear, two, bilinear_ref, H("swapped"),
        check="gradient", variants=("base",), input=0, located=True),
    Bug("transposed_weight_grad", LinearWT, Linear,
        lambda dtype=F64: [rand(3, 4, seed=1, dtype=dtype), rand(4, 4, seed=2, dtype=dtype)],
        linear_ref, H("transposed"), check="gradient", variants=("base",), input=1,
        located=True),
    Bug("raw_memory_input", SquareRawInput, SquareContiguousInput, one, square_ref,
        H("noncontiguous_only"), check="forward", variants=("noncontiguous[", "transposed["),
        located=True, base_clean=ALL),
    Bug("raw_memory_grad_output", SquareRawGradOut, SquareContiguousGradOut, one, square_ref,
        H("grad_output_layout"), check="gradient", variants=("grad_output:expanded",),
        statuses=H("fail", "error"), located=True, base_clean=ALL),
    Bug("needs_input_grad_swapped", MulGateSwapped, Mul, two, mul_ref,
        H("requires_grad_subset"), check="gradient", variants=("requires_grad=[",),
        base_clean=ALL),
    # The user claims double backward (second_order=True): a ctx-stashed tensor makes that a lie
    # that the default (None: run it, skip if it raises) would also catch, but only a claim makes
    # the intent explicit.
    Bug("ctx_stash_second_order", SquareCtxStash, Square, one, square_ref,
        H("second_order_only"), check="second_order", variants=("base",), input=0,
        located=True, base_clean=FIRST_ORDER - {"contract"}, options={"second_order": True}),
    # the same mistake seen directly: the input's storage is a ctx attribute
    # a hazard found by aliasing (no in-place update shows it): a warn
    # (gradlab.checks.diagnosis.policy), a failure under strict, on the base row only
    Bug("ctx_stash_seen_on_ctx", SquareCtxStash, Square, one, square_ref, H("ctx_input"),
        check="contract", variants=("base",), options={"strict": True},
        base_clean=ALL - {"contract", "second_order"}),
    Bug("inplace_grad_output", SquareInplaceGrad, Square, one, square_ref,
        H("inplace_grad_output"), check="contract", variants=("base",)),
    Bug("wrong_gradient_count", MulOneGrad, Mul, two, mul_ref, H("wrong_count"),
        statuses=H("fail", "error"), variants=("base",)),
    # Older torch summed the 0-d bias gradient back to [1] silently, so only gradlab's contract
    # check (which calls backward directly) saw it; torch 2.13's autograd raises "invalid
    # gradient at index 2" itself.  Either way the row must say wrong_shape and name input 2.
    Bug("squeezed_bias_grad", Conv2dSqueeze, Conv2d, lambda dtype=F64: conv_args(1, dtype),
        conv2d_reference, H("wrong_shape"), statuses=H("fail", "error"), variants=("base",),
        input=2),
    Bug("kernel_not_flipped", BlurNoFlip, BlurFlip,
        lambda dtype=F64: [rand(1, 2, 4, 4, dtype=dtype), ASYMMETRIC], blur_ref,
        # no single cause to name: any gradient failure will do; it must say which input
        H("", "transposed", "constant_factor", "no_chain_rule"), check="gradient",
        variants=("base",), input=0, located=True),
    Bug("forward_bias_axis", AddBiasWrongAxis, AddBias,
        lambda dtype=F64: [rand(4, 4, seed=1, dtype=dtype), rand(4, seed=2, dtype=dtype)],
        add_bias_ref, H("forward"), check="forward", variants=("base",), located=True),
    Bug("forward_slope_typo", LeakyReluTypo, LeakyRelu,
        lambda dtype=F64: [rand(3, 4, dtype=dtype, min_abs=0.1)], leaky_ref, H("forward"),
        check="forward", variants=("base",), located=True),
    Bug("missing_gradient", MulMissingGrad, Mul, two, mul_ref, H("missing", "zero"),
        variants=("base",), input=1, located=True),
    Bug("grad_for_non_tensor", MulConstantGradForFloat, MulConstant,
        lambda dtype=F64: [rand(3, 4, dtype=dtype), 2.5], mulconstant_ref,
        H("non_tensor_grad"), statuses=H("fail", "error"), variants=("base",), input=1),
    Bug("forward_inplace_input", SoftmaxShiftInplace, Softmax, one, softmax_ref,
        H("inplace_input"), check="contract", variants=("base",), input=0),
    Bug("backward_inplace_saved", SquareInplaceSaved, Square, one, square_ref,
        H("inplace_saved"), statuses=H("fail", "error"), variants=("base",), input=0),
]


def _matches(bug: Bug, r: CheckRow) -> bool:
    return (r.status in bug.statuses and r.hint in bug.hints
            and (bug.check is None or r.check == bug.check)
            and (not bug.variants or r.variant.startswith(bug.variants)))


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_broken_function_is_caught(bug: Bug) -> None:
    r = gradlab.check(bug.broken, bug.args(), reference=bug.ref, **bug.options)
    assert not r.passed, table(r.rows)
    rows = [x for x in r.failures if _matches(bug, x)]
    assert rows, f"no failing row with hint {sorted(bug.hints)}: {table(r.failures)}"
    if bug.input is not None:
        rows = [x for x in rows if names_input(message(x), bug.input)]
        assert rows, f"no such row names input {bug.input}: {table(r.failures)}"
    if bug.located:
        rows = [x for x in rows if location(x)]
        assert rows, f"no such row has a location: {table(r.failures)}"
    dirty = [x for x in r.failures if x.variant == "base" and x.check in bug.base_clean]
    assert not dirty, f"the base case should pass: {table(dirty)}"


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_correct_twin_passes(bug: Bug) -> None:
    r = gradlab.check(bug.correct, bug.args(), reference=bug.ref, **bug.options)
    assert_passes(r)


# --------------------------------------------------------------------------------------------
# classes that need more than one call


def test_squeezed_bias_grad_caught_by_size1_variant() -> None:
    """out_channels=4 hides the .squeeze(0); shrinking weight dim 0 and bias dim 0 to 1 together
    (one size1 group) shows it."""
    size1 = [[(1, 0), (2, 0)]]
    args = conv_args(4, in_channels=1)
    r = gradlab.check(Conv2dSqueeze, args, reference=conv2d_reference, size1=size1)
    assert not r.passed
    rows = [x for x in r.failures if x.variant.startswith("size1[")
            and x.hint in ("wrong_shape", "size1_only")]
    assert rows, table(r.failures)
    assert any(names_input(message(x), 2) for x in rows), table(rows)
    # only the size-1 variant shows it, and the default edges' one-element input
    assert all(x.variant.startswith("size1[") or (x.check, x.variant) == ("edges", "one")
               for x in r.failures), table(r.failures)
    assert_passes(gradlab.check(Conv2d, args, reference=conv2d_reference, size1=size1))
    # without the size-1 group, the edges' one-element input finds it by default
    plain = gradlab.check(Conv2dSqueeze, args, reference=conv2d_reference)
    assert [(x.check, x.variant) for x in plain.failures] == [("edges", "one")], table(
        plain.failures)


def test_symmetric_kernel_hides_the_missing_flip() -> None:
    """The documented blind spot: flip(k) == k, so the unflipped backward is right."""
    x = rand(1, 2, 4, 4)
    assert_passes(gradlab.check(BlurNoFlip, [x, BINOMIAL], reference=blur_ref))
    assert_passes(gradlab.check(BlurFlip, [x, BINOMIAL], reference=blur_ref))


def test_second_order_bug_is_also_caught_without_a_claim() -> None:
    """Default second_order=None runs gradgradcheck when double backward does not raise."""
    r = gradlab.check(SquareCtxStash, one(), reference=square_ref)
    rows = [x for x in r.failures if x.check == "second_order"]
    assert rows and rows[0].hint == "second_order_only", table(r.rows)


# --------------------------------------------------------------------------------------------
# no false alarms in float32

FLOAT32 = [b for b in BUGS if b.id in {
    "missing_chain_rule", "constant_factor", "sign_flipped", "swapped_gradients",
    "transposed_weight_grad", "raw_memory_input", "raw_memory_grad_output", "squeezed_bias_grad",
    "kernel_not_flipped", "forward_bias_axis", "forward_slope_typo", "grad_for_non_tensor",
    "forward_inplace_input", "needs_input_grad_swapped"}]


@pytest.mark.parametrize("bug", FLOAT32, ids=[b.id for b in FLOAT32])
def test_correct_twin_float32_no_false_alarm(bug: Bug) -> None:
    args = bug.args(torch.float32)
    assert all(a.dtype == torch.float32 for a in args if isinstance(a, Tensor))
    r = gradlab.check(bug.correct, args, reference=bug.ref, **bug.options)
    assert {x.dtype for x in r.rows if x.check in ("forward", "gradient")} == {"float32"}
    assert_passes(r)

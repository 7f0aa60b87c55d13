"""`relu`: clones grad_output and masks the clone, never writing into grad_output itself."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gradlab.model import Case, OpDef, TensorArg


class ReLUFunction(torch.autograd.Function):
    """y = max(x, 0).  Declared first-order only, as hand-written kernels usually are."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        # grad_out may be shared with other nodes (or be a stride-0 expanded tensor): mask a copy.
        grad_x = grad_out.clone()
        grad_x[x < 0] = 0
        return grad_x


def relu(x: Tensor) -> Tensor:
    """The custom Function as a plain callable."""
    out: Tensor = ReLUFunction.apply(x)
    return out


OP = OpDef(
    name="relu",
    summary="ReLU that clones grad_output (never writes into it)",
    function=relu,
    reference=torch.relu,
    # min_abs keeps values off the kink at 0, where finite differences are meaningless.
    cases=(
        Case("vector", (TensorArg((9,), min_abs=0.05),)),
        Case("4d", (TensorArg((2, 3, 4, 5), min_abs=0.05),)),
    ),
    second_order=False,
    bench_cases=(Case("4M", (TensorArg((2048, 2048)),)),),
)

"""`relu`: clones grad_output and masks the clone, never writing into grad_output itself."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gradlab.model import OpDef


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
    second_order=False,
)

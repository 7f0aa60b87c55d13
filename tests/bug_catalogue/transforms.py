"""Transforms and modes: torch.func.vmap and torch.autocast.

A kernel bound without a batching rule that runs on plain data under vmap (the graph is
cut: torch.func.grad through vmap gives zero); a backward kernel that needs every argument
in one dtype, fed a low-precision grad_output and float32 saved tensors under autocast.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand

LIMIT = 1 - 1e-6   # torchrl's safetanh clamps tanh away from +-1 by eps


class SafeTanh(Function):
    """tanh clamped to (-LIMIT, LIMIT) with a hand-written backward and a vmap rule."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.tanh(x).clamp(-LIMIT, LIMIT)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


def safetanh_extension(x: Tensor) -> Tensor:
    """BROKEN: a compiled extension op with no batching rule: under vmap the kernel runs on
    the unwrapped data and its result carries no gradient."""
    if torch._C._functorch.is_batchedtensor(x):
        return torch.tanh(x.detach()).clamp(-LIMIT, LIMIT)
    return SafeTanh.apply(x)


def safetanh_fixed(x: Tensor) -> Tensor:
    return SafeTanh.apply(x)


def safetanh_ref(x: Tensor) -> Tensor:
    return torch.tanh(x).clamp(-LIMIT, LIMIT)


def grad_through_vmap(fn: Any) -> str | None:
    """A demo: the gradient of a loss computed through vmap of the op."""
    x = rand(2, 3).detach()
    got = torch.func.grad(lambda r: torch.func.vmap(fn)(r).sum())(x)
    want = torch.func.grad(lambda r: torch.func.vmap(safetanh_ref)(r).sum())(x)
    if not torch.allclose(got, want, rtol=1e-7, atol=1e-7):
        err = (got - want).abs().max().item()
        return f"the gradient through vmap differs (max abs err {err:.3g})"
    return None


def strict_kernel(*ts: Tensor) -> None:
    """Stands in for a CUDA kernel dispatched on one scalar type for all its arguments."""
    kinds = {t.dtype for t in ts}
    if len(kinds) > 1:
        names = sorted(str(k).replace("torch.", "") for k in kinds)
        raise RuntimeError(f"expected scalar type {names[0]} but found {names[1]}")


class ScaledMatmul(Function):
    """(x @ w) * s; under autocast x @ w and the output are low precision. BROKEN: backward
    hands its kernel grad_output in that precision with the float32 saved tensors."""

    cast = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor, s: Tensor) -> Tensor:
        y = x @ w                       # low precision under autocast
        ctx.save_for_backward(x, w, s)
        return y * s.to(y.dtype)        # the kernel writes its output in y's dtype

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w, s = ctx.saved_tensors
        if cls.cast:
            g = g.to(s.dtype)
        strict_kernel(g, s)
        gy = g * s
        return gy @ w.t(), x.t() @ gy, (g * (x @ w)).sum().reshape(s.shape)


class ScaledMatmulFixed(ScaledMatmul):
    cast = True


def under_autocast(fn_cls: type[Function]) -> str | None:
    """A demo: forward and backward inside torch.autocast("cpu", bfloat16)."""
    f32 = torch.float32              # autocast on CPU casts float32, not float64
    x, w, s = rand(2, 2, dtype=f32), rand(2, 2, seed=1, dtype=f32), rand(1, seed=2, dtype=f32)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn_cls.apply(x, w, s)
        out.float().sum().backward()
    except RuntimeError as exc:
        return f"raised under autocast: {exc}"
    return None


ENTRIES = (
    Entry("pt102720-vmap-extension-no-grad", "pytorch/pytorch", "issue 102720",
          "https://github.com/pytorch/pytorch/issues/102720", "vmap",
          "vmap over the op (per-sample gradients): the extension op's result loses its graph",
          "x [1,1] under vmap and torch.func.grad", safetanh_extension, safetanh_fixed,
          lambda: [rand(3, 4)], safetanh_ref, demo=grad_through_vmap,
          note="torchrl's C++ safetanh modelled as a Python op that unwraps a BatchedTensor"),
    Entry("dwconv3d3-amp-backward-dtype", "gungui98/Pytorch-Depthwise-Conv3d", "issue 3",
          "https://github.com/gungui98/Pytorch-Depthwise-Conv3d/issues/3", "autocast_dtype",
          "torch.autocast (AMP): the backward kernel gets a half grad and float32 tensors",
          "x [1,1], w [1,1], s [1] under autocast", ScaledMatmul, ScaledMatmulFixed,
          lambda: [rand(3, 4), rand(4, 2, seed=1), rand(1, seed=2)],
          lambda x, w, s: (x @ w) * s, demo=under_autocast,
          note="the depthwise 3-D conv modelled as a scaled matmul; the CUDA kernel's "
               "single-dtype dispatch as strict_kernel"),
)

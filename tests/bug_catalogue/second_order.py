"""Second order: a backward whose own derivative is wrong while first order is right.

An intermediate kept on ctx (not an input or output) is a constant to double backward; a
hand-written double backward with a wrong factor; a derivative with respect to one input
computed from a detached copy of another.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand


class ExpSquaredCtx(Function):
    """exp(x)^2 with m = exp(x) kept on ctx; BROKEN in double backward: m is a constant."""

    on_ctx = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        m = x.exp()
        if cls.on_ctx:
            ctx.m = m
        else:
            ctx.save_for_backward(x)
        return m * m

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        m = ctx.m if cls.on_ctx else ctx.saved_tensors[0].exp()
        return 2 * m * m * g


class ExpSquaredFixed(ExpSquaredCtx):
    on_ctx = False


class SinOfSquareCtx(Function):
    """sin(x^2) with s = x^2 kept on ctx; BROKEN in double backward: cos(s) is a constant."""

    on_ctx = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        s = x * x
        ctx.save_for_backward(x)
        if cls.on_ctx:
            ctx.s = s
        return s.sin()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        s = ctx.s if cls.on_ctx else x * x
        return g * s.cos() * 2 * x


class SinOfSquareFixed(SinOfSquareCtx):
    on_ctx = False


class BCEGrad(Function):
    """The gradient of sum BCE w.r.t. x, as a Function whose backward is double backward.
    BROKEN: its second derivative divides by numel, as for reduction='mean'."""

    mean_factor = True

    @classmethod
    def forward(cls, ctx: Any, g: Tensor, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(g, x, t)
        return g * (x - t) / (x * (1 - x))

    @classmethod
    def backward(cls, ctx: Any, gg: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        g, x, t = ctx.saved_tensors
        d = x * (1 - x)
        dx = g * (d - (x - t) * (1 - 2 * x)) / (d * d)
        if cls.mean_factor:
            dx = dx / x.numel()
        return (gg * (x - t) / d).sum(), gg * dx, -gg * g / d


class BCEGradFixed(BCEGrad):
    mean_factor = False


class BCESum(Function):
    """Binary cross-entropy, reduction='sum', with a hand-written double backward."""

    grad_fn = BCEGrad

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(x, t)
        return -(t * x.log() + (1 - t) * (1 - x).log()).sum()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, t = ctx.saved_tensors
        gx = cls.grad_fn.apply(g, x, t)
        return gx, g * ((1 - x).log() - x.log())


class BCESumFixed(BCESum):
    grad_fn = BCEGradFixed


def bce_sum_ref(x: Tensor, t: Tensor) -> Tensor:
    return torch.nn.functional.binary_cross_entropy(x, t, reduction="sum")


class KLDiv(Function):
    """Pointwise kl_div(inp, tgt) summed: tgt (log tgt - inp); BROKEN: tgt's gradient uses a
    detached inp, so its derivative w.r.t. inp is lost in double backward."""

    detach = True

    @classmethod
    def forward(cls, ctx: Any, inp: Tensor, tgt: Tensor) -> Tensor:
        ctx.save_for_backward(inp, tgt)
        return (tgt * (tgt.log() - inp)).sum()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        inp, tgt = ctx.saved_tensors
        i = inp.detach() if cls.detach else inp
        return -g * tgt, g * (tgt.log() + 1 - i)


class KLDivFixed(KLDiv):
    detach = False


class MSEGrad(Function):
    """The gradient of sum (x - y)^2 w.r.t. x; its backward returns grad_output's gradient at
    x's shape instead of the scalar's (autograd sums it down, so the values hold)."""

    summed = False

    @classmethod
    def forward(cls, ctx: Any, g: Tensor, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(g, x, y)
        return 2 * g * (x - y)

    @classmethod
    def backward(cls, ctx: Any, gg: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        g, x, y = ctx.saved_tensors
        dg = 2 * gg * (x - y)
        return (dg.sum() if cls.summed else dg), 2 * g * gg, -2 * g * gg


class MSEGradFixed(MSEGrad):
    summed = True


class MSESum(Function):
    """sum (x - y)^2 with a hand-written double backward (MSEGrad)."""

    grad_fn = MSEGrad

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return ((x - y) ** 2).sum()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, y = ctx.saved_tensors
        gx = cls.grad_fn.apply(g, x, y)
        return gx, -gx


class MSESumFixed(MSESum):
    grad_fn = MSEGradFixed


def raw_grad_output_shape(fn: type[MSESum]) -> str | None:
    """The shape double backward returns for grad_output (a scalar's): the values are
    right either way, since autograd sums a larger gradient down to the scalar."""
    x, y = rand(2), rand(2, seed=1)
    (gx,) = torch.autograd.grad(fn.apply(x, y), x, create_graph=True)
    raw = gx.grad_fn.apply(torch.ones_like(gx))  # the hand-written double backward, unsummed
    if raw[0].shape != torch.Size([]):
        return f"grad_output's gradient has shape {list(raw[0].shape)}, grad_output's is []"
    return None


PT = "https://github.com/pytorch/pytorch"
SO = "second order (double backward, e.g. a gradient penalty)"
ENTRIES = (
    Entry("pt76185-ctx-intermediate", "pytorch/pytorch", "issue 76185", f"{PT}/issues/76185",
          "ctx_intermediate", f"{SO}: an intermediate kept on ctx is a constant there",
          "x [1]", ExpSquaredCtx, ExpSquaredFixed, lambda: [rand(5)],
          lambda x: (2 * x).exp(),
          smallest_inputs=lambda: [rand(1)], order=2),
    Entry("pt58509-ctx-intermediate", "pytorch/pytorch", "issue 58509", f"{PT}/issues/58509",
          "ctx_intermediate", f"{SO}: an intermediate kept on ctx is a constant there",
          "x [1]", SinOfSquareCtx, SinOfSquareFixed, lambda: [rand(5)],
          lambda x: (x * x).sin(),
          smallest_inputs=lambda: [rand(1)], order=2),
    Entry("pt59477-bce-sum-double-backward", "pytorch/pytorch", "issue 59477",
          f"{PT}/issues/59477", "second_order_formula",
          f"{SO} of binary_cross_entropy with reduction='sum'",
          "x [2] in (0, 1), t [2]", BCESum, BCESumFixed,
          lambda: [rand(2, 3, low=0.1, high=0.9), rand(2, 3, seed=1, low=0.0, high=1.0)],
          bce_sum_ref,
          smallest_inputs=lambda: [rand(2, low=0.1, high=0.9), rand(2, seed=1, low=0.0, high=1.0)],
          order=2),
    Entry("pt65466-kldiv-target-grad", "pytorch/pytorch", "issue 65466", f"{PT}/issues/65466",
          "second_order_formula", f"{SO} with the target requiring grad",
          "inp [1], tgt [1] > 0, both requiring grad", KLDiv, KLDivFixed,
          lambda: [rand(4), rand(4, seed=1, low=0.1, high=1.0)],
          lambda inp, tgt: (tgt * (tgt.log() - inp)).sum(),
          smallest_inputs=lambda: [rand(1), rand(1, seed=1, low=0.1, high=1.0)], order=2),
    Entry("pt78355-double-backward-shape", "pytorch/pytorch", "issue 78355",
          f"{PT}/issues/78355", "summed_shape",
          f"{SO}: grad_output's gradient returned at the input's shape, not the scalar's",
          "x [2], y [2]", MSESum, MSESumFixed, lambda: [rand(3, 2), rand(3, 2, seed=1)],
          lambda x, y: ((x - y) ** 2).sum(),
          demo=raw_grad_output_shape),
)

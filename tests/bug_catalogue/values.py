"""Value regions: a gradient wrong only at some input values.

Exact zeros (a division, a log, a removable singularity), saturation at large magnitudes,
negative inputs, and half precision (a count that overflows float16, an output that loses
its graph in float16 only).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand, vals

H = 0.35   # kornia's distance_transform step
GAMMA = 0.5  # the focal loss exponent of kornia's report (0 < gamma < 1)
EPS = 1e-8


class NegLog(Function):
    """-h log(x), 0 where x == 0 (nan_to_num); BROKEN: backward -h g / x is inf/NaN there."""

    masked = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.nan_to_num(-H * x.log(), nan=0.0, posinf=0.0, neginf=0.0)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        gx = -H * g / x
        return torch.where(x > 0, gx, torch.zeros_like(gx)) if cls.masked else gx


class NegLogFixed(NegLog):
    masked = True


def neglog_ref(x: Tensor) -> Tensor:
    pos = x > 0
    return torch.where(pos, -H * torch.where(pos, x, torch.ones_like(x)).log(),
                       torch.zeros_like(x))


class BinaryFocal(Function):
    """Binary focal loss with logits, summed; BROKEN: backward's (1 - p)^(gamma - 1) is inf
    where the sigmoid saturates to exactly 1 (0 * inf = NaN)."""

    stable = False

    @staticmethod
    def loss(x: Tensor, t: Tensor) -> Tensor:
        lp, lq = F.logsigmoid(x), F.logsigmoid(-x)   # log p, log(1 - p)
        return (-t * (GAMMA * lq).exp() * lp - (1 - t) * (GAMMA * lp).exp() * lq).sum()

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(x, t)
        return cls.loss(x, t)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        x, t = ctx.saved_tensors
        if cls.stable:   # in log-sigmoids only: finite everywhere, differentiable again
            lp, lq = F.logsigmoid(x), F.logsigmoid(-x)
            p, q = lp.exp(), lq.exp()
            gx = (t * (GAMMA * lq).exp() * (GAMMA * p * lp - q)
                  - (1 - t) * (GAMMA * lp).exp() * (GAMMA * q * lq - p))
            return g * gx, None
        p = torch.sigmoid(x)
        q = 1 - p
        dp = p * q  # d p / d x
        pos = -(GAMMA * q ** (GAMMA - 1) * -dp * p.log() + q ** GAMMA * dp / p)
        neg = -(GAMMA * p ** (GAMMA - 1) * dp * q.log() + p ** GAMMA * -dp / q)
        return g * (t * pos + (1 - t) * neg), None


class BinaryFocalFixed(BinaryFocal):
    stable = True


def safe_inverse(z: Tensor) -> Tensor:
    """BROKEN (plain autograd): torch.where(|z| > eps, 1 / z, 1) has a NaN gradient at 0."""
    return torch.where(z.abs() > EPS, 1 / z, torch.ones_like(z))


def safe_inverse_fixed(z: Tensor) -> Tensor:
    far = z.abs() > EPS
    return torch.where(far, 1 / torch.where(far, z, torch.ones_like(z)), torch.ones_like(z))


class SincNorm(Function):
    """sin(|w|) / |w| per row (SE(3)/SO(3) log and exp); BROKEN: NaN at w = 0."""

    series = False

    @staticmethod
    def value(w: Tensor) -> Tensor:
        r = w.norm(dim=-1)
        small = r < 1e-4
        rs = torch.where(small, torch.ones_like(r), r)
        return torch.where(small, 1 - r * r / 6, rs.sin() / rs)

    @classmethod
    def forward(cls, ctx: Any, w: Tensor) -> Tensor:
        ctx.save_for_backward(w)
        return cls.value(w)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (w,) = ctx.saved_tensors
        r = w.norm(dim=-1, keepdim=True)
        if cls.series:
            small = r < 1e-4
            rs = torch.where(small, torch.ones_like(r), r)
            d = torch.where(small, -torch.ones_like(r) / 3,
                            (rs.cos() / rs - rs.sin() / rs ** 2) / rs)
        else:
            d = (r.cos() / r - r.sin() / r ** 2) / r    # d/dr (sin r / r) / r
        return g[..., None] * d * w


class SincNormFixed(SincNorm):
    series = True


class RsqrtBackward(Function):
    """rsqrt; BROKEN: backward writes +inf at x == 0 whatever grad_output's sign."""

    overwrite = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.rsqrt()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        gx = -0.5 * g * x.rsqrt() ** 3
        if cls.overwrite:
            gx = torch.where(x == 0, torch.full_like(gx, float("inf")), gx)
        return gx


class RsqrtFixed(RsqrtBackward):
    overwrite = False


class AmaxCount(Function):
    """x.amax() with the gradient split among tied maxima; BROKEN: the tie count is summed
    in the gradient's dtype (float16 rounds 65520 ties to inf: the gradient is 0)."""

    count_fp32 = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        out = x.amax()
        ctx.save_for_backward(x, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        x, out = ctx.saved_tensors
        mask = x == out
        if cls.count_fp32 and g.dtype in (torch.float16, torch.bfloat16):
            return mask.to(g.dtype) * (g.float() / mask.float().sum()).to(g.dtype)
        return mask.to(g.dtype) * g / mask.to(g.dtype).sum()


class AmaxCountFixed(AmaxCount):
    count_fp32 = True


def kernel_half_detached(x: Tensor, s: Tensor) -> Tensor:
    """exp(-|x_i - x_j| / s) @ 1 (a KeOps reduction); BROKEN: in float16 the inputs are
    converted through .detach(), so the result does not require grad."""
    if x.dtype == torch.float16:
        x, s = x.detach(), s.detach()
    return (-(x[:, None] - x[None]).abs().sum(-1) / s).exp().sum(1)


def kernel_fixed(x: Tensor, s: Tensor) -> Tensor:
    return (-(x[:, None] - x[None]).abs().sum(-1) / s).exp().sum(1)


class Elu(Function):
    """elu(x, alpha); BROKEN: for x < 0 backward uses the output, not output + alpha."""

    plus_alpha = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, alpha: float) -> Tensor:
        y = F.elu(x, alpha)
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        x, y = ctx.saved_tensors
        neg = y + ctx.alpha if cls.plus_alpha else y
        return g * torch.where(x > 0, torch.ones_like(y), neg), None


class EluFixed(Elu):
    plus_alpha = True


KO = "https://github.com/kornia/kornia/issues"
ENTRIES = (
    Entry("kornia4183-log-zero-nan", "kornia/kornia", "issue 4183", f"{KO}/4183",
          "special_value", "an exact zero (a sparse binary mask): the gradient is inf/NaN",
          "x [1] = [0]", NegLog, NegLogFixed, lambda: [rand(3, 4, low=0.1, high=1.0)],
          neglog_ref,
          smallest_inputs=lambda: [vals(0.0)],
          note='the distance transform reduced to its -h log(x) step after the '
               'convolution'),
    Entry("kornia918-focal-saturated-nan", "kornia/kornia", "issue 918", f"{KO}/918",
          "magnitude", "logits large enough that the sigmoid rounds to 1 (|x| ~ 40 and up)",
          "x [1] = [100], t [1]", BinaryFocal, BinaryFocalFixed,
          lambda: [rand(2, 4), rand(2, 4, seed=1, low=0.0, high=1.0, grad=False)],
          BinaryFocal.loss,
          smallest_inputs=lambda: [vals(100.0), vals(1.0, grad=False)]),
    Entry("kornia367-where-division-nan", "kornia/kornia", "issue 367", f"{KO}/367",
          "special_value", "an exact zero: torch.where's untaken 1/z branch has a NaN gradient",
          "z [1] = [0]", safe_inverse, safe_inverse_fixed, lambda: [rand(5)],
          safe_inverse_fixed,
          smallest_inputs=lambda: [vals(0.0)]),
    Entry("kornia3275-se3-log-zero", "kornia/kornia", "issue 3275", f"{KO}/3275",
          "special_value", "a zero rotation vector (the identity): sin(r)/r's gradient is NaN",
          "w [1,3] = 0", SincNorm, SincNormFixed, lambda: [rand(4, 3)], SincNorm.value,
          smallest_inputs=lambda: [vals(0.0, 0.0, 0.0)[None]],
          note='the SE(3) log reduced to sin(|w|)/|w|'),
    Entry("ttmetal53973-rsqrt-bw-zero", "tenstorrent/tt-metal", "issue 53973",
          "https://github.com/tenstorrent/tt-metal/issues/53973", "special_value",
          "an exact zero input with a positive grad: +inf written where -inf belongs",
          "x [1] = [0], grad_output 1", RsqrtBackward, RsqrtFixed,
          lambda: [rand(3, 4, low=0.5, high=2.0)], torch.rsqrt,
          smallest_inputs=lambda: [vals(0.0)]),
    Entry("tinygrad12296-half-tie-count", "tinygrad/tinygrad", "PR 15363",
          "https://github.com/tinygrad/tinygrad/pull/15363", "low_precision",
          "float16 with 65520 or more tied maxima: the count rounds to inf, the gradient to 0",
          "x [65520] float16, all equal", AmaxCount, AmaxCountFixed, lambda: [rand(3, 4)],
          lambda x: x.float().amax().to(x.dtype),
          smallest_inputs=lambda: [torch.ones(65520, dtype=torch.float16, requires_grad=True)]),
    Entry("keops214-half-no-grad", "getkeops/keops", "issue 214",
          "https://github.com/getkeops/keops/issues/214", "low_precision",
          "float16 inputs: the output does not require grad (the graph is cut)",
          "x [1,1] float16, s [1,1] float16", kernel_half_detached, kernel_fixed,
          lambda: [rand(4, 2), rand(1, 1, seed=1, low=0.5, high=1.5)], kernel_fixed,
          smallest_inputs=lambda: [rand(1, 1, dtype=torch.float16),
                                   rand(1, 1, seed=1, low=0.5, high=1.5, dtype=torch.float16)],
          note="KeOps' half-precision conversion modelled as a .detach() in the "
               'float16 path'),
    Entry("mxnet1265-elu-negative", "apache/mxnet", "PR 1265",
          "https://github.com/apache/mxnet/pull/1265", "sign_region",
          "negative inputs: backward uses the output where output + alpha belongs",
          "x [1] = [-1], alpha 1.0", Elu, EluFixed, lambda: [rand(3, 4), 1.0],
          lambda x, alpha: F.elu(x, alpha),
          smallest_inputs=lambda: [vals(-1.0), 1.0]),
)

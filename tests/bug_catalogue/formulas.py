"""Wrong formulas and broken backward contracts, wrong on ordinary inputs.

Swapped or missing terms, a dropped chain rule, a constant factor, a missing transpose, a
batch handled as one matrix, a gradient never computed, the wrong number of gradients, a
backward that does not take every output's gradient, a needs_input_grad branch that
crashes when an input does not require grad.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, needs, rand, vals, vjp

GP_GROUPS = 2  # graph-parallel groups in fairchem's report: the gradient was 1/groups


class SwiGLU(Function):
    """silu(e) * g; BROKEN: the two gradients are stored into each other's slot."""

    swapped = True

    @classmethod
    def forward(cls, ctx: Any, e: Tensor, g: Tensor) -> Tensor:
        ctx.save_for_backward(e, g)
        return F.silu(e) * g

    @classmethod
    def backward(cls, ctx: Any, dy: Tensor) -> tuple[Tensor, Tensor]:
        e, g = ctx.saved_tensors
        s = torch.sigmoid(e)
        de = dy * g * s * (1 + e * (1 - s))
        dg = dy * e * s
        return (dg, de) if cls.swapped else (de, dg)


class SwiGLUFixed(SwiGLU):
    swapped = False


class AddOnes(Function):
    """x1 + x2; BROKEN: backward fills the gradient with ones instead of grad_output."""

    chain = False

    @classmethod
    def forward(cls, ctx: Any, x1: Tensor, x2: Tensor) -> Tensor:
        return x1 + x2

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        gi = g if cls.chain else torch.ones_like(g)
        return gi, gi


class AddOnesFixed(AddOnes):
    chain = True


class GatherGroups(Function):
    """An all-gather across graph-parallel groups (identity on one process); BROKEN:
    backward divides the gradient by the number of groups."""

    divide = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        return g / GP_GROUPS if cls.divide else g


class GatherGroupsFixed(GatherGroups):
    divide = False


class MulConstant(Function):
    """x * n; BROKEN: forward forgets the factor while backward applies it."""

    scale_forward = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, n: float) -> Tensor:
        ctx.n = n
        return x * n if cls.scale_forward else x.clone()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * ctx.n, None


class MulConstantFixed(MulConstant):
    scale_forward = True


class MatmulNoTranspose(Function):
    """a @ b; BROKEN: dA = dY @ B and dB = A @ dY, the transposes missing."""

    transpose = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a @ b

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        if cls.transpose:
            return g @ b.t(), a.t() @ g
        return g @ b, a @ g


class MatmulFixed(MatmulNoTranspose):
    transpose = True


class BatchedMatmul(Function):
    """a @ b over a batch; BROKEN: backward uses the single-matrix adjoint with the first
    batch's matrices for every batch element."""

    batched = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a @ b

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        if cls.batched:
            return g @ b.transpose(-1, -2), a.transpose(-1, -2) @ g
        return g @ b[0].t(), a[0].t() @ g


class BatchedMatmulFixed(BatchedMatmul):
    batched = True


class ProdAll(Function):
    """x.prod(); BROKEN: backward returns prod / x without multiplying by grad_output."""

    chain = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.prod()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        others = torch.stack([torch.cat([x[:i], x[i + 1:]]).prod() for i in range(x.numel())]
                             ) if x.numel() else torch.zeros_like(x)
        return others * g if cls.chain else others


class ProdAllFixed(ProdAll):
    chain = True


class SoftTargetCE(Function):
    """Cross-entropy with soft targets p, mean over rows: sum(-p x) + lse(x) sum(p);
    BROKEN: backward (softmax(x) - p) drops the sum(p) factor (right only for p that sums
    to 1, wrong for unnormalized targets)."""

    with_sum = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, p: Tensor) -> Tensor:
        ctx.save_for_backward(x, p)
        lse = torch.logsumexp(x, -1)
        return ((-(p * x).sum(-1) + lse * p.sum(-1)) / x.shape[0]).sum()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, p = ctx.saved_tensors
        sp = p.sum(-1, keepdim=True) if cls.with_sum else 1.0
        gx = (sp * torch.softmax(x, -1) - p) / x.shape[0]
        gp = (torch.logsumexp(x, -1, keepdim=True) - x) / x.shape[0]
        return g * gx, g * gp


class SoftTargetCEFixed(SoftTargetCE):
    with_sum = True


def soft_ce_ref(x: Tensor, p: Tensor) -> Tensor:
    lse = torch.logsumexp(x, -1)
    return ((-(p * x).sum(-1) + lse * p.sum(-1)) / x.shape[0]).sum()


class TernaryScales(Function):
    """Trained ternary quantization: wp * [w > d] - wn * [w < -d]; BROKEN: the negative
    scale's gradient has the wrong sign."""

    sign = 1.0
    threshold = 0.3

    @classmethod
    def forward(cls, ctx: Any, w: Tensor, wp: Tensor, wn: Tensor) -> Tensor:
        pos, neg = (w > cls.threshold).to(w.dtype), (w < -cls.threshold).to(w.dtype)
        ctx.save_for_backward(pos, neg)
        ctx.scale_shape = wp.shape
        return wp * pos - wn * neg

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[None, Tensor, Tensor]:
        pos, neg = ctx.saved_tensors
        # at the scale's own shape: gradlab also calls with the 0-d scales as [1] tensors
        shape = ctx.scale_shape
        return None, (g * pos).sum().reshape(shape), cls.sign * (g * neg).sum().reshape(shape)


class TernaryScalesFixed(TernaryScales):
    sign = -1.0


def ternary_ref(w: Tensor, wp: Tensor, wn: Tensor) -> Tensor:
    t = TernaryScales.threshold
    return wp * (w > t).to(w.dtype) - wn * (w < -t).to(w.dtype)


class MatMulNoGradB(Function):
    """a @ b + bias; BROKEN: backward never computes b's gradient (returns None)."""

    grad_b = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor, bias: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a @ b + bias

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor | None, Tensor]:
        a, b = ctx.saved_tensors
        gb = a.t() @ g if cls.grad_b else None
        return g @ b.t(), gb, g.sum(0)


class MatMulGradB(MatMulNoGradB):
    grad_b = True


class MonotonicAlignment(Function):
    """alpha_i = p_i prod_{j<i} (1 - p_j) (hard monotonic attention's expected alignment);
    BROKEN: the compiled binding has no backward: p_choose's gradient is zeros."""

    computed = False

    @staticmethod
    def alpha(p: Tensor) -> Tensor:
        keep = torch.cumprod(1 - p, -1)
        return p * torch.cat([torch.ones_like(keep[..., :1]), keep[..., :-1]], -1)

    @classmethod
    def forward(cls, ctx: Any, p: Tensor) -> Tensor:
        ctx.save_for_backward(p)
        return cls.alpha(p)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        if not cls.computed:
            return torch.zeros_like(p)
        return vjp(cls.alpha, [p], g)[0]


class MonotonicAlignmentFixed(MonotonicAlignment):
    computed = True


class ScaleByInput(Function):
    """x * w; BROKEN: multiplies grad_input in place even when it is None."""

    guarded = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, w = ctx.saved_tensors
        gx = g.clone() if needs(ctx, 0) else None
        gw = g * x if needs(ctx, 1) else None
        if gx is not None or not cls.guarded:
            gx *= w
        return gx, gw


class ScaleByInputFixed(ScaleByInput):
    guarded = True


class ChamferTwoOutputs(Function):
    """Nearest-neighbour squared distances both ways; BROKEN: backward takes one gradient
    for two outputs (TypeError when autograd calls it)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        d = ((a[:, None] - b[None]) ** 2).sum(-1)
        ctx.save_for_backward(a, b, d.argmin(1), d.argmin(0))
        return d.min(1).values, d.min(0).values

    @staticmethod
    def backward(ctx: Any, g1: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        a, b, i1, _ = ctx.saved_tensors
        d1 = 2 * (a - b[i1]) * g1[:, None]
        return d1, torch.zeros_like(b).index_add(0, i1, -d1)


class ChamferFixed(ChamferTwoOutputs):
    @staticmethod
    def backward(ctx: Any, g1: Tensor, g2: Tensor) -> tuple[Tensor, Tensor]:
        a, b, i1, i2 = ctx.saved_tensors
        d1 = 2 * (a - b[i1]) * g1[:, None]
        d2 = 2 * (b - a[i2]) * g2[:, None]
        ga = d1 + torch.zeros_like(a).index_add(0, i2, -d2)
        gb = d2 + torch.zeros_like(b).index_add(0, i1, -d1)
        return ga, gb


def chamfer_ref(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    d = ((a[:, None] - b[None]) ** 2).sum(-1)
    return d.min(1).values, d.min(0).values


class LayerNormCount(Function):
    """Layer norm over the last dim with (x, gamma, beta, eps, memory_efficient); BROKEN:
    backward returns four gradients for five inputs."""

    complete = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, gamma: Tensor, beta: Tensor, eps: float,
                memory_efficient: bool) -> Tensor:
        ctx.save_for_backward(x, gamma, beta)
        ctx.eps = eps
        return F.layer_norm(x, gamma.shape, gamma, beta, eps)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        x, gamma, beta = ctx.saved_tensors
        grads = vjp(lambda a, w, b: F.layer_norm(a, w.shape, w, b, ctx.eps), [x, gamma, beta], g)
        return (*grads, None, None) if cls.complete else (*grads, None)


class LayerNormCountFixed(LayerNormCount):
    complete = True


PT = "https://github.com/pytorch/pytorch"
ENTRIES = (
    Entry("unsloth3314-swiglu-swapped", "unslothai/unsloth", "issue 3314",
          "https://github.com/unslothai/unsloth/issues/3314", "swapped_gradients",
          "any input: the two gradients are stored into each other's slot", "e [1], g [1]",
          SwiGLU, SwiGLUFixed, lambda: [rand(3, 4), rand(3, 4, seed=1)],
          lambda e, g: F.silu(e) * g,
          smallest_inputs=lambda: [rand(1), rand(1, seed=1)]),
    Entry("tutorials216-ones-grad", "pytorch/tutorials", "issue 216",
          "https://github.com/pytorch/tutorials/issues/216", "no_chain_rule",
          "any grad_output other than ones", "x1 [1], x2 [1]; grad_output 2",
          AddOnes, AddOnesFixed, lambda: [rand(3, 4), rand(3, 4, seed=1)],
          lambda x1, x2: x1 + x2,
          smallest_inputs=lambda: [rand(1), rand(1, seed=1)]),
    Entry("fairchem1067-gp-grad-factor", "facebookresearch/fairchem", "PR 1067",
          "https://github.com/facebookresearch/fairchem/pull/1067", "constant_factor",
          "any input: the gradient is 1/groups of the right one", "x [1]",
          GatherGroups, GatherGroupsFixed, lambda: [rand(3, 4)], lambda x: x.clone(),
          smallest_inputs=lambda: [rand(1)]),
    Entry("pt132601-doc-forward-factor", "pytorch/pytorch", "PR 132601", f"{PT}/pull/132601",
          "forward_backward_mismatch", "any input: forward omits the factor backward applies",
          "x [1], n 2.0", MulConstant, MulConstantFixed, lambda: [rand(3, 4), 2.5],
          lambda x, n: x * n,
          smallest_inputs=lambda: [rand(1), 2.0]),
    Entry("tileops54-matmul-no-transpose", "tile-ai/TileOPs", "PR 54",
          "https://github.com/tile-ai/TileOPs/pull/54", "transposed",
          "any input (non-square ones raise, square ones are silently wrong)",
          "a [2,2], b [2,2]", MatmulNoTranspose, MatmulFixed,
          lambda: [rand(3, 4), rand(4, 5, seed=1)], lambda a, b: a @ b,
          smallest_inputs=lambda: [rand(2, 2), rand(2, 2, seed=1)]),
    Entry("warp147-batched-matmul-adjoint", "NVIDIA/warp", "issue 147",
          "https://github.com/NVIDIA/warp/issues/147", "batch_handling",
          "a batch of more than one matrix: backward uses the single-matrix adjoint",
          "a [2,1,1], b [2,1,1]", BatchedMatmul, BatchedMatmulFixed,
          lambda: [rand(2, 3, 4), rand(2, 4, 2, seed=1)], lambda a, b: a @ b,
          smallest_inputs=lambda: [rand(2, 1, 1), rand(2, 1, 1, seed=1)],
          note="the single-matrix adjoint modelled as using the first batch element's "
               'matrices'),
    Entry("pt995-prod-no-chain", "pytorch/pytorch", "issue 995", f"{PT}/issues/995",
          "no_chain_rule", "-x.prod(): a grad_output other than 1", "x [1]; grad_output -1",
          ProdAll, ProdAllFixed, lambda: [rand(4)], lambda x: x.prod(),
          smallest_inputs=lambda: [rand(1)]),
    Entry("nemo2428-soft-ce-sum-p", "NVIDIA-NeMo/Automodel", "PR 2428",
          "https://github.com/NVIDIA-NeMo/Automodel/pull/2428", "value_precondition",
          "soft targets that do not sum to 1 (label smoothing without renormalising)",
          "x [1,2], p [1,2] summing to 2",
          SoftTargetCE, SoftTargetCEFixed,
          lambda: [rand(2, 5), torch.softmax(rand(2, 5, seed=1, grad=False), -1)],
          soft_ce_ref,
          smallest_inputs=lambda: [rand(1, 2), vals(1.0, 1.0, grad=False)[None]]),
    Entry("ttq6-negative-scale-sign", "TropComplique/trained-ternary-quantization",
          "issue 6", "https://github.com/TropComplique/trained-ternary-quantization/issues/6",
          "sign", "any kernel with negative weights: the negative scale's gradient flips sign",
          "w [1] = [-1], wn []", TernaryScales, TernaryScalesFixed,
          lambda: [rand(4, 4, grad=False), rand(seed=1, low=0.5, high=1.5),
                   rand(seed=2, low=0.5, high=1.5)], ternary_ref,
          smallest_inputs=lambda: [vals(-1.0, grad=False), rand(seed=1, low=0.5, high=1.5),
                                   rand(seed=2, low=0.5, high=1.5)]),
    Entry("bnb643-matmul4bit-no-grad-b", "bitsandbytes-foundation/bitsandbytes", "issue 643",
          "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/643",
          "missing_gradient", "the weight B requiring grad: backward returns None for it",
          "a [1,1], b [1,1], bias [1]", MatMulNoGradB, MatMulGradB,
          lambda: [rand(3, 4), rand(4, 2, seed=1), rand(2, seed=2)],
          lambda a, b, bias: a @ b + bias,
          smallest_inputs=lambda: [rand(1, 1), rand(1, 1, seed=1), rand(1, seed=2)]),
    Entry("fairseq4270-alignment-no-backward", "facebookresearch/fairseq", "issue 4270",
          "https://github.com/facebookresearch/fairseq/issues/4270", "missing_gradient",
          "p_choose requiring grad: the binding returns no gradient (zeros)", "p [1]",
          MonotonicAlignment, MonotonicAlignmentFixed,
          lambda: [rand(2, 5, low=0.1, high=0.9)], MonotonicAlignment.alpha,
          smallest_inputs=lambda: [rand(1, low=0.1, high=0.9)]),
    Entry("excitationbp3-none-grad-mul", "greydanus/excitationbp", "PR 3",
          "https://github.com/greydanus/excitationbp/pull/3", "needs_input_grad",
          "an input that does not require grad: backward multiplies its None gradient",
          "x [1] without grad, w [1]", ScaleByInput, ScaleByInputFixed,
          lambda: [rand(3, 4), rand(3, 4, seed=1)], lambda x, w: x * w,
          smallest_inputs=lambda: [rand(1, grad=False), rand(1, seed=1)]),
    Entry("chamferdist1-backward-arity", "krrish94/chamferdist", "issue 1",
          "https://github.com/krrish94/chamferdist/issues/1", "backward_arity",
          "any backward: it takes one gradient for two outputs", "a [1,1], b [1,1]",
          ChamferTwoOutputs, ChamferFixed, lambda: [rand(4, 3), rand(5, 3, seed=1)],
          chamfer_ref,
          smallest_inputs=lambda: [rand(1, 1), rand(1, 1, seed=1)]),
    Entry("apex1715-gradient-count", "NVIDIA/apex", "PR 1715",
          "https://github.com/NVIDIA/apex/pull/1715", "wrong_count",
          "any backward: four gradients returned for five inputs", "x [1,1], gamma [1], beta [1]",
          LayerNormCount, LayerNormCountFixed,
          lambda: [rand(3, 4), rand(4, seed=1), rand(4, seed=2), 1e-5, False],
          lambda x, gamma, beta, eps, me: F.layer_norm(x, gamma.shape, gamma, beta, eps),
          smallest_inputs=lambda: [rand(1, 1), rand(1, seed=1), rand(1, seed=2), 1e-5, False]),
)

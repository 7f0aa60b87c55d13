"""In-place writes that autograd is not told about.

A forward that modifies its input without `ctx.mark_dirty`; a kernel that stores a
gradient into its input's memory (a raw-pointer write bumps no version counter: `.data`
here); a backward that writes into a saved tensor or into grad_output.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function

from .base import Entry, rand


class DoubleInPlace(Function):
    """x *= 2, returning x; BROKEN: no ctx.mark_dirty."""

    dirty = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        x.mul_(2.0)
        if cls.dirty:
            ctx.mark_dirty(x)
        return x

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        return g * 2.0


class DoubleInPlaceFixed(DoubleInPlace):
    dirty = True


class SliceAddInPlace(Function):
    """a[1:2] += b, returning a; BROKEN: no ctx.mark_dirty (b's gradient is lost when a
    is not a leaf)."""

    dirty = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        a[1:2] += b
        if cls.dirty:
            ctx.mark_dirty(a)
        return a

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        return g, g[1:2].clone()


class SliceAddInPlaceFixed(SliceAddInPlace):
    dirty = True


def slice_add_ref(a: Tensor, b: Tensor) -> Tensor:
    return torch.cat([a[:1], a[1:2] + b, a[2:]])


class CrossEntropyInPlace(Function):
    """Mean cross-entropy whose kernel stores d loss / d logits into the logits' memory
    during forward (saving memory); BROKEN: the caller's logits are overwritten, and with
    no version bump an upstream op that saved them computes a wrong gradient silently."""

    inplace = True

    @staticmethod
    def dlogits(x: Tensor, target: Tensor) -> Tensor:
        onehot = F.one_hot(target, x.shape[-1]).to(x.dtype)
        return (torch.softmax(x, -1) - onehot) / x.shape[0]

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, target: Tensor) -> Tensor:
        loss = F.cross_entropy(x, target)
        if cls.inplace:
            x.data.copy_(cls.dlogits(x, target))   # as a Triton tl.store into the input
        ctx.save_for_backward(x, target)
        return loss

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        x, target = ctx.saved_tensors
        return (x if cls.inplace else cls.dlogits(x, target)) * g, None


class CrossEntropyOutOfPlace(CrossEntropyInPlace):
    inplace = False


class SwiGLUInPlaceBackward(Function):
    """silu(a) * b; BROKEN: backward stores the gradients into a's and b's memory (the
    tensors it saved), so an op upstream that saved them reads gradients, not values."""

    inplace = True

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return F.silu(a) * b

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        s = torch.sigmoid(a)
        da = g * b * s * (1 + a * (1 - s))
        db = g * a * s
        if cls.inplace:
            a.data.copy_(da)
            b.data.copy_(db)
            return a.detach(), b.detach()
        return da, db


class SwiGLUOutOfPlace(SwiGLUInPlaceBackward):
    inplace = False


class TwiceGradInPlace(Function):
    """2 x; BROKEN: backward doubles grad_output in place and returns it."""

    inplace = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        return 2 * x

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        return g.mul_(2) if cls.inplace else g * 2


class TwiceGradFixed(TwiceGradInPlace):
    inplace = False


def reused_after_call(ref: Any, inputs: Any) -> Any:
    """A demo: the in-place Function's first input is a layer's output that the model
    reads again after the call (x ** 2). Without mark_dirty autograd keeps x's old history
    for those later reads: the gradient through them misses the Function's effect."""
    def demo(fn: type[Function]) -> str | None:
        leaves = [t.detach().clone().requires_grad_() for t in inputs()]
        x = leaves[0] * 1.0
        out = fn.apply(x, *leaves[1:])
        got = torch.autograd.grad(out.sum() + (x ** 2).sum(), leaves)
        want_out = ref(*leaves)
        want = torch.autograd.grad(want_out.sum() + (want_out ** 2).sum(), leaves)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if not torch.allclose(g, w, rtol=1e-7, atol=1e-7):
                return f"gradient {i}: differs once the input is read again after the call"
        return None
    return demo


PT = "https://github.com/pytorch/pytorch"
LIGER = "https://github.com/linkedin/Liger-Kernel"
ENTRIES = (
    Entry("pt30454-inplace-no-mark-dirty", "pytorch/pytorch", "issue 30454",
          f"{PT}/issues/30454", "inplace_input",
          "a non-leaf input read again after the call: without mark_dirty autograd keeps "
          "its old history (the report, torch 1.3: backward never ran)",
          "x [1] non-leaf, read again", DoubleInPlace, DoubleInPlaceFixed, lambda: [rand(3, 4)],
          lambda x: 2 * x,
          demo=reused_after_call(lambda x: 2 * x, lambda: [rand(1)])),
    Entry("pt5871-slice-add-no-mark-dirty", "pytorch/pytorch", "issue 5871",
          f"{PT}/issues/5871", "inplace_input",
          "a non-leaf a read again after a[1:2] += b without mark_dirty: the reads miss "
          "b's effect (the report, torch 0.3: b's gradient was None)",
          "a [2] non-leaf, read again; b [1]", SliceAddInPlace, SliceAddInPlaceFixed,
          lambda: [rand(3, 2), rand(1, 2, seed=1)], slice_add_ref,
          demo=reused_after_call(slice_add_ref, lambda: [rand(2), rand(1, seed=1)])),
    Entry("liger1251-ce-writes-logits", "linkedin/Liger-Kernel", "PR 1251",
          f"{LIGER}/pull/1251", "inplace_input",
          "logits that an upstream op saved (a softmax's output): the kernel overwrites them",
          "x [1,2] = softmax output, target [1]", CrossEntropyInPlace, CrossEntropyOutOfPlace,
          lambda: [rand(3, 5), torch.tensor([1, 0, 4])], F.cross_entropy,
          smallest_inputs=lambda: [rand(1, 2), torch.tensor([1])], nonleaf="exp"),
    Entry("liger254-swiglu-bwd-writes-inputs", "linkedin/Liger-Kernel", "issue 254",
          f"{LIGER}/issues/254", "inplace_saved",
          "inputs that another op saved (an exp's output): backward overwrites them",
          "a [1], b [1] = the same exp output", SwiGLUInPlaceBackward, SwiGLUOutOfPlace,
          lambda: [rand(3, 4), rand(3, 4, seed=1)], lambda a, b: F.silu(a) * b,
          smallest_inputs=lambda: [rand(1), rand(1, seed=1)], nonleaf="exp"),
    Entry("pt81417-bwd-mutates-grad-output", "pytorch/pytorch", "issue 81417",
          f"{PT}/issues/81417", "inplace_grad_output",
          "a grad_output the caller reuses (several outputs' grads, a hook): it is doubled",
          "x [1]; grad_output reused after backward", TwiceGradInPlace, TwiceGradFixed,
          lambda: [rand(3, 4)], lambda x: 2 * x,
          smallest_inputs=lambda: [rand(1)]),
)

"""The hint corpus's bug mutations: each turns a base op's correct backward into a broken one.

A `Mutate` takes a corpus_ops.BaseOp and returns the broken backward (inputs, grad_output) ->
gradients.  corpus_functions.MUTATIONS names them and says which hints are right for each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from corpus_ops import BaseOp, GradFn, Grads, layernorm_parts
from torch import Tensor


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides of a row-major tensor of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def raw(t: Tensor) -> Tensor:
    """t's memory read as if it were row-major contiguous (a kernel taking data_ptr())."""
    return t.as_strided(t.shape, contiguous_strides(t.shape))


# --------------------------------------------------------------------------------------------
# mutations: a base op's correct backward -> a broken one

Mutate = Callable[[BaseOp], GradFn]


def on(which: Sequence[int] | None, f: Callable[[Tensor], Tensor | None]) -> Mutate:
    """Apply f to the gradients of the inputs in `which` (None: all)."""

    def build(op: BaseOp) -> GradFn:
        def grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
            out = list(op.grads(xs, g))
            for i in range(len(out)) if which is None else which:
                t = out[i]
                out[i] = f(t) if t is not None else None
            return tuple(out)
        return grads
    return build


def band(dim: int, start: int, stop: int, factor: float) -> Callable[[Tensor], Tensor]:
    """Indices start..stop-1 of `dim` multiplied by factor (0: never written)."""

    def f(t: Tensor) -> Tensor:
        t = t.clone()
        t.narrow(dim, start, stop - start).mul_(factor)
        return t
    return f


def border(t: Tensor) -> Tensor:
    """The 1-wide border of the last two dims left at zero (a boundary case not handled)."""
    out = torch.zeros_like(t)
    out[..., 1:-1, 1:-1] = t[..., 1:-1, 1:-1]
    return out


#: the tile of the tiled backward (a kernel's BLOCK)
TILE = 8


def whole_tiles(t: Tensor) -> Tensor:
    """Only n // TILE whole tiles of the last dim written: the remainder is dropped."""
    out = torch.zeros_like(t)
    n = t.shape[-1] // TILE * TILE
    out[..., :n] = t[..., :n]
    return out


#: an approximate method's error: 0.5% that varies element by element
APPROX = 5e-3


def approx(t: Tensor) -> Tensor:
    wobble = torch.cos(torch.arange(t.numel(), dtype=t.dtype, device=t.device)).view(t.shape)
    return t * (1 + APPROX * wobble)


def nochain(op: BaseOp) -> GradFn:
    return lambda xs, g: op.grads(xs, torch.ones_like(g))


def swapped(op: BaseOp) -> GradFn:
    return lambda xs, g: tuple(reversed(op.grads(xs, g)))


def raw_saved(op: BaseOp) -> GradFn:
    """Backward reads the saved inputs' raw memory (assumes the inputs were contiguous)."""
    return lambda xs, g: op.grads(tuple(raw(x) for x in xs), g)


def raw_grad_output(op: BaseOp) -> GradFn:
    return lambda xs, g: op.grads(xs, raw(g))


def inplace_grad_output(op: BaseOp) -> GradFn:
    """Saves an allocation: the (unary) gradient written into grad_output and returned."""

    def grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
        (gx,) = op.grads(xs, g)
        assert gx is not None
        return (g.copy_(gx),)
    return grads


def inplace_saved(op: BaseOp) -> GradFn:
    """The gradient is right, but backward scales a saved input in place afterwards."""

    def grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
        out = op.grads(xs, g)
        xs[0].mul_(2)
        return out
    return grads


def one_short(op: BaseOp) -> GradFn:
    return lambda xs, g: op.grads(xs, g)[:-1]


def detached(op: BaseOp) -> GradFn:
    """Backward computed from detached inputs: first order right, its own derivative lost."""
    return lambda xs, g: op.grads(tuple(x.detach() for x in xs), g)


def in_float32(op: BaseOp) -> GradFn:
    """A float64 backward computed in float32 and cast back."""
    return lambda xs, g: tuple(t.to(g.dtype) if t is not None else None
                               for t in op.grads(tuple(x.float() for x in xs), g.float()))


def detached_grad_output(op: BaseOp) -> GradFn:
    """Backward from a detached grad_output: first order right, d(gradient)/d(grad_output)
    lost (a gradient penalty through it is wrong)."""
    return lambda xs, g: op.grads(xs, g.detach())


#: an approximate method whose error grows with the values: 1e-3 relative times x0^2
GROWTH = 1e-3


def grows(op: BaseOp) -> GradFn:
    """Every gradient off by GROWTH * x0^2 relative (a discretisation that degrades at large
    values): within a loosened tolerance on small values, far outside it on large ones."""

    def grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
        w = 1 + GROWTH * xs[0] * xs[0]
        return tuple(t * w if t is not None else None for t in op.grads(xs, g))
    return grads


def scaled(c: float, which: Sequence[int] | None = None) -> Mutate:
    return on(which, lambda t: c * t)


# --------------------------------------------------------------------------------------------
# mixed errors: one term of a multi-term derivative wrong.  The per-element ratio to the right
# gradient varies, so no constant factor, sign or transpose names the cause: right set EMPTY.


def unary(f: Callable[[Tensor, Tensor], Tensor]) -> Mutate:
    return lambda op: lambda xs, g: (f(xs[0], g),)


def layernorm_without(term: str) -> Mutate:
    def build(op: BaseOp) -> GradFn:
        def grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
            xhat, inv = layernorm_parts(xs[0])
            mg = g.mean(-1, keepdim=True)
            mgx = (g * xhat).mean(-1, keepdim=True)
            return (inv * (g - xhat * mgx) if term == "mean" else inv * (g - mg),)
        return grads
    return build

"""Show each entry's bug without gradlab: its Function on the smallest failing input.

`demonstrate(entry, which)` calls the broken Function (or the twin) on the entry's
`smallest_inputs`, in the way the report's condition needs (a grad_output laid out as
`.sum()`, a transpose or a `cat` hands it; double backward; non-leaf inputs, or inputs an
upstream op saved), and compares its outputs and gradients with the reference's on the same
values. It returns None when they agree, else what went wrong: the proof that the
reproduction has the bug (and the twin does not) under the report's condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .base import Entry


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol): torch.testing's float64 defaults; a half-precision result to 1%."""
    return (1e-2, 1e-7) if dtype in (torch.float16, torch.bfloat16) else (1e-7, 1e-7)


def grad_output(out: Tensor, kind: str | None, gen: torch.Generator) -> Tensor:
    """A grad_output for `out` laid out as the condition says."""
    def draw(*shape: int) -> Tensor:
        real = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5
        if out.is_complex():  # an imaginary part too: a conjugate dropped shows
            real = torch.complex(real, torch.rand(shape, generator=gen, dtype=torch.float64))
        return real.to(out.dtype)
    if kind == "expanded":       # what out.sum().backward() hands backward
        return draw().expand(out.shape)
    if kind == "transposed":
        return draw(*out.shape[:-2], out.shape[-1], out.shape[-2]).transpose(-1, -2)
    if kind == "narrow":         # what torch.cat([out, other], -1)'s backward hands it
        return draw(*out.shape[:-1], 2 * out.shape[-1])[..., :out.shape[-1]]
    return draw(*out.shape)


def leaves_and_args(raw: list[Any], nonleaf: str | None) -> tuple[list[Tensor], list[Any]]:
    """The tensors to differentiate w.r.t., and the arguments to call with (non-leaf
    copies made by an upstream op when the condition needs them)."""
    leaves, args = [], []
    for a in raw:
        if isinstance(a, Tensor) and a.requires_grad:
            leaf = a.detach().clone().requires_grad_() if a.is_leaf else a
            leaves.append(leaf)
            if nonleaf == "exp":       # exp saves its output: an in-place write corrupts it
                args.append(leaf.exp())
            elif nonleaf == "mul":
                args.append(leaf * 1.0)
            else:
                args.append(leaf)
        else:
            args.append(a.clone() if isinstance(a, Tensor) else a)
    return leaves, args


def run(fn: Any, raw: list[Any], entry: Entry, order: int) -> tuple[list[Tensor], ...]:
    """Outputs and gradients (of order `order`) of fn on fresh copies of `raw`."""
    leaves, args = leaves_and_args(raw, entry.nonleaf)
    out = fn(*args)
    outs = list(out if isinstance(out, tuple) else (out,))
    gen = torch.Generator().manual_seed(7)
    gos = [grad_output(o, entry.grad_kind, gen) for o in outs]
    kept = [g.clone() for g in gos]
    grads = torch.autograd.grad(outs, leaves, gos, create_graph=order > 1, allow_unused=True)
    if any(not torch.equal(g, k) for g, k in zip(gos, kept, strict=True)):
        raise AssertionError("backward modified grad_output in place")
    if order > 1:
        live = [(g, x) for g, x in zip(grads, leaves, strict=True) if g is not None
                and g.requires_grad]
        vs = [torch.rand(g.shape, generator=gen, dtype=g.dtype) for g, _ in live]
        total = sum((g * v).sum() for (g, _), v in zip(live, vs, strict=True))
        grads = torch.autograd.grad(total, leaves, allow_unused=True)
    return [o.detach() for o in outs], list(grads), [x.detach() for x in leaves]


def differ(got: Sequence[Tensor | None], want: Sequence[Tensor | None], what: str) -> str | None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if (g is None) != (w is None):
            return f"{what} {i}: {'None' if g is None else 'a tensor'} where the reference " \
                   f"has {'None' if w is None else 'a tensor'}"
        if g is None or w is None:
            continue
        if g.shape != w.shape:
            return f"{what} {i}: shape {list(g.shape)}, reference {list(w.shape)}"
        rtol, atol = tolerances(w.dtype)
        wide = torch.complex128 if g.is_complex() or w.is_complex() else torch.float64
        g, w = g.to(wide), w.to(wide)  # a complex gradient compared whole (a conjugate wrong)
        if not torch.allclose(g, w, rtol=rtol, atol=atol, equal_nan=False):
            err = (g - w).abs().nan_to_num(float("inf")).max().item()
            return f"{what} {i}: differs from the reference (max abs err {err:.3g})"
    return None


def demonstrate(entry: Entry, which: str) -> str | None:
    """None if `which` ("buggy" or "twin") agrees with the reference on the entry's smallest
    failing input under its condition, else what went wrong."""
    if entry.demo is not None:
        return entry.demo(entry.buggy if which == "buggy" else entry.twin)
    assert entry.smallest_inputs is not None and entry.reference is not None
    raw = entry.smallest_inputs()
    try:
        want = run(entry.reference, raw, entry, entry.order)
    except Exception:                        # the reference itself refuses the input
        want = None
    try:
        got = run(entry.fn(which), raw, entry, entry.order)
    except Exception as exc:                 # any error is the failure
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if want is None:
        bad = [g for g in got[1] if g is not None and not torch.isfinite(g).all()]
        return "non-finite gradient" if bad else None
    inputs_changed = differ(got[2], want[2], "input after the call")
    return (differ(got[0], want[0], "output") or differ(got[1], want[1], "gradient")
            or inputs_changed)

"""Gradients by autograd the way a user's `.backward()` gets them, where a Function refuses
`torch.autograd.grad`.

Reentrant activation checkpointing (`torch.utils.checkpoint(..., use_reentrant=True)`,
fairscale's `checkpoint_wrapper`, DeepSpeed's and Megatron's) recomputes forward inside its
backward and allows only a whole-graph `.backward()`: under `torch.autograd.grad` it raises
("incompatible with .grad()", worded by release). Training never calls `.grad()`, so that refusal
is no bug of the Function (the calibration set's fairscale configs: 6 false error rows per
dtype); the gradient is read off the inputs' `.grad` instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor


def grads(outputs: Sequence[Tensor], inputs: Sequence[Tensor], grad_outputs: Sequence[Tensor],
          retain_graph: bool = False, create_graph: bool = False) -> list[Tensor | None]:
    """`torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)`, or where that
    raises and every input is a leaf, the same gradients by `torch.autograd.backward` (the
    inputs' `.grad` before it kept and put back).  A first error with inputs that are not
    leaves is raised as autograd.grad raised it; where `.backward()` raises too, its error is
    raised: the one of the path the Function supports (memcnn refuses autograd.grad, and its
    `.backward()` error says why a second backward fails)."""
    try:
        # the graph kept either way: a refusal deep in backward comes after the nodes above it
        # freed their buffers, which .backward() must run through again
        return [materialized(g) for g in torch.autograd.grad(
            outputs, inputs, grad_outputs, allow_unused=True, retain_graph=True,
            create_graph=create_graph)]
    except RuntimeError:
        if not inputs or not all(t.is_leaf for t in inputs):
            raise
        return _by_backward(outputs, inputs, grad_outputs, retain_graph, create_graph)


def _by_backward(outputs: Sequence[Tensor], inputs: Sequence[Tensor],
                 grad_outputs: Sequence[Tensor], retain_graph: bool,
                 create_graph: bool) -> list[Tensor | None]:
    before = [t.grad for t in inputs]
    for t in inputs:
        t.grad = None
    try:
        with warnings.catch_warnings():  # create_graph's note on .grad cycles is not the user's
            warnings.simplefilter("ignore")
            torch.autograd.backward(list(outputs), list(grad_outputs),
                                    retain_graph=retain_graph, create_graph=create_graph)
        return [materialized(t.grad) for t in inputs]
    finally:
        for t, g in zip(inputs, before, strict=True):
            t.grad = g


def materialized(g: Tensor | None) -> Tensor | None:
    """g, or zeros of its shape where g is one of autograd's efficient zero tensors (a backward
    such as sgn's or l1_loss' double backward returns one): immutable and refused by numpy,
    which every comparison uses."""
    if g is None or not getattr(g, "_is_zerotensor", lambda: False)():
        return g
    return torch.zeros(g.shape, dtype=g.dtype, device=g.device)

"""Where an explored point is empty, and whether its emptiness is an empty batch: what
pointjudge needs to say a failure there is certain (an empty batch forward accepted) or a
shape the case lacks (no features, parameters of no element), and which empty points are no
valid call at all (indices into nothing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs
from gradlab.checks.families.inputspace import Point
from gradlab.model import Case, TensorArg


def empty_batch(case: Case, point: Point) -> bool:
    """The point's sizes at 0 are batches: every dim of such a size in the case is the leading
    dim of a tensor of two dims or more (PyTorch's N-first convention), not a vector's only dim
    nor a trailing one; or only an int argument is at 0 (a count: repeats, bins)."""
    zeroed = {n for n, m in point.sizes if m == 0}
    own = [(i, d) for i, d, m in point.dims if m == 0]
    if not zeroed and not own:
        return bool(point.ints)
    shapes = [tuple(a.shape) if isinstance(a, (TensorArg, Tensor)) else None for a in case.args]
    dims = [(i, d) for i, shape in enumerate(shapes) if shape
            for d, n in enumerate(shape) if n in zeroed] + own
    return all(d == 0 and len(shapes[i] or ()) >= 2 for i, d in dims)


def filled(case: Case, point: Point) -> Point:
    """The point with each size at 0 back at the case's own and no int argument at 0: what
    it is without its emptiness."""
    return replace(point, sizes=tuple((n, n if m == 0 else m) for n, m in point.sizes),
                   dims=tuple((i, d, case.args[i].shape[d] if m == 0 else m)
                              for i, d, m in point.dims),
                   ints=tuple((i, v) for i, v in point.ints if v != 0))


def indices_into_nothing(inputs: Inputs) -> bool:
    """An integer tensor with elements beside an empty floating one: indices into nothing are
    out of range whatever their values, and torch's ops skip the bounds check where there is
    no element, so forward and the reference running such a call say nothing of it (an
    index_fill of an empty x at rows [1])."""
    tensors = [a for a in inputs.args if isinstance(a, Tensor)]
    return (any(a.numel() and not (a.is_floating_point() or a.is_complex())
                and a.dtype != torch.bool for a in tensors)
            and any((a.is_floating_point() or a.is_complex()) and not a.numel()
                    for a in tensors))


def is_empty(values: Inputs | Sequence[Any]) -> bool:
    """Some tensor argument (or output) has no elements (an empty batch, no points, repeats
    of 0)."""
    args = values.args if isinstance(values, Inputs) else values
    return any(isinstance(a, Tensor) and a.numel() == 0 for a in args)

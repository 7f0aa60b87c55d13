"""Calls into a Function's graph made as autograd's engine makes them.

The engine runs a node (a backward, or a double backward's) with grad mode set to
`create_graph` (GraphTask's thread-local state: grad mode off for a plain backward, on for a
double backward's graph), with the caller's inference mode (its dispatch keys travel with that
state) and, with anomaly mode's NaN check on, raises when a node returns NaN.  A check that calls a
node itself must do the same: a backward using an `out=` op raises in grad mode ("functions with
out=... arguments don't support automatic differentiation") though the engine runs it without a
word.  Every direct call into a graph goes through `call_node`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor


def anomaly_checks_nan() -> bool:
    """Whether the engine would check each node's return value for NaN now."""
    if not torch.is_anomaly_enabled():
        return False
    checks = getattr(torch, "is_anomaly_check_nan_enabled", None)  # torch >= 2.0
    return bool(checks()) if checks is not None else True


def call_node(node: Any, grads: Sequence[Tensor], create_graph: bool = False
              ) -> tuple[Any, ...]:
    """The raw return value of one graph node called with `grads`, as the engine calls it:
    grad mode `create_graph`, inference mode the caller's, anomaly mode's NaN check kept."""
    with torch.set_grad_enabled(create_graph):
        raw = node.apply(*grads)
    raw = raw if isinstance(raw, tuple) else (raw,)
    if anomaly_checks_nan():
        for i, r in enumerate(raw):
            if isinstance(r, Tensor) and r.is_floating_point() and bool(r.isnan().any()):
                raise RuntimeError(f"Function '{type(node).__name__}' returned nan values in "
                                   f"its {i}th output.")
    return raw

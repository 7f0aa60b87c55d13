"""Bool and string arguments at their other settings (the edges check's `flag[i]` and
`choice[i]` points): which points set one, and whether a setting turns random draws on (then
no value can be compared)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradlab.cases import Inputs, flat_outputs
from gradlab.checks.families.inputspace import Point
from gradlab.model import Case


def flipped(case: Case, point: Point) -> bool:
    """The point sets a bool or string argument of the case (edges' flag and choice kinds):
    a switch or mode ('train') that may turn random draws on."""
    def setting(i: int | str) -> object:  # a keyword's by name, a positional one's by place
        return case.kwargs.get(i) if isinstance(i, str) else (
            case.args[i] if i < len(case.args) else None)

    return any(isinstance(setting(i), (bool, str)) for i, _ in point.ints)


def draws(fn: Callable[..., Any], inputs: Inputs) -> bool:
    """Whether two forwards of `fn` on the same values under two seeds of torch's generator
    differ (a dropout, a sampled mask)."""
    outs = []
    for seed in (1, 2):
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            try:
                a = inputs.clone()
                outs.append(flat_outputs(fn(*a.args, **a.kwargs)))
            except Exception:
                return False
    return len(outs[0]) != len(outs[1]) or any(
        x.shape != y.shape or not torch.equal(x, y) for x, y in zip(*outs, strict=True))

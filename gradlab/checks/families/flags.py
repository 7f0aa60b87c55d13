"""Plain arguments at other settings: bool and string ones (the edges check's `flag[i]` and
`choice[i]` points), which points set one and whether a setting turns random draws on (then
no value can be compared); float ones, whether the reference reads them (where it does not,
a solver's tolerance, no value says what the Function should give); whether two settings
mean the same to the reference (an int of -1 that is the case's own last dim)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs, materialize
from gradlab.checks.families.inputspace import SEED, Point, resized, with_values
from gradlab.checks.numeric.execute import run_once
from gradlab.model import Case


def setting(case: Case, i: int | str) -> Any:
    """The case's own value of the argument a point moves: a keyword's by name, a positional
    one's by place (None where the case has none)."""
    return case.kwargs.get(i) if isinstance(i, str) else (
        case.args[i] if i < len(case.args) else None)


def flipped(case: Case, point: Point) -> bool:
    """The point sets a bool or string argument of the case (edges' flag and choice kinds):
    a switch or mode ('train') that may turn random draws on."""
    return any(isinstance(setting(case, i), (bool, str)) for i, _ in point.ints)


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


def unread(ref: Callable[..., Any], case: Case, point: Point, device: str) -> bool:
    """The point moves a float argument and the reference's outputs at the point are those
    with every float argument back at the case's value (it does not read them)."""
    plain = tuple((k, v) for k, v in point.ints if not isinstance(v, float))
    return len(plain) != len(point.ints) and same_reference(
        ref, case, point, replace(point, ints=plain), device)


def unread_setting(ref: Callable[..., Any], case: Case, point: Point, device: str) -> bool:
    """The point moves only int arguments, each below the case's value, and the reference's
    outputs at it are those with them back at the case's (it does not read them): fewer
    iterations of a method, a value less converged by design (a warn).  A setting moved up
    stays judged: more iterations are no less right, and a partition count or a block size
    that changes the result is wrong wherever it is moved (the catalogue's megatron7464:
    tensor parallel at 2)."""
    if not point.ints or not all(type(v) is int and type(setting(case, k)) is int
                                 and v < setting(case, k) for k, v in point.ints):
        return False
    # the same outputs one above the case's too: not a value that means the case's own to the
    # reference (a dim of -1 that is the case's last dim, where the Function must agree)
    base, above = replace(point, ints=()), replace(point, ints=tuple(
        (k, setting(case, k) + 1) for k, _ in point.ints))
    return same_reference(ref, case, point, base, device) and same_reference(
        ref, case, above, base, device)


def same_reference(ref: Callable[..., Any], case: Case, p: Point, q: Point,
                   device: str) -> bool:
    """The reference's outputs at points p and q are the same (same values drawn)."""
    runs = []
    for r in (p, q):
        sized = resized(case, r)
        if sized is None:
            return False
        inputs = with_values(materialize(sized, "float64", device, SEED), r)
        runs.append(run_once(ref, inputs, None, torch.Generator().manual_seed(SEED)))
    a, b = runs
    return a.error is None and b.error is None and len(a.outs) == len(b.outs) and all(
        isinstance(x, Tensor) and isinstance(y, Tensor) and x.shape == y.shape
        and bool(torch.equal(x, y)) for x, y in zip(a.outs, b.outs, strict=True))

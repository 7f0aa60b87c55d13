"""`--explore`: a seeded, budgeted search over the inputs a caller can produce, and a failure
shrunk to its smallest input, printed as a spec case to paste.

The axes come from the case itself: every distinct size of its tensor arguments is one axis
(dims that share a size change together, so a Linear's in-features stay in agreement between
x and w), and every floating differentiable input is one value axis (as drawn, one sign, zeros
planted, paired values that tie, tiny, large).  The search first moves each axis alone to each
of its values (one factor at a time: the conditions the bug catalogue shows callers hit —
empty and size-1 dims, odd sizes past a tile, one sign, ties), then draws seeded combinations
until the budget is spent.  Each point runs the Function and the reference on the same values
(float64) and compares forward and gradients by the op's float64 tolerance.

Judgeable only where the reference is: where it raises, returns no finite value, or moves by
more than domain.ILL_CONDITIONED under a nudge (ill-conditioned, or on a kink such as relu at
a planted 0), the point is counted as not judgeable and never fails.  A forward that refuses
an input is validation, counted and never a failure; a backward that raises where forward and
the reference ran, or a wrong value, fails.  The search is plain Python, not hypothesis:
the space is a few integer and categorical axes, a greedy per-axis shrink reaches each axis'
smallest failing size directly, and the budget is a wall clock this module keeps.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, materialize
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.families.domain import ILL_CONDITIONED, NUDGE, moved
from gradlab.checks.families.inputspace import (
    LARGE,
    SEED,
    TINY,
    VALUE_KINDS,
    Point,
    base_point,
    combinations,
    one_at_a_time,
    resized,
    shared_dims,
    with_values,
)
from gradlab.checks.numeric.context import CaseContext
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Case, TensorArg
from gradlab.results import PASS, SKIP, Finding


@dataclass
class Outcome:
    """What one point showed: "pass", "wrong", "raises" or "unjudgeable", with a note."""

    verdict: str
    note: str = ""


@dataclass
class Search:
    """A whole search: the points tried, the not judgeable ones, the failure found (shrunk)."""

    tried: int = 0
    unjudgeable: int = 0
    refused: int = 0
    seconds: float = 0.0
    failure: Point | None = None
    outcome: Outcome | None = None
    sizes_seen: dict[int, set[int]] | None = None
    kinds_seen: set[str] | None = None


Runner = Callable[[Callable[..., Any], Inputs, Sequence[Tensor] | None], Run]


def judge(fn: Callable[..., Any], ref: Callable[..., Any], case: Case, point: Point,
          device: str, tol: Any) -> Outcome:
    """One point: the Function against the reference on the same float64 values."""
    sized = resized(case, point)
    if sized is None:
        return Outcome("unjudgeable", "too large")
    try:
        inputs = with_values(materialize(sized, "float64", device, SEED), point)
    except Exception as exc:  # a size the spec's own constraints refuse
        return Outcome("unjudgeable", f"inputs: {type(exc).__name__}")
    gen = torch.Generator().manual_seed(SEED)
    want = run_once(ref, inputs.clone(), None, gen)
    if want.error is not None or not _finite(want):
        return Outcome("unjudgeable", "the reference raises or is not finite")
    got = run_once(fn, inputs.clone(), want.grad_outs64 or None, gen)
    if got.error is not None:
        # forward refusing an input is validation (a clear error is the right answer to a
        # size it does not support); backward raising where forward accepted it is a bug
        note = f"{type(got.error).__name__}: {got.error}".splitlines()[0]
        out = Outcome("refused" if got.stage == "forward" else "raises", note)
    else:
        out = _compared(got, want, tol)
    if out.verdict == "wrong" and _ill_conditioned(ref, inputs, want, gen):
        return Outcome("unjudgeable", "the reference is ill-conditioned there")
    if out.verdict in FAILED and _empty(inputs):
        # wrong or raising only where a tensor is empty: likely a bug, but whether a caller
        # ever hands it an empty tensor is not certain (policy: a warn)
        out.verdict = "empty"
    elif out.verdict in FAILED and _disagreeing(case, point):
        # fed arguments whose shapes disagree where the case's agree (the reference
        # broadcasts them): whether a caller does is not certain either
        out.verdict = "broadcast"
    elif (out.verdict == "wrong" and _finite(got)
          and any(kind in RESCALED for _, kind in point.values)):
        # every value finite, off only at values rescaled 1e-6x or 1e3x: an unstable formula,
        # or a method's absolute scale by design (a damping epsilon), as the magnitude and
        # small variants' scale_limited judges it; a non-finite result stays a failure
        out.verdict = "scale"
    return out


#: The value kinds that rescale an input (inputspace.TINY, LARGE).
RESCALED = ("tiny", "large")


def _disagreeing(case: Case, point: Point) -> bool:
    """The point moves a dim on its own whose size another argument shares (the case's
    shapes agree there, the point's no longer do)."""
    shapes = [tuple(a.shape) if isinstance(a, (TensorArg, Tensor)) else () for a in case.args]
    return any(shapes[i][d] in shapes[j] for i, d, _ in point.dims
               for j in range(len(shapes)) if j != i)


#: The verdicts of a failing point: certain ones, then the uncertain (a warn): a failure only
#: on an input with an empty tensor, on arguments whose shapes disagree, or a finite error
#: only at rescaled values.
FAILED = ("wrong", "raises")
UNCERTAIN = ("empty", "broadcast", "scale")


def _empty(inputs: Inputs) -> bool:
    """Some tensor argument has no elements (an empty batch, no points)."""
    return any(isinstance(a, Tensor) and a.numel() == 0 for a in inputs.args)


def _compared(got: Run, want: Run, tol: Any) -> Outcome:
    """The Function's run against the reference's: pass, or wrong with what differs."""
    for name, g, w in _pairs(got, want):
        if g is None or w is None or g.shape != w.shape:
            return Outcome("wrong", f"{name}: shape {None if g is None else list(g.shape)}, "
                                    f"expected {None if w is None else list(w.shape)}")
        if g.numel() and not dg.compare(g.detach(), w.detach(), tol, scaled=True).ok:
            return _wrong(name, g.detach(), w.detach())
    return Outcome("pass")


#: An error below this relative to the reference's largest magnitude, in the reference's
#: direction (cosine above 1 - APPROXIMATE), is an accuracy the base case's checks judge (a
#: formula as good as another at 1e3x values), not a condition that breaks a Function: not
#: judgeable here.  Pins: the catalogue's pt102720 twin (3.5e-6 at values of 1e3: 1e-9
#: relative) and test_explore.py's doubled gradient (relative error 1: a failure).
APPROXIMATE = 1e-4


def _wrong(name: str, g: Tensor, w: Tensor) -> Outcome:
    err = float((g - w).abs().nan_to_num(float("inf")).max())
    scale = float(w.abs().max())
    if scale > 0 and err <= APPROXIMATE * scale and bool(torch.isfinite(g).all()):
        cos = float(torch.nn.functional.cosine_similarity(g.reshape(1, -1), w.reshape(1, -1)))
        if cos >= 1 - APPROXIMATE:
            return Outcome("unjudgeable", f"{name} within {err / scale:.1g} of the reference")
    return Outcome("wrong", f"{name} wrong (max abs err {err:.3g})")


def _pairs(got: Run, want: Run) -> Iterator[tuple[str, Tensor | None, Tensor | None]]:
    if len(got.outs) != len(want.outs) or len(got.grads) != len(want.grads):
        yield "outputs", None, None
        return
    for k, (g, w) in enumerate(zip(got.outs, want.outs, strict=True)):
        yield f"output {k}", g, w
    for k, (g, w) in enumerate(zip(got.grads, want.grads, strict=True)):
        if g is not None or w is not None:
            yield f"gradient {k}", g, w


def _finite(run: Run) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in [*run.outs, *run.grads]
               if isinstance(t, Tensor) and t.is_floating_point())


def _ill_conditioned(ref: Callable[..., Any], inputs: Inputs, want: Run,
                     gen: torch.Generator) -> bool:
    """The reference's outputs or gradients move by more than ILL_CONDITIONED under a nudge of
    NUDGE relative to each value plus NUDGE of the tensor's mean magnitude (so planted zeros
    move too), one way and the other: a point on a kink (relu at 0, a max at a tie) is where
    the derivative is a convention, not judgeable; a smooth reference moves ~NUDGE."""
    g = torch.Generator().manual_seed(SEED + 1)
    noises = {i: torch.randn(inputs.args[i].shape, generator=g, dtype=inputs.args[i].dtype)
              for i in inputs.diff_index}
    for sign in (1.0, -1.0):  # both ways: a kink's one side alone may agree with the point
        nudged = inputs.clone()
        for i, noise in noises.items():
            t = nudged.args[i].detach()
            if t.numel():
                # an all-zero tensor moves by NUDGE itself (its mean magnitude is no scale)
                scale = float(t.abs().mean()) or 1.0
                step = sign * NUDGE * noise * (t.abs() + scale)
                nudged.args[i] = copy_like(t + step, requires_grad=True)
        again = run_once(ref, nudged, want.grad_outs64 or None, gen)
        if again.error is not None or moved(want, again, larger=True) > ILL_CONDITIONED:
            return True
    return False


def search(judge_point: Callable[[Point], Outcome], base: Point, budget: float,
           clock: Callable[[], float] = time.perf_counter,
           shared: Sequence[tuple[int, int, int]] = ()) -> Search:
    """Points one axis at a time, then seeded combinations, until `budget` seconds pass or
    one fails; a failure is then shrunk (shrink) within what is left of the budget."""
    s = Search(sizes_seen={n: set() for n, _ in base.sizes}, kinds_seen=set())
    start = clock()
    points = _chain(one_at_a_time(base, shared), combinations(base, random.Random(SEED), shared))
    empty: tuple[Point, Outcome] | None = None
    for p in points:
        if clock() - start > budget:
            break
        out = _tried(s, judge_point, p)
        if out.verdict in FAILED:
            s.failure, s.outcome = shrink(s, judge_point, p, out, lambda: clock() - start
                                          > budget * 2)
            break
        if out.verdict in UNCERTAIN and empty is None:
            empty = (p, out)  # kept; the search goes on for a certain failure
    if s.failure is None and empty is not None:
        s.failure, s.outcome = shrink(s, judge_point, *empty, lambda: clock() - start
                                      > budget * 2)
    s.seconds = clock() - start
    return s


def _chain(*its: Iterator[Point]) -> Iterator[Point]:
    for it in its:
        yield from it


def _tried(s: Search, judge_point: Callable[[Point], Outcome], p: Point) -> Outcome:
    out = judge_point(p)
    s.tried += 1
    s.unjudgeable += out.verdict == "unjudgeable"
    s.refused += out.verdict == "refused"
    for n, m in p.sizes:
        (s.sizes_seen or {}).setdefault(n, set()).add(m)
    (s.kinds_seen if s.kinds_seen is not None else set()).update(k for _, k in p.values)
    return out


def shrink(s: Search, judge_point: Callable[[Point], Outcome], p: Point, out: Outcome,
           over: Callable[[], bool]) -> tuple[Point, Outcome]:
    """The failing point made smaller while it still fails the same way: each value axis back
    to its draw, then each size axis to its smallest failing size (sizes tried ascending), in
    passes until one changes nothing."""
    changed = True
    while changed and not over():
        changed = False
        for cand in _smaller(p):
            if over():
                break
            o = _tried(s, judge_point, cand)
            if o.verdict == out.verdict:
                p, out, changed = cand, o, True
                break
    return p, out


def _smaller(p: Point) -> Iterator[Point]:
    """Points one step simpler than p: a value axis back to its draw, or one size axis at a
    smaller size (ascending: the smallest that fails is found first)."""
    for k, (i, kind) in enumerate(p.values):
        if kind != "drawn":
            values = list(p.values)
            values[k] = (i, "drawn")
            yield replace(p, values=tuple(values))
    for k in range(len(p.dims)):  # a dim moved on its own back with its size axis
        yield replace(p, dims=p.dims[:k] + p.dims[k + 1:])
    for k, (i, d, m) in enumerate(p.dims):
        for smaller in range(m):
            yield replace(p, dims=(*p.dims[:k], (i, d, smaller), *p.dims[k + 1:]))
    for k, (n, m) in enumerate(p.sizes):
        for smaller in range(m):
            sizes = list(p.sizes)
            sizes[k] = (n, smaller)
            yield replace(p, sizes=tuple(sizes))


def spec_case(case: Case, point: Point) -> dict[str, Any]:
    """The shrunk point as a spec case to paste: `set` of each changed argument's shape and,
    for a value kind a spec can say, its range or special values."""
    sized = resized(case, point)
    changed: dict[int, dict[str, Any]] = {}
    for i, (a, b) in enumerate(zip(case.args, sized.args if sized else case.args, strict=True)):
        if isinstance(a, (TensorArg, Tensor)) and tuple(a.shape) != tuple(b.shape):
            changed[i] = {"shape": list(b.shape)}
    for i, kind in point.values:
        if kind in SPEC_VALUES:
            changed.setdefault(i, {}).update(SPEC_VALUES[kind])
    return {"name": "explored", "set": changed}


#: The value kinds a spec can state (docs/specs.md: `low`/`high`; planted zeros as `special`,
#: which the special variant plants); ties are not.
SPEC_VALUES = {"positive": {"low": 0.0, "high": 1.0}, "negative": {"low": -1.0, "high": 0.0},
               "zeros": {"special": [0.0]}, "tiny": {"low": -TINY, "high": TINY},
               "large": {"low": -LARGE, "high": LARGE}}


def explore_row(ctx: CaseContext, budget: float) -> None:
    """The `explore` row of a case (ctx: its CaseContext in float64): pass with what was
    explored, fail (a wrong value) or warn (raises where the reference runs) with the shrunk
    input as a spec case, or a declared skip without a reference."""
    op, case = ctx.op, ctx.case
    if op.reference is None:
        ctx.row("explore", "explore", SKIP, declared=True, reason="explore_no_reference")
        return
    tol = op.tolerance("float64")
    s = search(lambda p: judge(op.function, op.reference, case, p, ctx.device, tol),
               base_point(case), budget, shared=shared_dims(case))
    facts = {"tried": s.tried, "unjudgeable": s.unjudgeable, "refused": s.refused,
             "seconds": round(s.seconds, 2),
             "sizes": {n: sorted(m) for n, m in (s.sizes_seen or {}).items()},
             "values": [k for k in VALUE_KINDS if k in (s.kinds_seen or set())]}
    if s.failure is None or s.outcome is None:
        ctx.row("explore", "explore", PASS, seconds=s.seconds,
                findings=[Finding("explored", -1, "", got=facts)])
        return
    hint = {"wrong": "explored_wrong", "raises": "explored_raises",
            "broadcast": "explored_broadcast", "scale": "explored_scale"}.get(
        s.outcome.verdict, "explored_empty")
    status = policy.status("explore", hint, strict=ctx.options.strict)
    ctx.row("explore", "explore", status, seconds=s.seconds, hint=hint,
            findings=[Finding("explored", -1, hint, got=facts,
                              want=spec_case(case, s.failure))],
            note=s.outcome.note)

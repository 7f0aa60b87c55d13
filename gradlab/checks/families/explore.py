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

Each point is judged by gradlab.checks.families.pointjudge (what is not judgeable, what fails,
what only warns), as the default edges check judges its points.  The search is plain Python,
not hypothesis: the space is a few integer and categorical axes, a greedy per-axis shrink
reaches each axis' smallest failing size directly, and the budget is a wall clock this module
keeps.
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torch import Tensor

from gradlab.checks.diagnosis import policy
from gradlab.checks.families.codefacts import NO_FACTS, CodeFacts, code_facts, threshold_values
from gradlab.checks.families.domain import reference_scale
from gradlab.checks.families.inputspace import (
    ALL_VALUE_KINDS,
    LARGE,
    SEED,
    TINY,
    Point,
    base_point,
    combinations,
    index_args,
    int_axes,
    int_values,
    one_at_a_time,
    rank_axis,
    resized,
    shared_dims,
    size_dims,
    tuple_axes,
    tuple_values,
    zero_allowed,
)
from gradlab.checks.families.pointjudge import (
    CERTAIN,
    FAILED,
    UNCERTAIN,
    Outcome,
    judge,
)
from gradlab.checks.families.repair import refused_setting, repaired
from gradlab.checks.numeric.context import CaseContext
from gradlab.model import Case, TensorArg
from gradlab.results import PASS, SKIP, Finding


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
    #: each plain argument's settings tried (an int's values, a string's other settings)
    settings_seen: dict[int | str, set[Any]] = field(default_factory=dict)



@dataclass(frozen=True)
class Space:
    """The axes of a case beside its base point's: dims that share a size (each also moved on
    its own), the plain arguments and the values each takes (an int's, a string's other
    settings), the argument a rank point extends, and every (argument, dim) of each size
    (where a shrink moves one dim of a size axis on its own)."""

    shared: Sequence[tuple[int, int, int]] = ()
    plain: Sequence[tuple[int | str, Sequence[Any]]] = ()
    ranked: tuple[int, ...] = ()
    dims_of: Mapping[int, Sequence[tuple[int, int]]] = field(default_factory=dict)
    #: the example index tensors a shrink may lower or raise (inputspace.index_args)
    indices: tuple[int, ...] = ()
    #: the case's own int and tuple-of-int arguments, which a shrink makes smaller (a kernel
    #: (2, 2) at (1, 2), where a smaller input then fails the same way)
    settings: Sequence[tuple[int | str, Any]] = ()


def space(case: Case, facts: CodeFacts = NO_FACTS) -> Space:
    ints, tuples = int_axes(case), tuple_axes(case)
    plain = [*((i, int_values(n, zero_allowed(i))) for i, n in ints),
             *((i, tuple_values(t, zero_allowed(i))) for i, t in tuples),
             *((i, float_values(v)) for i, v in float_axes(case))]
    return Space(shared_dims(case), [*plain, *facts.choices], rank_axis(case),
                 size_dims(case), index_args(case), [*ints, *tuples])


def float_axes(case: Case) -> list[tuple[int | str, float]]:
    """(position or keyword, value) of every finite non-zero float argument, each an axis (a
    scale factor, a threshold; `--explore` only; one the reference ignores is not judged)."""
    return [(k, a) for k, a in [*enumerate(case.args), *case.kwargs.items()]
            if isinstance(a, float) and a != 0 and math.isfinite(a)]


def float_values(v: float) -> list[float]:
    """The values a float axis takes: half, twice and the inverse (a scale factor of 2 at
    0.5, downsampling; a threshold of 20 at 0.05, inside the values' range)."""
    return list(dict.fromkeys(u for u in (v / 2, 2 * v, 1 / v) if u != v))


def search(judge_point: Callable[[Point], Outcome], base: Point, budget: float,
           clock: Callable[[], float] = time.perf_counter, axes: Space = Space()) -> Search:
    """Points one axis at a time, then seeded combinations, until `budget` seconds pass or
    one fails; a failure is then shrunk (shrink) within what is left of the budget."""
    s = Search(sizes_seen={n: set() for n, _ in base.sizes}, kinds_seen=set())
    start = clock()
    points = _chain(one_at_a_time(base, axes.shared, axes.plain, axes.ranked),
                    combinations(base, random.Random(SEED), axes.shared, axes.plain))
    likely: tuple[Point, Outcome] | None = None
    unfit: set[str] = set()  # settings no dims were found to fit (each repaired once)
    for p in points:
        if clock() - start > budget:
            break
        out = _tried(s, judge_point, p)
        if refused_setting(p, out) and repr(p.ints) not in unfit:
            q, out = repaired(lambda c: _tried(s, judge_point, c), p, out, axes.dims_of,
                              lambda: clock() - start > budget)
            if q is p:
                unfit.add(repr(p.ints))
            p = q
        if out.verdict in FAILED:
            s.failure, s.outcome = shrink(s, judge_point, p, out, lambda: clock() - start
                                          > budget * 2, axes)
            break
        if out.verdict in KEPT and (likely is None or KEPT.index(out.verdict)
                                    < KEPT.index(likely[1].verdict)):
            # kept; the search goes on for a failure at a non-empty input (the edges check
            # names an empty one already)
            likely = (p, out)
    if s.failure is None and likely is not None:
        s.failure, s.outcome = shrink(s, judge_point, *likely, lambda: clock() - start
                                      > budget * 2, axes)
    s.seconds = clock() - start
    return s


#: Fewer points than this when the budget ran out: slow calls, not refusals (those are hundreds).
FEW_TRIED = 10
#: The verdicts a search keeps while it looks on, the best first: a certain failure on an
#: empty tensor, then the uncertain ones.
KEPT = (*(v for v in CERTAIN if v not in FAILED), *UNCERTAIN)


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
    for i, v in p.ints:
        s.settings_seen.setdefault(i, set()).add(v)
    return out


def shrink(s: Search, judge_point: Callable[[Point], Outcome], p: Point, out: Outcome,
           over: Callable[[], bool], axes: Space = Space()) -> tuple[Point, Outcome]:
    """The failing point made smaller while it still fails the same way: each value axis back
    to its draw, then each size axis to its smallest failing size (sizes tried ascending), in
    passes until one changes nothing.  A backward raising at the case's shape that raises at
    a smaller one too (there a `reshaped` verdict on its own) is the same failure: it keeps
    its verdict."""
    changed = True
    while changed and not over():
        changed = False
        for cand in _redrawn(_smaller(p, axes)):
            if over():
                break
            o = _tried(s, judge_point, cand)
            if o.verdict == out.verdict or (out.verdict, o.verdict) == ("raises", "reshaped"):
                p, out, changed = cand, Outcome(out.verdict, o.note), True
                break
    return p, out


#: The draws a shrink tries of a smaller point whose values are drawn sides of thresholds: a
#: pattern of sides that fails at 3 rows shows at 1 row in one draw of 4 or so.
SHRINK_DRAWS = 4


def _redrawn(points: Iterator[Point]) -> Iterator[Point]:
    """Each point, then (where a value axis plants thresholds' sides) its other draws."""
    for p in points:
        yield p
        if any(kind == "thresholds" for _, kind in p.values):
            yield from (replace(p, draw=d) for d in range(1, SHRINK_DRAWS) if d != p.draw)


def _smaller(p: Point, axes: Space) -> Iterator[Point]:
    """Points one step simpler than p: a value axis back to its draw, an int or rank back to
    the case's (where that is not larger), an int or tuple argument smaller, one size axis at
    a smaller size (ascending: the smallest that fails is found first), one dim of a size axis
    smaller on its own (a batch that fails at 5 with its out-features, which share the size,
    back at 1), or an index tensor's positions all at its smallest or largest (a graph's
    edges on one node; an index past a clipped end, kept as its block shrinks)."""
    for k, (i, kind) in enumerate(p.values):
        if kind != "drawn":
            values = list(p.values)
            values[k] = (i, "drawn")
            yield replace(p, values=tuple(values))
    case_setting = dict(axes.settings)
    for k, (i, v) in enumerate(p.ints):
        if not _below(v, case_setting.get(i)):
            yield replace(p, ints=p.ints[:k] + p.ints[k + 1:])
    if p.ranked or p.lead:
        yield replace(p, ranked=(), lead=())
    moved = dict(p.ints)
    for i, own in axes.settings:
        for v in _lesser(moved.get(i, own)):
            yield replace(p, ints=(*((j, u) for j, u in p.ints if j != i), (i, v)))
    yield from _smaller_sizes(p, axes.dims_of)
    for i in axes.indices:
        if i not in p.lowered and i not in p.raised:
            yield replace(p, lowered=(*p.lowered, i))
            yield replace(p, raised=(*p.raised, i))


def _smaller_sizes(p: Point, dims_of: Mapping[int, Sequence[tuple[int, int]]]
                   ) -> Iterator[Point]:
    """p with a dim moved on its own back with its size axis (where that is no larger) or
    smaller, a size axis smaller, or one dim of a size axis smaller on its own."""
    axis = {(i, d): m for n, m in p.sizes for i, d in dims_of.get(n, ())}
    for k, (i, d, m) in enumerate(p.dims):
        if m >= axis.get((i, d), 0):
            yield replace(p, dims=p.dims[:k] + p.dims[k + 1:])
    for k, (i, d, m) in enumerate(p.dims):
        for smaller in range(m):
            yield replace(p, dims=(*p.dims[:k], (i, d, smaller), *p.dims[k + 1:]))
    for k, (n, m) in enumerate(p.sizes):
        for smaller in range(m):
            sizes = list(p.sizes)
            sizes[k] = (n, smaller)
            yield replace(p, sizes=tuple(sizes))
    own = {(i, d) for i, d, _ in p.dims}
    for n, m in p.sizes:
        for i, d in dims_of.get(n, ()):
            if (i, d) not in own:
                for smaller in range(1, min(m, n + 1)):
                    yield replace(p, dims=(*p.dims, (i, d, smaller)))


def _lesser(v: Any) -> Iterator[Any]:
    """An int setting's smaller positive values, or a tuple's with one element smaller (each
    down to 1, smallest first: 0 is a setting of its own, the edges' and the search's)."""
    if isinstance(v, int) and not isinstance(v, bool):
        yield from range(1, v)
    elif isinstance(v, (tuple, list)) and all(isinstance(e, int) and not isinstance(e, bool)
                                              for e in v):
        for k, e in enumerate(v):
            yield from (type(v)([*v[:k], u, *v[k + 1:]]) for u in range(1, e))


def _below(v: Any, own: Any) -> bool:
    """A moved setting no larger than the case's own in any element (a shrink made it so:
    going back would undo it)."""
    if own is None or isinstance(v, bool) or v == own:
        return False
    if isinstance(v, int) and isinstance(own, int):
        return v < own
    return (isinstance(v, (tuple, list)) and isinstance(own, (tuple, list))
            and len(v) == len(own) and all(isinstance(a, int) and isinstance(b, int)
                                           and a <= b for a, b in zip(v, own, strict=True)))


def spec_case(case: Case, point: Point) -> dict[str, Any]:
    """The shrunk point as a spec case to paste: `set` of each changed argument's shape and,
    for a value kind a spec can say, its range or special values."""
    sized = resized(case, point)
    changed: dict[int, dict[str, Any]] = {}
    for i, (a, b) in enumerate(zip(case.args, sized.args if sized else case.args, strict=True)):
        if isinstance(a, (TensorArg, Tensor)) and tuple(a.shape) != tuple(b.shape):
            changed[i] = {"shape": list(b.shape)}
    for i in (*point.lowered, *point.raised):  # positions a spec cannot draw: as they are
        b = sized.args[i] if sized else None
        if isinstance(b, Tensor) and b.numel() <= MAX_SPEC_VALUES:
            changed[i] = {"shape": list(b.shape), "values": b.tolist()}
    for i, kind in point.values:
        if kind in SPEC_VALUES:
            changed.setdefault(i, {}).update(SPEC_VALUES[kind])
        elif kind == "thresholds":
            changed.setdefault(i, {})["special"] = [float(f"{v:.6g}") for v in point.planted]
    out: dict[Any, Any] = dict(changed)
    out.update(dict(point.ints))  # a plain argument is set whole: `set: {1: 0}`
    return {"name": "explored", "set": out}


#: The most elements a spec case gives as values (a lowered or raised index's positions).
MAX_SPEC_VALUES = 64

#: The value kinds a spec can state (docs/specs.md: `low`/`high`; planted zeros as `special`,
#: which the special variant plants); ties are not.
SPEC_VALUES = {"positive": {"low": 0.0, "high": 1.0}, "negative": {"low": -1.0, "high": 0.0},
               "zero": {"low": 0.0, "high": 0.0},
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
    floor = reference_scale(op.reference, case, ctx.device)
    facts = code_facts(op.function, op.reference, case.args, case.kwargs)
    base = base_point(case, threshold_values(facts.thresholds), constants=True)
    with warnings.catch_warnings():  # torch's warnings at probe inputs are not the user's
        warnings.simplefilter("ignore")
        s = search(lambda p: judge(op.function, op.reference, case, p, ctx.device, tol,
                                   floor), base, budget, axes=space(case, facts))
    seen = {"tried": s.tried, "unjudgeable": s.unjudgeable, "refused": s.refused,
             "seconds": round(s.seconds, 2),
             "sizes": {n: sorted(m) for n, m in (s.sizes_seen or {}).items()},
             "values": [k for k in ALL_VALUE_KINDS if k in (s.kinds_seen or set())],
             "settings": {i: sorted(v, key=str)
                          for i, v in sorted(s.settings_seen.items(), key=lambda kv: str(kv[0]))}}
    if s.failure is None or s.outcome is None:
        # a search that judged no input (forward refused each one in float64, the case's own
        # too, or the reference could not judge them) has shown nothing: not a pass
        judged = s.tried > s.refused + s.unjudgeable
        # ... or the budget ran out first, after a few slow calls (a first call that compiles:
        # numba, torch.compile), where a refusing Function is refused at hundreds of points
        why = ("explore_budget_spent" if s.seconds >= budget and s.tried < FEW_TRIED
               else "explore_nothing_judged")
        ctx.row("explore", "explore", PASS if judged else SKIP, seconds=s.seconds,
                declared=not judged, reason="" if judged else why,
                findings=[Finding("explored", -1, "", got=seen)])
        return
    hint = {"wrong": "explored_wrong", "raises": "explored_raises",
            "broadcast": "explored_broadcast", "scale": "explored_scale",
            "domain": "explored_domain", "reshaped": "explored_reshaped",
            "constant": "explored_constant", "unread": "explored_unread"}.get(
        s.outcome.verdict, "explored_empty")
    status = policy.status("explore", hint, strict=ctx.options.strict)
    ctx.row("explore", "explore", status, seconds=s.seconds, hint=hint,
            findings=[Finding("explored", -1, hint, got=seen,
                              want=spec_case(case, s.failure))],
            note=s.outcome.note)

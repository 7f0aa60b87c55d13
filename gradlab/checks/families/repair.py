"""A setting the case's shapes do not fit, tried at shapes that fit it: groups=2 beside a weight
of every input channel is refused by the reference at the case's shapes, and accepted with half
the input channels and an even count of output channels.  Used by the edges check (its
int_more, int_zero and tuple points) and by `--explore` (every setting it moves); a forward
that disagrees there is not judged (backward_only)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gradlab.checks.families.inputspace import Point
from gradlab.checks.families.pointjudge import Outcome

#: The most points a repair of one refused setting tries (one or two dims halved or doubled);
#: each refused one costs a reference call that raises at once.
MAX_REPAIRS = 96
#: The verdicts of a point that says nothing (the setting refused, or the point not judged).
NOT_JUDGED = ("refused", "unjudgeable")


def repaired(judge_point: Callable[[Point], Outcome], p: Point, out: Outcome,
             dims_of: Mapping[int, Sequence[tuple[int, int]]],
             over: Callable[[], bool] = lambda: False) -> tuple[Point, Outcome]:
    """`p`, whose setting the case's shapes do not fit, with one dim, then two, halved or
    doubled until one is judged: the setting at shapes that fit it.  Its dims are coupled to
    the setting (Point.repaired: not a broadcast) where the setting at the case's own value
    refuses them.  `p` and `out` themselves where no dims fit (or `over()` says stop)."""
    size = {(i, d): n for n, pairs in dims_of.items() for i, d in pairs}
    moves = [(i, d, m) for (i, d), n in sorted(size.items())
             for m in ((n // 2,) * (n % 2 == 0 and n > 1) + (2 * n,))]
    pairs = [(a, b) for k, a in enumerate(moves) for b in moves[k + 1:] if a[:2] != b[:2]]
    for moved in [*((a,) for a in moves), *pairs][:MAX_REPAIRS]:
        if over():
            break
        cand = replace(p, dims=moved, repaired=True)
        again = judge_point(cand)
        if again.verdict in NOT_JUDGED:
            continue
        alone = judge_point(replace(cand, ints=(), repaired=False))
        if alone.verdict in NOT_JUDGED:
            return cand, backward_only(again, SHAPES_MADE)
        cand = replace(cand, repaired=False)  # the dims fit without the setting too
        return cand, backward_only(judge_point(cand), SHAPES_MADE)
    return p, out


#: Why a repaired point whose forward disagrees is not judged.
SHAPES_MADE = "forward disagrees at shapes made to fit the setting"


def backward_only(out: Outcome, why: str) -> Outcome:
    """A point's outcome, not judged (`why`) where its forward disagrees with the reference's:
    a call that may mean something else to the Function (shapes made to fit a setting: a
    B-spline of one degree more given twice the knots, not the count its degree needs; an int
    of -1), while a gradient wrong where forward agrees is wrong on a call both compute
    alike."""
    return Outcome("unjudgeable", why) if out.forward else out


def refused_setting(p: Point, out: Outcome) -> bool:
    """The point moves a setting alone (no dim) and is refused or not judged there: a repair
    may find shapes that fit it."""
    return out.verdict in NOT_JUDGED and bool(p.ints) and not p.dims

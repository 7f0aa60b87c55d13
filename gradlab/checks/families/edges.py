"""The `edges` check, run by default: the inputs at the edges of what a case's signature lets a
caller pass, each judged as `--explore` judges a point (pointjudge.judge, against the reference
in float64).

The bug catalogue (benchmarks/catalogue/) shows where real Functions break on calls their
authors never checked: an empty batch, one element, a square input made non-square, a batch
past a kernel's step, a batch of one at two, an all-zero input (a zero rotation, an empty
mask), an int argument at 0 (bins, repeats), -1 (a dim from the end, a cropping pad) or one
more (tensor-parallel ranks, a stride), a per-dim setting made
non-square (a dilation (2, 1)), a rank more (a 4-d image where the tests used 3-d), float16
(a graph cut in the half path), a float argument at its inverse (a scale factor of 2 at
0.5), and a setting the case's shapes do not fit at shapes that fit it (repair).  Each is a
handful of points, not a search (edge_points); `--explore` searches the rest (one sign,
ties, rescaled values, every size).

One row per kind of edge (`edges/empty`, `edges/zero[0]`, ...), with pointjudge's verdicts: a
wrong value fails, a likely but uncertain failure warns (pointjudge.UNCERTAIN), points the
reference refuses, is not finite or ill-conditioned at, or forward refuses, are not judged.
Without a reference, only the points whose outputs are all empty are judged (the gradient is
zero there: pointjudge.empty_output); none such, a declared skip.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import materialize
from gradlab.checks.diagnosis import policy
from gradlab.checks.families.codefacts import NO_FACTS, CodeFacts, code_facts, threshold_values
from gradlab.checks.families.domain import magnitudes, reference_scale
from gradlab.checks.families.explore import float_axes, spec_case
from gradlab.checks.families.flags import same_reference
from gradlab.checks.families.inputspace import (
    SEED,
    Point,
    base_point,
    flag_axes,
    int_axes,
    one_more,
    rank_axis,
    shared_dims,
    size_dims,
    tuple_axes,
    zero_allowed,
)
from gradlab.checks.families.pointjudge import Outcome, judge
from gradlab.checks.families.repair import backward_only, refused_setting, repaired
from gradlab.checks.families.sizes import component_sizes
from gradlab.checks.numeric.context import CaseContext
from gradlab.checks.numeric.execute import Run, requiring_grad, run_once
from gradlab.model import Case, TensorArg
from gradlab.results import PASS, SKIP, Finding

#: The kinds of edge judged without a reference (where every output is empty, the gradient
#: is zero: pointjudge.empty_output).
ORACLE_KINDS = ("empty", "int_zero")
#: Float arguments below this in magnitude are epsilons and tolerances (1e-5 in a norm's
#: rstd, 1e-8 in a division): the edges keep them at the case's value.
EPSILON = 1e-3
#: The dtype every edge point is judged in (explore's, pointjudge.judge).
JUDGED = "float64"
#: A verdict's hint and what it ranks (the worst point of a kind is the row's).
HINTS = {"wrong": "edge_wrong", "raises": "edge_raises", "empty": "edge_empty",
         "domain": "edge_domain", "reshaped": "edge_reshaped", "broadcast": "edge_broadcast",
         "scale": "edge_scale", "negative": "edge_negative", "unread": "edge_unread"}
RANK = {"wrong": 0, "raises": 1, "empty": 2, "domain": 3, "reshaped": 4, "broadcast": 5,
        "scale": 6, "negative": 7, "unread": 8}


@dataclass(frozen=True)
class Edge:
    """One edge point: the row it belongs to (`empty`, `non_square`, `zero[0]`, ...)."""

    kind: str
    point: Point
    #: the kind whose points so far must all have passed for this one to be judged (a zero
    #: at one element says nothing new where a one-element input fails already)
    after: str = ""
    #: a simpler point shown instead where this one fails and it does too: zeros planted at
    #: a few places (the special variant's condition, a spec's `special: [0.0]`) before a
    #: whole input of zeros
    simpler: Point | None = None


def edge_points(case: Case, facts: CodeFacts = NO_FACTS) -> Iterator[Edge]:
    """The case's edge points, in row order (facts: what the Function's code says, the other
    settings of its string arguments and the thresholds it compares values with)."""
    base = base_point(case, threshold_values(facts.thresholds))
    for n in empty_sizes(case):
        yield Edge("empty", replace(base, sizes=tuple((m, 0 if m == n else m)
                                                      for m, _ in base.sizes)))
    if base.sizes:  # every size at 1: a one-element call (a squeeze that drops a dim), then
        # the same at 0 (a squeeze on a zero's path), where the first passes
        one = tuple((n, 1) for n, _ in base.sizes)
        yield Edge("one", replace(base, sizes=one))
        zeros = tuple((i, "zero") for i, _ in base.values)
        yield Edge("one", replace(base, sizes=one, values=zeros), after="one")
    for i, d, n in square_dims(case):
        # doubled, not one more: a 2x2 pooling of 5 rows still has as many output rows as
        # of 4 columns
        yield Edge("non_square", replace(base, dims=((i, d, 2 * n),)))
    if base.sizes:  # every size one past twice its own: a batch past a kernel's step or tile
        yield Edge("grown", replace(base, sizes=tuple((n, 2 * n + 1) for n, _ in base.sizes)))
    # each floating differentiable input all zero (one sign, ties and the rest are
    # `--explore`'s: a point per input each, for no certain catch in the bug catalogue, cost
    # the default check more than its 20%: bench_check.py --edges)
    for k, (i, _) in enumerate(base.values):
        yield Edge(f"zero[{i}]", _valued(base, k, "zero"), simpler=_valued(base, k, "zeros"))
    if base.planted:  # values either side of each threshold the code compares with, which
        # the case's own may never reach (a splat skipped below alpha 1/255)
        for k, (i, _) in enumerate(base.values):
            yield Edge(f"threshold[{i}]", _valued(base, k, "thresholds"))
    yield from _argument_points(case, base, facts)
    ones = batch_of_one(case)
    if ones:  # a batch of one (the case's [1, T, H]) at two: rows past the first
        yield Edge("batch", replace(base, dims=tuple((i, 0, 2) for i in ones)))
    ranked = rank_axis(case)
    if ranked:
        yield Edge("rank", replace(base, ranked=ranked))
        yield Edge("rank", replace(base, lead=ranked))  # a batch of the case's input


def _argument_points(case: Case, base: Point, facts: CodeFacts) -> Iterator[Edge]:
    """The edge points of the case's plain arguments: ints, floats, int tuples, flags, modes."""
    two = tuple((n, min(n, 2)) for n, _ in base.sizes)
    for i, n in int_axes(case):  # none (not a keyword's: zero_allowed), one more, one
        if zero_allowed(i):
            yield Edge(f"int_zero[{i}]", replace(base, ints=((i, 0),)))
            # ... and at -1: a dim counted from the end (softmax(x, -1)), a pad that crops
            yield Edge(f"int_negative[{i}]", replace(base, ints=((i, -1),)))
        yield Edge(f"int_more[{i}]", replace(base, ints=((i, n + 1),)))
        if n > 1:  # ... and at 1: a single mode, head or group (cal7's finufft: one mode)
            yield Edge(f"int_one[{i}]", replace(base, ints=((i, 1),)))
        if two != base.sizes:  # ... at the least sizes too, where its ratio to them is
            # largest (an output size of 9 over an input of 2, where the case's is 8 over 4)
            yield Edge(f"int_more[{i}]", replace(base, sizes=two, ints=((i, n + 1),)),
                       after=f"int_more[{i}]")
    for i, v in float_axes(case):  # a float at its inverse: a scale factor of 2 at 0.5
        # (downsampling), a threshold of 20 at 0.05 (inside the values' range); one the
        # reference does not read (a solver's tolerance) is not judged (flags.unread), and an
        # epsilon is not moved (at 1e5 a backward that leaves it out is wrong, for an eps no
        # caller passes: `--explore` moves it)
        if abs(v) >= EPSILON:
            yield Edge(f"float[{i}]", replace(base, ints=((i, 1 / v),)))
    for i, t in tuple_axes(case):  # a setting per dim made non-square: a dilation (2, 1)
        yield Edge(f"tuple[{i}]", replace(base, ints=((i, one_more(t)),)))
        # ... and empty: dims () is every dim to torch's reductions (a mean dividing by the
        # product of no sizes, pytorch 28993), judged only where forward agrees
        yield Edge(f"tuple_empty[{i}]", replace(base, ints=((i, type(t)()),)))
    for i in flag_axes(case):  # the switch's other setting (the bug catalogue's triton5660)
        yield Edge(f"flag[{i}]", replace(base, ints=((i, not case.args[i]),)))
    for i, settings in facts.choices:  # a mode's other settings ('sum' for 'mean')
        for s in settings:
            yield Edge(f"choice[{i}]", replace(base, ints=((i, s),)))


def batch_of_one(case: Case) -> list[int]:
    """The tensor arguments of two dims or more whose leading dim is 1, where the first such
    tensor argument's is (a batch of one, which no size axis grows: a dim of 1 is the case's
    choice); [] where the first tensor of two dims or more has another batch."""
    tensors = [(i, a) for i, a in enumerate(case.args)
               if isinstance(a, (TensorArg, Tensor)) and len(a.shape) > 1]
    if not tensors or tensors[0][1].shape[0] != 1:
        return []
    return [i for i, a in tensors if a.shape[0] == 1]


def _valued(base: Point, k: int, kind: str) -> Point:
    """`base` with its k-th value axis at `kind`."""
    values = list(base.values)
    values[k] = (values[k][0], kind)
    return replace(base, values=tuple(values))


def empty_sizes(case: Case) -> list[int]:
    """The sizes the empty points set to 0: the first tensor argument's leading dim (a batch,
    rows, points) and its last (features, a sequence), each with every dim of its size; two
    points at most, whatever the case's rank (the empty kind warns: a cheap look, not a
    search; `--explore` sets every size to 0)."""
    first = next((a for a in case.args if isinstance(a, (TensorArg, Tensor))
                  and len(a.shape) > 0), None)
    if first is None:
        return []
    parts = component_sizes(case.args)
    ends = [n for n in (first.shape[0], first.shape[-1]) if n > 1 and n not in parts]
    return list(dict.fromkeys(ends))


def square_dims(case: Case) -> list[tuple[int, int, int]]:
    """(argument, dim, size) of each dim whose size another dim of the same argument shares (a
    square image or matrix), the first such dim of each size and argument only: doubled, the
    argument is non-square and every other argument keeps agreeing."""
    out, seen = [], set()
    for i, d, n in shared_dims(case):
        a = case.args[i]
        if list(a.shape).count(n) > 1 and (i, n) not in seen:
            seen.add((i, n))
            out.append((i, d, n))
    return out


def edge_rows(ctx: CaseContext, want: Run | None = None) -> None:
    """The `edges` rows of a case (made in its first dtype's item, judged in float64): one
    per kind of edge point, then the float16 graph row.  want: the reference's run on the
    case's values (its magnitudes are what a change under a nudge is measured against).
    torch's warnings at these inputs (a variance of one element) are the probe's, not the
    user's: not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _edge_rows(ctx, want)


def _edge_rows(ctx: CaseContext, want: Run | None) -> None:
    op, case = ctx.op, ctx.case
    if ctx.options.variants is not True or ctx.target.variants is not None:
        return  # inputs other than the case's, as variants are: off, or narrowed to a list
    if ctx.dtype != first_dtype(ctx):
        return  # once per case
    if any(r.failed for r in ctx.rows):
        # only where the case and its variants all pass: a failure the variants show is theirs
        # to diagnose (an edge would repeat it, unexplained); said, so no one reads its absence
        # as a pass
        ctx.row("edges", "edges", SKIP, declared=True, reason="edges_after_failure",
                dtype=JUDGED)
        return
    tol = op.tolerance("float64")
    # the magnitudes of the reference's outputs and gradients on the case's values: the base
    # run's when it is at hand (one reference run less)
    floor = (magnitudes(want) if want is not None else
             reference_scale(op.reference, case, ctx.device) if op.reference else [])
    kinds: dict[str, list[tuple[Point, Outcome]]] = {}
    seconds: dict[str, float] = {}
    facts = code_facts(op.function, op.reference, case.args, case.kwargs)
    base_sizes = base_point(case).sizes

    def judged(p: Point) -> Outcome:
        return judge(op.function, op.reference, case, p, ctx.device, tol, floor)

    for e in edge_points(case, facts):
        if op.reference is None and not e.kind.startswith(ORACLE_KINDS):
            continue  # judged by the reference only
        if e.after and any(o.verdict in RANK for _, o in kinds.get(e.after, [])):
            continue
        t0 = time.perf_counter()
        point, out = e.point, judged(e.point)
        if e.kind.startswith("int_negative") and out.verdict in RANK:
            out = _negative(op.reference, case, point, out, ctx.device)
        elif e.kind.startswith("tuple_empty"):
            out = backward_only(out, "forward gives () another meaning")
        if (refused_setting(point, out) and point.sizes == base_sizes
                and not e.kind.startswith("int_negative")):  # -1: no dims fit a count
            # a setting the case's shapes do not fit (groups 2 beside a weight of every input
            # channel), at shapes that fit it
            point, out = repaired(judged, point, out, size_dims(case))
        if out.verdict in RANK and e.simpler is not None:  # judged only where it matters
            simpler = judged(e.simpler)
            if simpler.verdict in RANK:
                point, out = e.simpler, simpler
        kinds.setdefault(e.kind, []).append((point, out))
        seconds[e.kind] = seconds.get(e.kind, 0.0) + time.perf_counter() - t0
    made = [_kind_row(ctx, kind, outs, seconds[kind]) for kind, outs in kinds.items()]
    if op.reference is None:
        if not any(made):  # no point had an empty output, the only one judged without it
            ctx.row("edges", "edges", SKIP, declared=True, reason="edges_no_reference",
                    dtype=JUDGED)
        return
    half_row(ctx)


def _negative(ref: Any, case: Case, point: Point, out: Outcome, device: str) -> Outcome:
    """A failure at an int argument of -1: certain where -1 means to the reference what the
    case's own value does (a dim counted from the end: softmax(x, -1) on a [3, 4] input, as
    the case's dim 1), the same call written otherwise; else uncertain (`negative`: a lag or
    a count of -1 that Python's slicing lets through may be no call the Function is meant
    for), and not judged where forward already disagrees (-1 given a meaning of its own)."""
    out = backward_only(out, "forward gives -1 another meaning")
    if out.verdict == "unjudgeable" or same_reference(ref, case, point,
                                                      replace(point, ints=()), device):
        return out
    return Outcome("negative", out.note)


def first_dtype(ctx: CaseContext) -> str:
    """The first dtype a case runs in (its item makes the case's edges rows)."""
    return (ctx.options.dtypes or ctx.target.dtypes or ctx.op.dtypes)[0]


def _kind_row(ctx: CaseContext, kind: str, outs: list[tuple[Point, Outcome]],
              seconds: float) -> bool:
    """The row of one kind of edge; False where no point of it was judged (no row)."""
    failing = sorted((o for o in outs if o[1].verdict in RANK), key=lambda o: RANK[o[1].verdict])
    judged = [o for o in outs if o[1].verdict not in ("unjudgeable", "refused")]
    if not failing:
        if judged:  # else every point was refused by forward or not judgeable: no row
            ctx.row(kind, "edges", PASS, seconds=seconds, dtype=JUDGED)
        return bool(judged)
    point, out = failing[0]
    hint = HINTS[out.verdict]
    ctx.row(kind, "edges", policy.status("edges", hint, strict=ctx.options.strict),
            seconds=seconds, hint=hint, note=out.note, dtype=JUDGED,
            findings=[Finding("edge", -1, hint, want={**spec_case(ctx.case, point),
                                                      "name": f"edge_{kind}"})])
    return True


#: The low-precision dtype whose path the float16 row runs (autocast's on a GPU; torch runs it
#: on CPU too).
HALF = "float16"


def half_row(ctx: CaseContext) -> None:
    """`edges/float16`: the case in float16 must keep its graph (an output requires grad where
    an input does and the float64 run's output does); a Function that detaches its inputs on a
    half path (a dtype conversion through .detach()) silently trains nothing.  Forward refusing
    float16 is not judged (no row)."""
    t0 = time.perf_counter()
    fn = ctx.op.function
    try:
        inputs = materialize(ctx.case, HALF, ctx.device, SEED)
        if not inputs.diff_index:
            return
        got = requiring_grad(fn, inputs.args, inputs.kwargs, inputs.diff_index)
    except Exception:  # float16 refused: not judged
        return
    try:
        full = materialize(ctx.case, JUDGED, ctx.device, SEED)
        want = requiring_grad(fn, full.args, full.kwargs, full.diff_index)
    except Exception:
        want = []
    cut = [k for k, (g, f) in enumerate(zip(got, want, strict=False)) if f and not g]
    gen = torch.Generator().manual_seed(SEED)
    # the reference running in float16 makes it a dtype the op is meant for
    reference = ctx.op.reference
    ref = run_once(reference, inputs.clone(), None, gen) if cut and reference else None
    if cut and ref is not None and ref.error is None:
        ctx.row("float16", "edges", policy.wrong("edges"), seconds=time.perf_counter() - t0,
                hint="graph_cut", dtype=HALF,
                note=f"output {cut[0]} does not require grad in float16 (it does in float64)")
    else:
        ctx.row("float16", "edges", PASS, seconds=time.perf_counter() - t0, dtype=HALF)

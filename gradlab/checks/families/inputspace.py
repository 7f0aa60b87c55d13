"""The inputs `--explore` searches: the axes a case gives (each distinct size of its tensor
arguments, each floating differentiable input's kind of values), points in that space, and a
point made into a case and its inputs (gradlab.checks.families.explore runs them)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, materialize
from gradlab.checks.families.sizes import component_sizes, constant, grown_within
from gradlab.model import Case, TensorArg

#: The value kinds of a floating differentiable input (VALUES[kind] makes them from a draw).
VALUE_KINDS = ("drawn", "positive", "negative", "zeros", "zero", "ties", "tiny", "large")
#: ... and `thresholds`, where the Function's code compares values with some (value_kinds).
ALL_VALUE_KINDS = (*VALUE_KINDS, "thresholds")
#: The most elements one explored tensor may have: the search is for conditions, not sizes, and
#: a point must cost milliseconds (a dense float64 tensor of 4096 elements is 32 KB).
MAX_ELEMENTS = 4096
#: The scale of "tiny" and "large" inputs: where cancellations (1/x - 1/sin x) and overflows
#: (exp(x) at 1000 in float64 is inf) show in float64, the search's dtype.
TINY, LARGE = 1e-6, 1e3
#: Seed of the search (a run is reproducible) and of each point's values.
SEED = 2024
#: The relative spread of the values the `thresholds` kind plants about each (clear of the
#: threshold itself: codefacts.THRESHOLD_SIDE is 10x it).
JITTER = 1e-3
#: The share of axes a random combination moves away from the case's own value.
MOVE = 0.4


@dataclass(frozen=True)
class Point:
    """One explored input: each size axis' size ((case size, size): every dim of that size),
    single dims moved on their own ((argument, dim, size): a square image made non-square),
    and each value axis' kind."""

    sizes: tuple[tuple[int, int], ...]
    values: tuple[tuple[int, str], ...]
    dims: tuple[tuple[int, int, int], ...] = ()
    #: (argument, value) of each plain argument set whole (a position, or a keyword's name):
    #: an int moved (a count, a number of bins or repeats), a bool flipped, a string at
    #: another setting ('sum' for 'mean')
    ints: tuple[tuple[int | str, Any], ...] = ()
    #: arguments that gain a trailing dim of RANK_SIZE (a 4-d image where the case has 3-d)
    ranked: tuple[int, ...] = ()
    #: arguments that gain a leading dim of RANK_SIZE (a batch of the case's input: [2, 3, 4]
    #: where the case has [3, 4], as a layer norm over [batch, tokens, features] is called)
    lead: tuple[int, ...] = ()
    #: the values the `thresholds` kind plants (codefacts.threshold_values: either side of
    #: each threshold the Function's code compares values with)
    planted: tuple[float, ...] = ()
    #: the draw of the value kinds' random choices (which side of a threshold, which zeros)
    draw: int = 0
    #: example index tensors whose every position is set to their smallest (a shrink's
    #: simpler positions: edges [[0], [0]] need one node where [[0], [1]] need two)
    lowered: tuple[int, ...] = ()
    #: ... or to their largest (an index past a clipped end kept where the block shrinks)
    raised: tuple[int, ...] = ()
    #: its dims were moved so that the reference accepts an int argument moved with them
    #: (groups=2 with a weight of half the input channels): coupled to it, not broadcast
    repaired: bool = False

    def moved_axes(self) -> int:
        return (sum(a != b for a, b in self.sizes) + len(self.dims) + len(self.ints)
                + len(self.ranked) + len(self.lead) + len(self.lowered) + len(self.raised)
                + sum(k != "drawn" for _, k in self.values))


#: The size of the dim a rank point appends.
RANK_SIZE = 2


def size_axes(case: Case) -> list[int]:
    """The case's distinct tensor sizes above 1, largest first (each one axis).  A dim of 1 is
    a broadcast or keepdim dim by the case's own choice (a [1] scale, a [1, 1] parameter):
    growing it changes what the argument means, not how large it is; so does growing a
    constant's components (sizes.component_sizes)."""
    shapes = [tuple(a.shape) for a in case.args if isinstance(a, (TensorArg, Tensor))]
    return sorted({n for s in shapes for n in s if n > 1} - component_sizes(case.args),
                  reverse=True)


def size_dims(case: Case) -> dict[int, list[tuple[int, int]]]:
    """Every (argument, dim) of each size axis, by size."""
    out: dict[int, list[tuple[int, int]]] = {}
    for i, a in enumerate(case.args):
        if isinstance(a, (TensorArg, Tensor)):
            for d, n in enumerate(tuple(a.shape)):
                out.setdefault(n, []).append((i, d))
    return out


def int_axes(case: Case) -> list[tuple[int | str, int]]:
    """(position or keyword, value) of every plain positive int argument (not a bool): a
    count, a number of bins, repeats, groups or ranks, each its own axis."""
    return [(k, a) for k, a in _named(case)
            if isinstance(a, int) and not isinstance(a, bool) and a > 0]


def tuple_axes(case: Case) -> list[tuple[int | str, tuple[int, ...] | list[int]]]:
    """(position or keyword, value) of every tuple or list of plain ints (a kernel size,
    strides, dilations, padding per dim): each element a setting of its own."""
    return [(k, a) for k, a in _named(case) if isinstance(a, (tuple, list)) and a
            and all(isinstance(v, int) and not isinstance(v, bool) for v in a)]


def tuple_values(t: tuple[int, ...] | list[int], zero: bool = True) -> list[Any]:
    """t with one element at a time moved to int_values' settings (a dilation (2, 1) where the
    case has (1, 1)), in t's own type (zero: int_values' 0 too)."""
    return [type(t)([*t[:k], v, *t[k + 1:]]) for k in range(len(t))
            for v in int_values(t[k], zero)]


def one_more(t: tuple[int, ...] | list[int]) -> Any:
    """t with its first element one more: a square setting made non-square ((2, 1) for
    (1, 1)), in t's own type."""
    return type(t)([t[0] + 1, *t[1:]])


def _named(case: Case) -> list[tuple[int | str, Any]]:
    return [*enumerate(case.args), *case.kwargs.items()]


def index_args(case: Case) -> tuple[int, ...]:
    """The example integer tensors of more than one value (an index: positions), whose
    positions a shrink may set to their smallest or largest (Point.lowered, Point.raised)."""
    return tuple(i for i, a in enumerate(case.args)
                 if isinstance(a, Tensor) and a.numel() > 1 and a.dtype != torch.bool
                 and not (a.is_floating_point() or a.is_complex())
                 and bool((a != a.min()).any()))


def flag_axes(case: Case) -> list[int]:
    """The position of every bool argument (causal, normalize, keepdim): a switch whose other
    setting a caller passes as readily, where the case checks only one."""
    return [i for i, a in enumerate(case.args) if isinstance(a, bool)]


def int_values(n: int, zero: bool = True) -> list[int]:
    """The values an int axis takes: none (where `zero`: zero_allowed), one, one more."""
    return sorted({0, 1, n + 1} - {n} - (set() if zero else {0}))


def zero_allowed(key: int | str) -> bool:
    """Whether an int argument (or a tuple's element) may be set to 0: a positional one, not a
    keyword's.  A keyword int is configuration (a block or chunk size), where 0 can mean a loop
    that never ends (torch-semiring-einsum's block_size=0 allocates until memory runs out)."""
    return isinstance(key, int)


def rank_axis(case: Case) -> tuple[int, ...]:
    """The argument of the highest rank (2 or more), when one alone has it: the tensor whose
    trailing dims a caller extends (a 3-d [N, C, L] input fed as 4-d [N, C, H, W])."""
    ranks = [(len(a.shape), i) for i, a in enumerate(case.args)
             if isinstance(a, (TensorArg, Tensor)) and _resizable(a)]
    if not ranks:
        return ()
    top = max(r for r, _ in ranks)
    tops = [i for r, i in ranks if r == top]
    return tuple(tops) if top >= 2 and len(tops) == 1 else ()


def shared_dims(case: Case) -> list[tuple[int, int, int]]:
    """(argument, dim, size) of every dim whose size another dim shares: each also moves on its
    own (where the sizes must agree the reference refuses it, a point not judgeable)."""
    parts = component_sizes(case.args)  # a constant's components stay as they are
    dims = [(i, d, n) for i, a in enumerate(case.args) if isinstance(a, (TensorArg, Tensor))
            for d, n in enumerate(tuple(a.shape)) if n > 1 and n not in parts]
    count: dict[int, int] = {}
    for _, _, n in dims:
        count[n] = count.get(n, 0) + 1
    return [t for t in dims if count[t[2]] > 1]


def size_values(n: int) -> list[int]:
    """The sizes axis n takes: empty, one, two, odd sizes around n and past a tile."""
    return sorted({0, 1, 2, 3, max(n - 1, 1), n + 1, 2 * n + 1, 17, 33} - {n})



def value_axes(case: Case, constants: bool = False) -> list[int]:
    """Positions of the floating arguments that require grad (the ones with value kinds), and
    with `constants` the floating example tensors that do not (sizes.constant: `--explore`
    moves their values too, where a failure is only likely: moved_constants)."""
    out = []
    for i, a in enumerate(case.args):
        if isinstance(a, TensorArg):
            floating = a.dtype is None or a.dtype.startswith(("float", "bfloat"))
            if floating and a.requires_grad and a.values is None:
                out.append(i)
        elif isinstance(a, Tensor) and a.is_floating_point() and (
                a.requires_grad or (constants and constant(a))):
            out.append(i)
    return out


def moved_constants(case: Case, point: Point) -> bool:
    """The point moves a constant's values (soft targets, boxes, poses) off the case's own:
    values gradlab made up for data the Function may be conditioned on (sizes.constant)."""
    return any(kind != "drawn" and constant(case.args[i]) for i, kind in point.values)


def base_point(case: Case, planted: tuple[float, ...] = (), constants: bool = False) -> Point:
    return Point(tuple((n, n) for n in size_axes(case)),
                 tuple((i, "drawn") for i in value_axes(case, constants)), planted=planted)


def value_kinds(point: Point) -> tuple[str, ...]:
    """The value kinds a point's value axes take: VALUE_KINDS, and `thresholds` where the
    Function's code compares values with some (point.planted)."""
    return ALL_VALUE_KINDS if point.planted else VALUE_KINDS


def one_at_a_time(base: Point, shared: Sequence[tuple[int, int, int]] = (),
                  plain: Sequence[tuple[int | str, Sequence[Any]]] = (),
                  ranked: tuple[int, ...] = ()) -> Iterator[Point]:
    """Each axis alone at each of its values, the rest as the case has them: the size axes,
    each shared dim on its own (one more, empty), the value axes, the int arguments, a rank
    more.  plain: each plain argument's position and the values it takes."""
    for k, (n, _) in enumerate(base.sizes):
        for m in size_values(n):
            sizes = list(base.sizes)
            sizes[k] = (n, m)
            yield replace(base, sizes=tuple(sizes))
    for i, d, n in shared:
        for m in (n + 1, 1, 0):  # non-square, broadcast against the others, empty
            yield replace(base, dims=((i, d, m),))
    for k, (i, _) in enumerate(base.values):
        for kind in value_kinds(base)[1:]:
            values = list(base.values)
            values[k] = (i, kind)
            yield replace(base, values=tuple(values))
    for i, settings in plain:
        for m in settings:
            yield replace(base, ints=((i, m),))
    if ranked:
        yield replace(base, ranked=ranked)
        yield replace(base, lead=ranked)


def combinations(base: Point, rng: random.Random,
                 shared: Sequence[tuple[int, int, int]] = (),
                 plain: Sequence[tuple[int | str, Sequence[Any]]] = ()) -> Iterator[Point]:
    """Seeded random points, each moving about MOVE of the axes (and, one time in three, one
    shared dim on its own)."""
    kinds = value_kinds(base)
    while True:
        sizes = tuple((n, rng.choice(size_values(n)) if rng.random() < MOVE else n)
                      for n, _ in base.sizes)
        values = tuple((i, rng.choice(kinds) if rng.random() < MOVE else "drawn")
                       for i, _ in base.values)
        dims: tuple[tuple[int, int, int], ...] = ()
        if shared and rng.random() < 1 / 3:
            i, d, n = rng.choice(list(shared))
            dims = ((i, d, rng.choice((n + 1, 2 * n + 1, 1, 0))),)
        moved = tuple((i, rng.choice(list(settings))) for i, settings in plain
                      if rng.random() < MOVE)
        yield Point(sizes, values, dims, moved, planted=base.planted)


def resized(case: Case, point: Point) -> Case | None:
    """`case` at the point's sizes (every dim of a size axis in every argument), or None when a
    tensor would pass MAX_ELEMENTS or one that cannot change size would have to: given values,
    or an example index tensor (its values mean positions), unless it is made empty."""
    size = dict(point.sizes)
    own = {(i, d): m for i, d, m in point.dims}
    ints = dict(point.ints)
    args: list[Any] = []
    for i, a in enumerate(case.args):
        if i in ints:
            a = ints[i]
        elif isinstance(a, (TensorArg, Tensor)):
            shape = tuple(own.get((i, d), size.get(n, n)) for d, n in enumerate(a.shape))
            shape = ((RANK_SIZE,) * (i in point.lead) + shape
                     + (RANK_SIZE,) * (i in point.ranked))
            # an empty tensor holds no values: any argument may be one (a recorded call's
            # fixed values, an index's positions), which is how edges judge recorded specs
            empty = 0 in shape and shape != tuple(a.shape)
            if math.prod(shape) > MAX_ELEMENTS or not (empty or _may_take(a, shape)):
                return None
            b = (replace(a, shape=shape, strides=None, values=None if empty else a.values,
                         layout="contiguous" if a.layout == "strided" else a.layout)
                 if isinstance(a, TensorArg) else _reshaped(a, shape, i in point.lead))
            if isinstance(b, Tensor) and b.numel() and i in (*point.lowered, *point.raised):
                # the case's own extreme position, whichever block of it is kept
                b = torch.full_like(b, int(a.min() if i in point.lowered else a.max()))
            a = b
        args.append(a)
    kwargs = {**case.kwargs, **{k: v for k, v in point.ints if isinstance(k, str)}}
    return replace(case, args=tuple(args), kwargs=kwargs)


def _resizable(a: TensorArg | Tensor) -> bool:
    """Drawn spec tensors are (any dtype: an index's range stays its own), an example tensor
    only when floating (grown within its values)."""
    if isinstance(a, TensorArg):
        return a.values is None
    return a.is_floating_point() or a.is_complex()


def _may_take(a: TensorArg | Tensor, shape: tuple[int, ...]) -> bool:
    """Whether `a` may be made `shape`: its own shape; any shape when resizable; an example
    tensor of other values (an index: positions) only its leading block, at its rank (a
    shorter list of positions stays a list of valid positions)."""
    own = tuple(a.shape)
    if shape == own or _resizable(a):
        return True
    return (isinstance(a, Tensor) and len(shape) == len(own)
            and all(m <= n for m, n in zip(shape, own, strict=True)))


def _reshaped(a: Tensor, shape: tuple[int, ...], lead: bool = False) -> Tensor:
    """An API example tensor at `shape` (a floating one: _resizable): its leading block, grown
    within its value range (lead: its new dim is the first, a batch of it)."""
    if tuple(a.shape) == shape:
        return a
    grad = a.requires_grad
    if len(shape) > a.dim():  # a rank point: the tensor is the first slice of the new dims
        ones = (1,) * (len(shape) - a.dim())
        a = a.detach().reshape(*ones, *a.shape) if lead else a.detach().reshape(*a.shape, *ones)
    lead = a.detach()[tuple(slice(0, min(n, m)) for n, m in zip(a.shape, shape, strict=True))]
    # grown as what it is: a differentiable input's new elements drawn, a constant's rows
    # repeated (sizes.constant asks requires_grad, which the detached block lost)
    t = lead.clone() if tuple(lead.shape) == shape or lead.numel() == 0 else grown_within(
        lead.clone().requires_grad_(grad and (lead.is_floating_point() or lead.is_complex())),
        shape)
    if t.numel() == 0 and tuple(t.shape) != shape:
        t = torch.zeros(shape, dtype=a.dtype)
    return t.requires_grad_(grad)


def with_values(inputs: Inputs, point: Point) -> Inputs:
    """The inputs with each value axis' kind applied (seeded, by the point's draw)."""
    gen = torch.Generator().manual_seed(SEED + point.draw)
    for i, kind in point.values:
        t = inputs.args[i]
        if kind == "drawn" or not isinstance(t, Tensor) or t.numel() == 0:
            continue
        x = t.detach().clone()
        if kind == "positive":
            x = x.abs()
        elif kind == "negative":
            x = -x.abs()
        elif kind == "zeros":  # a quarter of the elements, the first always (one-element too)
            planted = torch.rand(x.numel(), generator=gen) < 0.25
            planted[0] = True
            x.view(-1)[planted] = 0
        elif kind == "zero":  # every element: a zero rotation, an all-zero mask
            x = torch.zeros_like(x)
        elif kind == "thresholds":  # every element beside a threshold the code compares
            # with, on a seeded random side, at a jittered distance (no two alike: no ties):
            # the case's own values mostly lie on one side, so every pattern of sides shows
            pick = torch.randint(len(point.planted), (x.numel(),), generator=gen)
            jitter = 1 + JITTER * torch.rand(x.numel(), generator=gen, dtype=torch.float64)
            planted = torch.tensor(point.planted, dtype=torch.float64)[pick]
            x.view(-1)[:] = (planted * jitter).to(x.dtype)
        elif kind == "ties":
            flat = x.reshape(-1)
            flat[1::2] = flat[0::2][: flat[1::2].numel()]
            x = flat.reshape(x.shape)
        else:
            x = x * (TINY if kind == "tiny" else LARGE)
        inputs.args[i] = copy_like(x, requires_grad=t.requires_grad)  # a constant stays one
    return inputs


def outside(case: Case, point: Point, device: str) -> bool:
    """Some moved value axis holds values in a region the case's own values of that argument
    never reach: 0 where they are all of one sign, a sign they never take (magnitudes are the
    rescaled kinds' concern: pointjudge.RESCALED)."""
    moved = [(i, kind) for i, kind in point.values if kind in REGION_KINDS]
    if not moved:
        return False
    try:
        own = materialize(case, "float64", device, SEED)
    except Exception:
        return False
    for i, kind in moved:
        a = own.args[i]
        if isinstance(a, Tensor) and a.numel() and not a.is_complex():
            lo, hi = float(a.detach().min()), float(a.detach().max())
            if not REGION_KINDS[kind](lo, hi):
                return True
    return False


#: The value kinds that move values to a region, and whether a case's values spanning lo..hi
#: reach it.
REGION_KINDS = {"zero": lambda lo, hi: lo <= 0 <= hi, "zeros": lambda lo, hi: lo <= 0 <= hi,
                "negative": lambda lo, hi: lo < 0, "positive": lambda lo, hi: hi > 0}



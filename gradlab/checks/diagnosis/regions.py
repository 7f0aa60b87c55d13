"""Where the wrong elements lie in an input's values: one sign, zero, a range of values, a band
of magnitudes, near-ties.  (patterns.py finds where they lie by position.)

A gradient or output that is wrong only for negative inputs, only at 0, only above a clamp's
threshold or only where two values tie has a cause those values name: a branch on the sign, a
derivative's convention at 0, a threshold, how ties share a gradient.  The region is looked for
in every input laid out as the wrong tensor (the same shape, or broadcast to it), and named only
when it holds every wrong element, is mostly wrong itself and is not there by chance; the words
give both shares ("100% of the wrong elements, 3% of the right ones").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gradlab.checks.diagnosis.hints import MAX_CHANCE, MIN_ELEMENTS
from gradlab.results import Pattern

#: Two values tie when they differ by at most this relative to the tensor's largest magnitude:
#: the ties variant pairs values exactly, and a float32 value and its float64 twin differ by
#: float32's unit (1.2e-7), under this; random float64 values of 1e4 elements sit ~1e-4 apart.
#: Pins: test_regions.py's test_value_regions_unit (exact ties named) and
#: test_scattered_wrong_elements_name_no_region (random values: no ties).
TIE_RELATIVE = 1e-6


#: A region of an input's values (regions.py) is named only when at least this share of it is
#: wrong: it says "wrong only where ...", so most of where it says must be wrong (a sign bug
#: fills its half wholly; a right element inside is one whose gradient happens to agree).
#: Pins: test_regions.py's sign bug (every negative wrong) and its twin with scattered wrong
#: elements (a fitted band of them is mostly right: no region).
REGION_DENSITY = 0.5


def region_holds(wrong: int, region: int, numel: int, *, fitted: bool = False) -> bool:
    """`wrong` elements, all in a region of an input's values of `region` of `numel`, fill it
    (REGION_DENSITY) beyond chance (MAX_CHANCE).  A region fitted to the wrong values' own
    bounds (fitted) is judged by the chance that k random elements span a share f of the
    values at most, k * f**(k - 1), not f**k."""
    f = region / numel
    chance = (math.log(wrong) + (wrong - 1) * math.log(f)) if fitted else wrong * math.log(f)
    return wrong >= REGION_DENSITY * region and wrong > 1 and chance <= math.log(MAX_CHANCE)


def value_region(mask: Tensor, inputs: Sequence[Any]) -> Pattern | None:
    """The region of one input's values that holds every wrong element of `mask` with the
    fewest right ones, or None.  inputs: a case's positional arguments; every floating tensor
    among them that broadcasts to the mask's shape is looked at (the first of equals named)."""
    m = mask.detach().cpu().numpy().astype(bool).reshape(-1)
    wrong = int(m.sum())
    if m.size < MIN_ELEMENTS or wrong == 0 or wrong == m.size:
        return None
    best: Pattern | None = None
    for j, a in enumerate(inputs):
        x = laid_out(a, tuple(mask.shape))
        if x is None:
            continue
        for kind, region, lo, hi in candidates(x, m):
            size = int(region.sum())
            if int((region & m).sum()) < wrong or size == m.size or not region_holds(
                    wrong, size, m.size, fitted=kind in FITTED):
                continue
            right_in = (size - wrong) / (m.size - wrong)
            if best is None or right_in < (best.right_share or 0.0):
                best = Pattern(kind, dims=(), start=0, stop=0, input=j, lo=lo, hi=hi,
                               wrong_share=1.0, right_share=right_in)
    return best


#: The regions fitted to the wrong elements (their bounds are the wrong values' own): chance
#: is judged one element less strictly for them (hints.region_holds).
FITTED = frozenset({"range", "band"})


def laid_out(a: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """An input's values as the wrong tensor's elements (flattened), when it is a finite
    floating tensor that broadcasts to `shape`; else None."""
    if not isinstance(a, Tensor) or not a.is_floating_point() or a.is_complex():
        return None
    if a.numel() < 2 or len(shape) < a.dim():
        return None
    try:
        t = a.detach().expand(shape)
    except RuntimeError:
        return None
    x = t.to("cpu", torch.float64).contiguous().numpy().reshape(-1)
    return x if bool(np.isfinite(x).all()) else None


def candidates(x: np.ndarray, m: np.ndarray) -> Iterator[tuple[str, np.ndarray, float | None,
                                                            float | None]]:
    """(kind, region mask, lo, hi) in the order they are named: the exact regions (zero, one
    sign, near-ties) before the fitted ones (a range of values, a band of magnitudes)."""
    yield "zero", x == 0, None, None
    yield "negative", x < 0, None, None
    yield "positive", x > 0, None, None
    yield "ties", tied(x, m.size), None, None
    w = x[m]
    lo, hi = float(w.min()), float(w.max())
    yield "range", (x >= lo) & (x <= hi), *open_ends(lo, hi, x)
    a = np.abs(x)
    alo, ahi = float(np.abs(w).min()), float(np.abs(w).max())
    yield "band", (a >= alo) & (a <= ahi), *open_ends(alo, ahi, a)


def open_ends(lo: float, hi: float, x: np.ndarray) -> tuple[float | None, float | None]:
    """A fitted region's bounds, an end at the values' own extreme left open (None): a range
    up to the largest value is "x >= lo", which is what a threshold bug reads as."""
    return (None if lo <= float(x.min()) else lo), (None if hi >= float(x.max()) else hi)


def tied(x: np.ndarray, n: int) -> np.ndarray:
    """Elements with another element of the tensor within TIE_RELATIVE of its largest
    magnitude (neighbours once sorted): a tie within a row or a window is one of these."""
    out = np.zeros(n, dtype=bool)
    order = np.argsort(x, kind="stable")
    s = x[order]
    scale = max(float(np.abs(s).max()), np.finfo(np.float64).tiny)
    close = np.abs(np.diff(s)) <= TIE_RELATIVE * scale
    near = np.zeros(n, dtype=bool)
    near[:-1] |= close
    near[1:] |= close
    out[order] = near
    return out

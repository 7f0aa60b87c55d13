"""Where the wrong elements of a tensor lie, when they form a pattern that names a cause.

- a band along the borders of the last two dims, or at both ends of one dim (a 1-d signal's
  edges, one spatial dim's padding): padding or boundary handling;
- the last partial tile along a dim (indices from a multiple of 8 on): a launch grid of
  `n // BLOCK` instead of `cdiv(n, BLOCK)`, or a loop that drops the remainder;
- one contiguous range of one dim (a channel group on dim 1): an index or group offset.

Only confined patterns count: every wrong element inside the region and most of the region
wrong would be too strict (a wrong gradient can be right by accident), so the region only has
to hold all the wrong elements and be a proper part of the tensor.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gradlab.checks.diagnosis.hints import BORDER_FRACTION, MIN_ELEMENTS, TILES, pattern_holds
from gradlab.results import Pattern

#: The thresholds that decide when a region is a pattern (TILES, BORDER_FRACTION, MIN_ELEMENTS,
#: MIN_DENSITY, MAX_CHANCE) and the hint each pattern gives are gradlab.checks.diagnosis.hints'.


def border(mask: Tensor) -> Pattern | None:
    """All wrong elements within k of the borders of the last two dims (k small)."""
    if mask.dim() < 2:
        return None
    h, w = mask.shape[-2], mask.shape[-1]
    if min(h, w) < 5:
        return None
    i = torch.arange(h).view(h, 1)
    j = torch.arange(w).view(1, w)
    dist = torch.minimum(torch.minimum(i, h - 1 - i), torch.minimum(j, w - 1 - j))
    dist = dist.expand(mask.shape)
    k = int(dist[mask].max()) + 1
    if k > max(1, int(BORDER_FRACTION * min(h, w))):
        return None
    # a band along the top or bottom only is a range of one dim (a slice names it exactly): a
    # border band has wrong elements beside the borders of both dims, outside the corners
    in_rows = (torch.minimum(i, h - 1 - i) < k).expand(mask.shape)
    in_cols = (torch.minimum(j, w - 1 - j) < k).expand(mask.shape)
    if not (bool((mask & in_rows & ~in_cols).any()) and bool((mask & in_cols & ~in_rows).any())):
        return None
    return Pattern("border", dims=(mask.dim() - 2, mask.dim() - 1), start=0, stop=k)


def edges(mask: Tensor) -> Pattern | None:
    """All wrong elements within k of both ends of one dim (k small), some at each end: the
    border of one spatial dim (a 1-d signal's padding, a filter's boundary extension)."""
    for dim in reversed(range(mask.dim())):
        n = mask.shape[dim]
        if n < 5:
            continue
        hit = mask.movedim(dim, 0).reshape(n, -1).any(1)
        idx = torch.nonzero(hit).flatten()
        dist = torch.minimum(idx, n - 1 - idx)
        k = int(dist.max()) + 1
        if k <= max(1, int(BORDER_FRACTION * n)) and int(idx[0]) < k and int(idx[-1]) >= n - k:
            return Pattern("edges", dims=(dim,), start=0, stop=k)
    return None


def _range(mask: Tensor, dim: int) -> tuple[int, int]:
    """[first, last + 1) of the indices along `dim` holding a wrong element."""
    hit = mask.movedim(dim, 0).reshape(mask.shape[dim], -1).any(1)
    idx = torch.nonzero(hit).flatten()
    return int(idx[0]), int(idx[-1]) + 1


def tail_or_slice(mask: Tensor) -> Pattern | None:
    """All wrong elements in the last partial tile along one dim, or in one proper range."""
    for dim in range(mask.dim()):
        n = mask.shape[dim]
        if n < 2:
            continue
        first, stop = _range(mask, dim)
        if first == 0 and stop == n:
            continue
        tile = tail_tile(n, first) if stop == n else 0
        if tile:
            return Pattern("tail", dims=(dim,), start=first, stop=n, tile=tile)
        return Pattern("slice", dims=(dim,), start=first, stop=stop)
    return None


def tail_tile(n: int, first: int) -> int:
    """The largest tile whose last partial tile along a dim of n starts exactly at `first`
    (first == n - n % tile), or 0.  Exactly, not "at or before": wrong elements 24..29 of 30
    are the partial tile of 8s, not of 16s (which would start at 16)."""
    for tile in TILES:
        if n > tile and n % tile and first == n - n % tile:
            return tile
    return 0


def find_pattern(mask: Tensor) -> Pattern | None:
    """The pattern the wrong elements (`mask`, shaped as the tensor) form, if any, when they
    fill enough of it and are not there by chance (hints.pattern_holds)."""
    if mask.numel() < MIN_ELEMENTS or not bool(mask.any()) or bool(mask.all()):
        return None
    p = border(mask) or edges(mask) or tail_or_slice(mask)
    if p is None:
        return None
    return p if pattern_holds(int(mask.sum()), region_size(p, mask.shape), mask.numel()) else None


def region_size(p: Pattern, shape: torch.Size) -> int:
    """How many elements of a tensor of `shape` the pattern's region holds."""
    total = math.prod(shape)
    if p.kind == "edges":
        return total // shape[p.dims[0]] * min(2 * p.stop, shape[p.dims[0]])
    if p.kind != "border":
        return total // shape[p.dims[0]] * (p.stop - p.start)
    h, w = shape[p.dims[0]], shape[p.dims[1]]
    inner = max(h - 2 * p.stop, 0) * max(w - 2 * p.stop, 0)
    return total // (h * w) * (h * w - inner)

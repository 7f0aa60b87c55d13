"""Where the wrong elements of a tensor lie, when they form a pattern that names a cause.

- a band along the borders of the last two dims: padding or boundary handling;
- the last partial tile along a dim (indices from a multiple of 8 on): a launch grid of
  `n // BLOCK` instead of `cdiv(n, BLOCK)`, or a loop that drops the remainder;
- one contiguous range of one dim (a channel group on dim 1): an index or group offset.

Only confined patterns count: every wrong element inside the region and most of the region
wrong would be too strict (a wrong gradient can be right by accident), so the region only has
to hold all the wrong elements and be a proper part of the tensor.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gradlab.results import Pattern

#: Tile sizes a partial last tile is looked for with, largest first.
TILES = (256, 128, 64, 32, 16, 8)
#: A border band is named only when it is at most this fraction of the smaller side.
BORDER_FRACTION = 0.25
#: Below this many elements a "pattern" is as likely to be chance.
MIN_ELEMENTS = 16


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
    return Pattern("border", dims=(mask.dim() - 2, mask.dim() - 1), start=0, stop=k)


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
        if stop == n:
            for tile in TILES:
                if n % tile and first >= n - n % tile and n > tile:
                    return Pattern("tail", dims=(dim,), start=n - n % tile, stop=n, tile=tile)
        return Pattern("slice", dims=(dim,), start=first, stop=stop)
    return None


def find_pattern(mask: Tensor) -> Pattern | None:
    """The pattern the wrong elements (`mask`, shaped as the tensor) form, if any."""
    if mask.numel() < MIN_ELEMENTS or not bool(mask.any()) or bool(mask.all()):
        return None
    return border(mask) or tail_or_slice(mask)

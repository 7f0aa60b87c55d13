"""A wrong gradient's elementwise error as a small 2-D map, so a plot shows its pattern (a border
band, a tail tile, one channel) at a glance."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gradlab.results import ERROR_MAP_SIDE


def error_map(got: Tensor, want: Tensor, side: int = ERROR_MAP_SIDE) -> Any:
    """|got - want| as a float32 numpy array of at most `side` x `side`.

    The last two dims are kept (a 1-D gradient becomes one row); leading dims (batch,
    channels) are reduced by their maximum, and a larger map is max-pooled down to `side`,
    so a single wrong element still shows.  Where got is NaN or inf but want is finite, the
    map holds inf.
    """
    g = got.detach().to("cpu", torch.float64)
    w = want.detach().to("cpu", torch.float64)
    err = torch.nan_to_num((g - w).abs(), nan=0.0)
    err = torch.where(~torch.isfinite(g) & torch.isfinite(w), float("inf"), err)
    if err.dim() < 2:
        err = err.reshape(1, -1)
    elif err.dim() > 2:
        err = err.reshape(-1, *err.shape[-2:]).amax(dim=0)
    h, w_ = err.shape
    if h > side or w_ > side:
        # inf survives max pooling, which is what marks a non-finite element
        err = F.adaptive_max_pool2d(err[None, None], (min(h, side), min(w_, side)))[0, 0]
    return err.to(torch.float32).numpy()

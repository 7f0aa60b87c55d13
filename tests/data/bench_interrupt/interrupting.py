"""A Function that a user stops with Ctrl-C once a bench has taken some samples.

Each call sleeps 2 ms, so every timed block is one call (timing.BLOCK_TIME is 1 ms) and the
sampling rounds are counted in calls: the calls made while sampling (from
timing.sample_interleaved, not in warm-up) are counted, and the STOP_AT-th raises
KeyboardInterrupt, as Ctrl-C would there.  Four calls a round (forward, forward_grad, the
backward phase's graph, forward_backward): the 9th is in round 3, after two whole rounds.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

STOP_AT = 9
CALL_S = 0.002
_sampled = [0]


def _sampling() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "sample_interleaved":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class SlowDouble(torch.autograd.Function):
    """2 x, slowly."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        if _sampling():
            _sampled[0] += 1
            if _sampled[0] == STOP_AT:
                raise KeyboardInterrupt
        time.sleep(CALL_S)
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(CALL_S)  # a backward block is one call too
        return grad * 2


def reference(x: torch.Tensor) -> torch.Tensor:
    time.sleep(CALL_S)
    return x * 2

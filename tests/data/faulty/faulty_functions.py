"""Functions that take their process down or never return, and a correct op to follow each.

Only an isolated run (a worker process per run, replaced when it dies) survives these: the
spec beside this file is run with `--timeout` in tests/test_isolation.py.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function


class Double(Function):
    """Correct: y = 2x."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


def double_reference(x: Tensor) -> Tensor:
    return x * 2


class _Broken(Function):
    """y = 2x with a backward that does `self.fault()` first."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2


def _with_backward(name: str, fault: Any) -> type[Function]:
    def backward(ctx: Any, g: Tensor) -> Tensor:
        fault()
        return g * 2

    return type(name, (_Broken,), {"backward": staticmethod(backward),
                                   "__module__": __name__})


def _raise() -> None:
    raise RuntimeError("backward failed on purpose")


def _hang() -> None:
    while True:  # a hang gradlab can only stop from another process
        time.sleep(0.05)


def _segfault() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


Raises = _with_backward("Raises", _raise)
Hangs = _with_backward("Hangs", _hang)
Exits = _with_backward("Exits", lambda: os._exit(1))
SysExits = _with_backward("SysExits", lambda: sys.exit(5))
Segfaults = _with_backward("Segfaults", _segfault)


class NanForward(Function):
    """y = x * NaN."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * float("nan")

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


class ChangesState(Function):
    """y = 2x, but forward turns on anomaly detection for good."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        torch.autograd.set_detect_anomaly(True)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2

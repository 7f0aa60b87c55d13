"""Functions for the CLI tests of output paths and precise repro commands
(tests/test_cli_outputs_repro.py).

- square_sabotaging: a correct x**2 that, when GRADLAB_TEST_SABOTAGE names paths, makes a folder
  at each (os.pathsep-separated) while it runs: an output file checked writable before the run
  then cannot be written at its end, and the folder's presence also shows that a check ran.
- SquareContiguousOnly: BROKEN for inputs not laid out contiguously: backward reads the saved
  input's memory as if it were contiguous (as a kernel handed data_ptr() would), so the
  noncontiguous and transposed variants fail while the base case passes.
- Square: its correct twin.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

#: The environment variable square_sabotaging reads.
SABOTAGE = "GRADLAB_TEST_SABOTAGE"


def square_reference(x: Tensor) -> Tensor:
    return x * x


def square_sabotaging(x: Tensor) -> Tensor:
    """x * x, after turning each path in $GRADLAB_TEST_SABOTAGE into a folder."""
    for path in filter(None, os.environ.get(SABOTAGE, "").split(os.pathsep)):
        Path(path).mkdir(parents=True, exist_ok=True)
    return x * x


class SquareContiguousOnly(Function):
    """BROKEN: backward reads the input's storage with contiguous strides."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        strides, step = [], 1
        for n in reversed(x.shape):
            strides.insert(0, step)
            step *= n
        raw = x.as_strided(x.shape, strides)  # the layout the data is assumed to have
        return 2 * raw * g


class Square(Function):
    """Correct twin of SquareContiguousOnly."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


__all__ = ["SABOTAGE", "Square", "SquareContiguousOnly", "square_reference",
           "square_sabotaging", "torch"]

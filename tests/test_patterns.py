"""Pattern hints: wrong elements confined to a border band, the last partial tile of a dim, or
one range of one dim say so (with the numbers); scattered errors claim no pattern."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.checks.diagnosis.patterns import find_pattern
from gradlab.render.words import message
from gradlab.results import Pattern


def double_with(fault: Any) -> type[Function]:
    """y = 2x whose backward applies `fault` to the right gradient."""

    class Broken(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            gx = g * 2
            fault(gx)
            return gx

    return Broken


def halve_border(gx: Tensor) -> None:
    for sl in ((..., slice(0, 2), slice(None)), (..., slice(-2, None), slice(None)),
               (..., slice(None), slice(0, 2)), (..., slice(None), slice(-2, None))):
        gx[sl] *= 0.5


def drop_tail(gx: Tensor) -> None:
    n = gx.shape[-1]
    gx[..., (n // 16) * 16:] = 0  # a grid of n // 16 tiles of 16: the rest never written


def wrong_group(gx: Tensor) -> None:
    gx[:, 4:8] *= 3  # channels 4..7: the second of three groups of 4


def scattered(gx: Tensor) -> None:
    gx.view(-1)[::7] += 1


CASES = [(halve_border, (2, 3, 12, 12), "border_band", "within 2 of the borders of dims 2 and 3"),
         (drop_tail, (4, 37), "tail_tile", "indices 32..36 of dim 1"),
         (wrong_group, (2, 12, 5, 5), "index_range", "indices 4..7 of dim 1")]


@pytest.mark.parametrize(("fault", "shape", "hint", "words"), CASES,
                         ids=[c[2] for c in CASES])
def test_a_confined_error_names_its_pattern(fault: Any, shape: tuple[int, ...], hint: str,
                                            words: str) -> None:
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(double_with(fault), [x], reference=lambda x: x * 2)
    rows = [row for row in r.failures if row.check == "gradient" and row.variant == "base"]
    assert rows and rows[0].hint == hint, [(x.check, x.hint, message(x)) for x in r.failures]
    assert words in message(rows[0])


def test_scattered_errors_claim_no_pattern() -> None:
    x = torch.randn(3, 12, 12, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(double_with(scattered), [x], reference=lambda x: x * 2, variants=False)
    (row,) = [row for row in r.failures if row.check == "gradient"]
    assert row.findings[0].pattern is None and row.hint not in ("border_band", "tail_tile",
                                                                 "index_range")


def test_the_correct_twin_has_no_finding() -> None:
    x = torch.randn(2, 3, 12, 12, dtype=torch.float64, requires_grad=True)
    assert gradlab.check(double_with(lambda gx: None), [x], reference=lambda x: x * 2).passed


def test_pattern_edges() -> None:
    m = torch.zeros(10, 10, dtype=torch.bool)
    assert find_pattern(m) is None  # nothing wrong
    assert find_pattern(~m) is None  # everything wrong: no region
    m[4, 4] = True  # one interior element: in a range of each dim by chance, no pattern
    assert find_pattern(m) is None
    m[4, :] = True  # the whole row: a range of dim 0, not a border
    assert find_pattern(m) == Pattern("slice", dims=(0,), start=4, stop=5)
    m = torch.zeros(10, 10, dtype=torch.bool)
    m[0, 3] = m[9, 9] = True  # two elements near the borders: chance, no band
    assert find_pattern(m) is None
    m[0, :] = m[9, :] = m[:, 0] = m[:, 9] = True
    assert find_pattern(m) == Pattern("border", dims=(0, 1), start=0, stop=1)
    m = torch.zeros(10, 10, dtype=torch.bool)
    m[:2, :] = True  # along one side only: a range of dim 0, exactly
    assert find_pattern(m) == Pattern("slice", dims=(0,), start=0, stop=2)

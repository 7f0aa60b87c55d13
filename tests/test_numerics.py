"""Finite-difference noise is not a bug: large outputs must not raise false alarms."""

from typing import Any

import pytest
import torch
from torch import Tensor

import gradlab
from gradlab.render.words import message


class Offset(torch.autograd.Function):
    """1e6 + 1e-3 x: a small derivative under a large value (plain gradcheck flags this)."""

    factor = 1e-3

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return 1e6 + 1e-3 * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return Offset.factor * g


class OffsetWrong(Offset):
    """The same with a derivative 3x too large."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 3e-3 * g


def offset_ref(x: Tensor) -> Tensor:
    return 1e6 + 1e-3 * x


@pytest.mark.parametrize("mode", ["dense", "fast"])
def test_large_outputs_are_not_a_false_alarm(mode: str) -> None:
    x = torch.randn(6, 5, dtype=torch.float64)
    assert not torch.autograd.gradcheck(Offset.apply, (x.clone().requires_grad_(),),
                                        raise_exception=False)  # the noise gradlab absorbs
    report = gradlab.check(Offset, [x], reference=offset_ref, mode=mode, variants=False)
    assert report.passed, [(r.check, message(r)) for r in report.failures]


@pytest.mark.parametrize("mode", ["dense", "fast"])
def test_large_outputs_still_catch_a_wrong_derivative(mode: str) -> None:
    x = torch.randn(6, 5, dtype=torch.float64)
    report = gradlab.check(OffsetWrong, [x], reference=offset_ref, mode=mode, variants=False)
    flagged = {r.check for r in report.failures}
    # The reference comparison always sees it.  Finite differences resolve it only per element
    # (dense); a probe's rounding floor grows with ||f||, here 5e6, and swallows it: that is
    # the price of not raising the false alarm above.
    assert "gradient" in flagged
    assert ("jacobian" in flagged) == (mode == "dense")
    assert all(r.hint == "constant_factor" for r in report.failures if r.check == "gradient")


def test_bitwise_equal_tensors_pass_without_measuring_and_nan_still_fails_strictly() -> None:
    from gradlab.checks.diagnosis.diagnose import compare
    from gradlab.model import Tolerance

    tol = Tolerance(1e-7, 1e-7)
    x = torch.randn(70_000, dtype=torch.float64)  # beyond one chunk of the measured path
    same = compare(x, x.clone(), tol)
    assert same.ok and same.stats.max_abs == 0.0 and same.stats.max_rel == 0.0
    close = compare(x * (1 + 1e-9), x, tol)
    assert close.ok and close.stats.max_abs > 0.0  # measured, not the shortcut
    x[123] = float("nan")
    # NaN never equals itself: the shortcut leaves it to the rules (nothing verified there)
    assert not compare(x, x.clone(), tol, strict_finite=True).ok
    assert compare(x, x.clone(), tol).ok  # NaN where the reference is NaN: its domain


@pytest.mark.parametrize("n", [1, 2, 3, 20, 21, 1000, 4097])
def test_the_ratio_quantiles_are_torch_quantiles(n: int) -> None:
    """diagnose.quantiles (one partial sort in numpy) interpolates as torch.quantile does,
    which the factor hint's thresholds were calibrated with."""
    import numpy as np

    from gradlab.checks.diagnosis.diagnose import quantiles

    gen = torch.Generator().manual_seed(n)
    qs = (0.05, 0.5, 0.95)
    for scale in (1.0, 1e-8, 1e8):
        r = torch.randn(n, generator=gen, dtype=torch.float64) * scale
        r[: n // 3] = r[0]  # ties
        got = quantiles(r.numpy(), qs)
        want = torch.quantile(r, torch.tensor(qs, dtype=torch.float64)).tolist()
        assert got == pytest.approx(want, rel=1e-15, abs=0.0)
        assert got == np.quantile(r.numpy(), qs).tolist()
    r = torch.tensor([1.0, float("nan"), 2.0], dtype=torch.float64)
    assert all(np.isnan(quantiles(r.numpy(), qs)))  # torch.quantile's NaN too


def test_a_failing_comparison_measures_as_before() -> None:
    """compare's failing path (numpy): the statistics, worst elements and mask it gives."""
    from gradlab.checks.diagnosis.diagnose import compare
    from gradlab.model import Tolerance

    want = torch.linspace(1.0, 2.0, 50, dtype=torch.float64)
    got = want.clone()
    got[7], got[30] = got[7] * 3, float("inf")
    d = compare(got, want, Tolerance(1e-6, 1e-6))
    assert not d.ok and d.stats.nonfinite == 1
    assert d.stats.frac_wrong == pytest.approx(2 / 50)
    assert [i for i, _, _ in d.worst] == [30, 7]  # inf first, then the factor of 3
    assert d.mask is not None and d.mask.nonzero().flatten().tolist() == [7, 30]
    assert d.stats.max_abs == float("inf")
    assert d.stats.ratio_lo == pytest.approx(1.0) and d.scale == pytest.approx(2.0)


def test_the_reference_error_of_an_empty_or_non_finite_tensor_is_not_measured() -> None:
    """own_error (numpy) gives None, for the dtype's table, where nothing is comparable."""
    from gradlab.checks.numeric.lowprec import own_error

    empty = torch.zeros(0, dtype=torch.float64)
    assert own_error([empty.float()], empty, "float32", 4.0) is None
    nan = torch.full((3,), float("nan"), dtype=torch.float64)
    assert own_error([nan.float()], nan, "float32", 4.0) is None
    gold = torch.tensor([1.0, float("inf"), 2.0], dtype=torch.float64)
    own = own_error([gold.float() * (1 + 2**-20)], gold, "float32", 4.0)
    assert own is not None and own.error == pytest.approx(2 * 2**-20, rel=1e-6)

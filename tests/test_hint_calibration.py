"""Hints calibrated, and silent when unsure (issue 21, must-have 4): each case where a hint
named the wrong cause now gets the right hint or none, and the classic cases keep theirs, in
dense and probe (fast) mode, through `gradlab.check` and through a spec.

- a constant factor or a sign only when the per-element ratio got/want is one constant;
- pattern ranges from exactly the wrong elements (a tail starts at a tile boundary);
- second order names grad_outputs as such;
- the "mark it requires_grad: false" advice only on a base gradient/jacobian row;
- second_order_claimed says the fix;
- cached_forward: a forward that ignores in-place updates of an input;
- a kink in the example values (relu, abs at 0 and within the step of 0) is judged one-sidedly.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import hints
from gradlab.checks.diagnosis.patterns import find_pattern
from gradlab.cli import app
from gradlab.model import Tolerance
from gradlab.render.words import describe, message
from gradlab.results import CheckRow, Finding, Pattern, Report

CALIB = DATA / "calibration"
sys.path.insert(0, str(CALIB))
import calib_functions as cf  # noqa: E402

MODES = ["dense", "fast"]
#: The advice a missing gradient gets only where the spec's inputs are what is checked.
ADVICE = "mark it requires_grad: false"


def example(*shape: int, n: int = 1, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).add(0.2)
            .requires_grad_() for _ in range(n)]


def rows_of(report: Report, check: str, variant: str = "base") -> list[CheckRow]:
    return [r for r in report.rows if r.check == check and r.variant == variant]


def failures(report: Report) -> list[tuple[str, str, str, str]]:
    return [(r.variant, r.check, r.hint, message(r)) for r in report.failures]


# --- constant factor and sign: only when the per-element ratio is one constant ---------------

@pytest.mark.parametrize("mode", MODES)
def test_one_term_wrong_by_a_factor_is_no_constant_factor(mode: str) -> None:
    """GELU's backward with the factor 3 of one term forgotten: cosine 0.9996, no factor."""
    r = gradlab.check(cf.GeluForgot3, example(6, 8), reference=cf.gelu_reference, mode=mode,
                      variants=False)
    for check in ("gradient", "jacobian"):
        (row,) = rows_of(r, check)
        assert row.status == "fail"
        assert row.hint not in ("constant_factor", "sign"), message(row)
        assert "per-element ratio" in message(row)
        s = row.findings[0].stats
        assert s is not None and s.cosine > 0.99  # what used to make it "a constant factor"


@pytest.mark.parametrize("mode", MODES)
def test_a_backward_off_by_exactly_two_keeps_its_factor(mode: str) -> None:
    r = gradlab.check(cf.SinTwice, example(4, 6), reference=cf.sin_reference, mode=mode,
                      variants=False)
    for check in ("gradient", "jacobian"):
        (row,) = rows_of(r, check)
        f = row.findings[0]
        assert (row.hint, f.hint) == ("constant_factor", "constant_factor"), message(row)
        assert f.stats is not None and f.stats.ratio == pytest.approx(2, rel=1e-4)
        assert "off by a constant factor 2" in message(row)


@pytest.mark.parametrize("mode", MODES)
def test_a_negated_backward_keeps_its_sign(mode: str) -> None:
    r = gradlab.check(cf.SinNegated, example(4, 6), reference=cf.sin_reference, mode=mode,
                      variants=False)
    for check in ("gradient", "jacobian"):
        (row,) = rows_of(r, check)
        assert row.hint == "sign", message(row)


@pytest.mark.parametrize("mode", MODES)
def test_the_correct_twins_pass(mode: str) -> None:
    for fn, ref in ((cf.Gelu, cf.gelu_reference), (cf.Sin, cf.sin_reference)):
        r = gradlab.check(fn, example(6, 8), reference=ref, mode=mode)
        assert r.passed, failures(r)


def test_the_ratio_spread_decides() -> None:
    want = torch.linspace(0.5, 2.0, 40, dtype=torch.float64)
    tol = Tolerance(1e-7, 1e-7)
    twice = dg.compare(2 * want, want, tol)
    assert twice.stats.ratio_lo == pytest.approx(2) and twice.stats.ratio_hi == pytest.approx(2)
    assert hints.factor_hint(twice) == "constant_factor"
    assert hints.factor_hint(dg.compare(-want, want, tol)) == "sign"
    # a factor that varies by 5% element to element is no constant factor
    varying = want * torch.linspace(1.9, 2.1, 40, dtype=torch.float64)
    assert hints.factor_hint(dg.compare(varying, want, tol)) == ""
    # a tight ratio around 1 with a few elements wrong: not "off by 0.995"
    mostly = want.clone()
    mostly[:3] *= 0.95
    assert hints.factor_hint(dg.compare(mostly, want, tol)) == ""
    # near-zero expected values do not count: their ratios are noise
    noisy = torch.cat([want, torch.full((4,), 1e-9, dtype=torch.float64)])
    got = torch.cat([2 * want, torch.full((4,), 5e-9, dtype=torch.float64)])
    assert hints.factor_hint(dg.compare(got, noisy, tol)) == "constant_factor"
    # one significant element is any factor of any other: silent
    one = dg.compare(torch.tensor([2.0], dtype=torch.float64),
                     torch.tensor([1.0], dtype=torch.float64), tol)
    assert one.stats.ratio_lo is None and hints.factor_hint(one) == ""


# --- pattern ranges: exactly the wrong elements --------------------------------------------

def test_a_tail_starts_at_its_first_wrong_index_on_a_tile_boundary() -> None:
    r = gradlab.check(cf.DoubleTail8, example(4, 30), reference=cf.double_reference,
                      variants=False)
    (row,) = rows_of(r, "gradient")
    assert row.hint == "tail_tile", message(row)
    assert row.findings[0].pattern == Pattern("tail", dims=(1,), start=24, stop=30, tile=8)
    assert "indices 24..29 of dim 1" in message(row)
    assert "16" not in message(row).split("max abs err")[0]


def test_a_range_off_any_tile_boundary_is_a_slice_of_exactly_it() -> None:
    r = gradlab.check(cf.DoubleFrom17, example(4, 30), reference=cf.double_reference,
                      variants=False)
    (row,) = rows_of(r, "gradient")
    assert row.hint == "index_range", message(row)
    assert row.findings[0].pattern == Pattern("slice", dims=(1,), start=17, stop=30)
    assert "indices 17..29 of dim 1" in message(row)


def test_one_side_is_a_range_not_a_border_band() -> None:
    r = gradlab.check(cf.DoubleTopRows, example(2, 8, 8), reference=cf.double_reference,
                      variants=False)
    (row,) = rows_of(r, "gradient")
    assert row.hint == "index_range", message(row)
    assert "indices 0..1 of dim 1" in message(row)


def test_pattern_ranges_unit() -> None:
    m = torch.zeros(4, 30, dtype=torch.bool)
    m[:, 24:] = True
    assert find_pattern(m) == Pattern("tail", dims=(1,), start=24, stop=30, tile=8)
    m = torch.zeros(4, 37, dtype=torch.bool)
    m[:, 33:] = True  # 33 is no tile boundary of 37
    assert find_pattern(m) == Pattern("slice", dims=(1,), start=33, stop=37)
    m = torch.zeros(2, 12, 12, dtype=torch.bool)
    m[:, :2, :] = True
    m[:, :, -2:] = True  # two sides: a border band
    assert find_pattern(m) == Pattern("border", dims=(1, 2), start=0, stop=2)
    m = torch.zeros(6, 8, dtype=torch.bool)
    m[0, 5] = m[5, 3] = True  # two scattered elements: no pattern by chance
    assert find_pattern(m) is None


# --- second order names grad_outputs --------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_second_order_names_a_grad_output(mode: str) -> None:
    r = gradlab.check(cf.MulDetachedGrad, example(3, 4, n=2), reference=cf.mul_reference,
                      mode=mode, variants=False)
    (row,) = rows_of(r, "second_order")
    assert row.status == "fail"
    subjects = {(f.subject, f.index) for f in row.findings}
    assert subjects == {("grad_output", 0)}, message(row)
    text = message(row)
    assert "grad_output 0 [3, 4]" in text and "input 2" not in text
    assert row.worst and all("grad_output0[" in str(e) for e in row.worst)
    assert ADVICE not in text  # a grad_output is no spec input to mark constant
    twin = gradlab.check(cf.Mul, example(3, 4, n=2), reference=cf.mul_reference, mode=mode)
    assert twin.passed, failures(twin)


# --- advice lines only where they apply -----------------------------------------------------

def test_the_constant_advice_only_on_base_gradient_and_jacobian_rows() -> None:
    r = gradlab.check(cf.MulNoGradW, example(3, 4, n=2), reference=cf.mul_reference,
                      mode="dense")
    for check in ("gradient", "jacobian"):
        (row,) = rows_of(r, check)
        assert row.hint == "missing" and ADVICE in message(row), message(row)
    variant_rows = [x for x in r.failures if x.variant != "base" and x.findings]
    assert variant_rows
    assert all(ADVICE not in message(x) for x in variant_rows)


def test_no_constant_advice_in_a_requires_grad_subset() -> None:
    r = gradlab.check(cf.MulGatedWrong, example(3, 4, n=2), reference=cf.mul_reference)
    subset = [x for x in r.failures if x.variant.startswith("requires_grad")]
    assert subset and all(x.hint == "requires_grad_subset" for x in subset), failures(r)
    text = message(subset[0])
    assert "gradient missing (None)" in text and ADVICE not in text


def test_describe_gives_the_advice_only_with_a_base_row() -> None:
    f = Finding("input", 1, "missing", shape=(2, 4))
    plain = "input 1 [2, 4]: gradient missing (None) for an input that requires grad"
    assert describe(f) == plain
    base = CheckRow("op", "c", "float64", "cpu", "base", "gradient", "fail", findings=[f])
    assert describe(f, row=base) == plain + " (if input 1 is a constant, mark it " \
                                           "requires_grad: false)"
    second = CheckRow("op", "c", "float64", "cpu", "base", "second_order", "fail")
    assert describe(f, row=second) == plain


# --- second_order_claimed says the fix -------------------------------------------------------

def test_second_order_claimed_says_the_fix() -> None:
    r = gradlab.check(cf.SinCosKept, example(4, 6), reference=cf.sin_reference,
                      second_order=False, variants=False)
    (row,) = rows_of(r, "second_order")
    assert (row.status, row.hint) == ("warn", "second_order_claimed")
    text = message(row)
    assert "once_differentiable" in text and "checks: {second_order: false}" in text
    assert "checks=" in text


# --- cached_forward ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [*MODES, "auto"])
def test_a_forward_that_ignores_inplace_updates_is_named(mode: str) -> None:
    r = gradlab.check(cf.ScaleCached, example(3, 4, n=2), reference=cf.mul_reference,
                      mode=mode, variants=False)
    (row,) = rows_of(r, "jacobian")
    assert row.hint == "cached_forward", message(row)
    assert [(f.index, f.hint) for f in row.findings] == [(1, "cached_forward")]
    twin = gradlab.check(cf.Scale, example(3, 4, n=2), reference=cf.mul_reference, mode=mode)
    assert twin.passed, failures(twin)


def test_a_forward_that_ignores_its_input_altogether_is_not_cached() -> None:
    """Numerical Jacobian zero for every input tensor alike: no cache to blame."""

    class IgnoresW(cf.Scale):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, torch.ones_like(w))
            return x * 1.0

    r = gradlab.check(IgnoresW, example(3, 4, n=2), checks=["jacobian"], mode="dense")
    (row,) = rows_of(r, "jacobian")
    assert row.status == "fail" and row.hint != "cached_forward", message(row)


# --- kinks in the example values --------------------------------------------------------------

def kink_values() -> list[torch.Tensor]:
    return [torch.tensor(cf.KINK_VALUES, dtype=torch.float64).requires_grad_()]


@pytest.mark.parametrize("mode", [*MODES, "auto"])
@pytest.mark.parametrize("name", ["relu", "abs"])
def test_a_kink_in_the_example_values_passes_one_sidedly(name: str, mode: str) -> None:
    fn, ref = {"relu": (cf.Relu, cf.relu_reference), "abs": (cf.Abs, cf.abs_reference)}[name]
    r = gradlab.check(fn, kink_values(), reference=ref, mode=mode)
    assert r.passed, failures(r)
    (row,) = rows_of(r, "jacobian")
    assert row.reason == "kink"
    assert "judged one-sidedly" in message(row)


@pytest.mark.parametrize("mode", [*MODES, "auto"])
def test_a_wrong_sign_beside_a_kink_still_fails(mode: str) -> None:
    r = gradlab.check(cf.AbsWrongSign, kink_values(), reference=cf.abs_reference, mode=mode,
                      variants=False)
    (row,) = rows_of(r, "jacobian")
    assert row.status == "fail" and row.reason != "kink", message(row)


# --- through a spec -------------------------------------------------------------------------

#: broken spec, what its output must say, what it must not say, its correct twin
SPECS = [
    ("gelu_forgot3", "no constant factor", "constant_factor", "gelu"),
    ("tail8", "indices 24..29 of dim 1", "indices 16..", "double"),
    ("mul_detached_grad", "grad_output 0 [3, 4]", "input 2", "mul"),
    ("sin_claimed", "once_differentiable", "input 2", "sin_not_checked"),
    ("scale_cached", "cached_forward", "constant_factor", "scale"),
    ("abs_wrong_sign", "FAIL", "judged one-sidedly", "abs_kink"),
]


@pytest.mark.parametrize(("broken", "says", "never", "twin"), SPECS, ids=[s[0] for s in SPECS])
def test_through_a_spec(broken: str, says: str, never: str, twin: str,
                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(CALIB)
    # sin_claimed is a warn (gradlab.checks.diagnosis.policy): --strict makes it the failure it
    # tests
    strict = ["--strict"] if broken == "sin_claimed" else []
    out = CliRunner().invoke(app, ["check", f"{broken}.yaml", "--no-isolate", *strict,
                                   "--report-dir", str(tmp_path)])
    text = " ".join(out.output.split())  # the terminal wraps long lines
    assert out.exit_code == 1 and says in text and never not in text, out.output
    ok = CliRunner().invoke(app, ["check", f"{twin}.yaml", "--no-isolate",
                                  "--report-dir", str(tmp_path)])
    assert ok.exit_code == 0, ok.output


def test_a_kink_passes_through_a_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(CALIB)
    for spec in ("relu_kink", "abs_kink"):
        for mode in MODES:
            out = CliRunner().invoke(app, ["check", f"{spec}.yaml", "--no-isolate", "--mode",
                                           mode, "--report-dir", str(tmp_path)])
            assert out.exit_code == 0, out.output

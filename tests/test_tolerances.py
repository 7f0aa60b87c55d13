"""Tolerances that reach every comparison, and findings that say an error's level (issue 21).

- a Function 0.5% off by design (an approximate backward) fails with a value-level finding
  (`approximate` and the tolerance that would pass, no layout hint) by default, and passes every
  check once the user sets that tolerance, through the API and through a spec;
- a float64 Function whose backward computes in float32 fails with `precision_loss` (judged by a
  float64 tolerance), its correct twin passes;
- the finite_differences key sets the finite-difference checks' tolerance apart, and is
  validated (exit 2, one line naming file and key);
- passing_tolerance's tolerance really passes (random tensors), level_hint's levels.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA, run_cli

import gradlab
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import hints
from gradlab.model import DEFAULT_TOLERANCES, GRADCHECK_TOLERANCE, OpDef, Tolerance
from gradlab.render.files import row_from_dict
from gradlab.render.words import message
from gradlab.results import CheckRow, Report
from gradlab.tolerances import STRICT_TOLERANCES

TOLS = DATA / "tolerances"
sys.path.insert(0, str(TOLS))
import tol_functions as tf  # noqa: E402

#: Hints that blame a layout or a variant: never right for an error that depends on the values.
LAYOUT_HINTS = ("grad_output_layout",)
#: The checks a passing run of the approximate Function must have passed (not skipped).
NUMERIC_CHECKS = ("forward", "gradient", "jacobian", "second_order")


def example() -> list[torch.Tensor]:
    # values spread over a few periods of sin(3x): the error varies with them
    x = torch.linspace(-3, 3, 60, dtype=torch.float64).reshape(6, 10) + 0.01
    return [x.requires_grad_()]


def failures(r: Report) -> list[tuple[str, str, str, str]]:
    return [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


def layout_blamed(rows: list[CheckRow]) -> list[str]:
    return [f"{x.variant}/{x.check}: {x.hint}" for x in rows
            if x.hint.endswith("_only") or x.hint in LAYOUT_HINTS]


def base_gradient(r: Report) -> CheckRow:
    return next(x for x in r.rows if x.variant == "base" and x.check == "gradient")


def widest_passing(r: Report) -> tuple[float, float]:
    """The loosest (atol, rtol) any finding of the run says would pass."""
    tols = [f.passing_tolerance for x in r.rows for f in x.findings
            if f.passing_tolerance is not None]
    assert tols, failures(r)
    return max(t[0] for t in tols), max(t[1] for t in tols)


def test_an_approximate_backward_fails_on_its_values_by_default() -> None:
    r = gradlab.check(tf.ApproxSinX, example(), reference=tf.reference)
    assert not r.passed
    row = base_gradient(r)
    assert row.status == "fail" and row.hint == "approximate", failures(r)
    finding = row.findings[0]
    assert finding.hint == "approximate" and finding.passing_tolerance is not None
    assert "tolerances that would pass: {float64: {atol: " in message(row)
    assert not layout_blamed(r.rows), layout_blamed(r.rows)


def test_the_tolerance_it_names_makes_every_check_pass() -> None:
    atol, rtol = widest_passing(gradlab.check(tf.ApproxSinX, example(), reference=tf.reference))
    r = gradlab.check(tf.ApproxSinX, example(), reference=tf.reference,
                      tolerances={"float64": (atol, rtol)})
    assert r.passed, failures(r)
    for check in NUMERIC_CHECKS:
        rows = [x for x in r.rows if x.check == check]
        assert rows and all(x.status == "pass" for x in rows), (check, failures(r))
    assert len({x.variant for x in r.rows}) > 5  # the variants ran, and passed


def test_the_finite_difference_tolerance_can_be_set_apart() -> None:
    loose = (1e-3, 1e-2)
    strict = gradlab.check(tf.ApproxSinX, example(), reference=tf.reference, mode="dense",
                           tolerances={"float64": loose,
                                       "finite_differences": (1e-5, 1e-3)})
    assert {x.check for x in strict.failures} == {"jacobian"}, failures(strict)
    fd_only = gradlab.check(tf.ApproxSinX, example(), reference=tf.reference,
                            tolerances={"finite_differences": loose})
    assert "jacobian" not in {x.check for x in fd_only.failures}, failures(fd_only)
    assert "gradient" in {x.check for x in fd_only.failures}


@pytest.mark.parametrize("bad", [(-1e-5, 1e-3), (math.nan, 1e-3), (1e-5, math.inf)])
def test_an_api_tolerance_must_be_finite_and_not_negative(bad: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="finite_differences"):
        gradlab.check(tf.ExactSinX, example(), reference=tf.reference,
                      tolerances={"finite_differences": bad})


def test_autocast_honours_the_users_autocast_dtype_tolerance() -> None:
    """autocast compares under autocast against the reference under autocast: a user's
    bfloat16 tolerance is what governs it (here tightened below the 0.5% error)."""
    r = gradlab.check(tf.ApproxSinX, [x.float() for x in example()], reference=tf.reference,
                      dtypes=["float64"],
                      tolerances={"float64": (1e-3, 1e-2), "bfloat16": (1e-4, 1e-4)})
    assert [x.check for x in r.failures] == ["autocast"], failures(r)


def test_autocast_keeps_an_error_by_design_the_user_allowed_in_float32() -> None:
    """30% off by design, allowed in float32 and float64: under autocast the error stays, beside
    bfloat16's rounding, and is allowed there too (bfloat16's own 5e-2 would fail it)."""
    rough = {"float64": (0.6, 0.6), "float32": (0.6, 0.6)}
    r = gradlab.check(tf.RoughSinX, [x.float() for x in example()], reference=tf.reference,
                      tolerances=rough)
    assert r.passed, failures(r)
    assert [x.status for x in r.rows if x.check == "autocast"] == ["pass"]
    no_float32 = gradlab.check(tf.RoughSinX, [x.float() for x in example()],
                               reference=tf.reference, dtypes=["float64"],
                               tolerances={"float64": (0.6, 0.6)})
    assert [x.check for x in no_float32.failures] == ["autocast"], failures(no_float32)


def test_numerical_tolerance_is_gradchecks_loosened_by_the_users() -> None:
    op = OpDef("f", "", print, None, None)
    assert op.numerical_tolerance("float64") == GRADCHECK_TOLERANCE
    tight = OpDef("f", "", print, None, None, tolerances={"float64": Tolerance(1e-12, 1e-12)})
    assert tight.numerical_tolerance("float64") == GRADCHECK_TOLERANCE
    mixed = OpDef("f", "", print, None, None, tolerances={"float64": Tolerance(1e-9, 1e-2)})
    assert mixed.numerical_tolerance("float64") == Tolerance(GRADCHECK_TOLERANCE.atol, 1e-2)
    assert mixed.numerical_tolerance("float32") == GRADCHECK_TOLERANCE
    fd = OpDef("f", "", print, None, None, tolerances={"float64": Tolerance(1, 1)},
               fd_tolerance=Tolerance(1e-6, 1e-4))
    assert fd.numerical_tolerance("float64") == Tolerance(1e-6, 1e-4)


def test_float64_defaults_are_the_ecosystems_and_strict_keeps_the_old_ones() -> None:
    # torch.testing.assert_close's defaults (issue 28): a correct adjoint solver at 1e-9 passes;
    # the former float64-rounding table (a float32-accurate result fails it) is opt-in
    assert DEFAULT_TOLERANCES["float64"] == Tolerance(atol=1e-7, rtol=1e-7)
    strict = STRICT_TOLERANCES["float64"]
    assert strict.rtol <= 1e-8 and strict.atol <= 1e-9


def test_a_float32_backward_of_a_float64_function_is_precision_loss() -> None:
    r = gradlab.check(tf.Float32Backward, example(), reference=tf.reference)
    row = base_gradient(r)
    # a precision observation within float32's accuracy: one warn per case (issue 28, item 5),
    # not a failure of every variant
    assert row.status == "warn" and row.hint == "precision_loss", failures(r)
    assert [x.variant for x in r.rows if x.hint == "precision_loss"] == ["base"], failures(r)
    assert not [x for x in r.rows if x.check in ("forward", "gradient") and x.failed]
    assert row.findings[0].passing_tolerance is not None
    assert "tolerances that would pass: {float64: " in message(row)
    # second order (finite differences of a float32-accurate gradient are rounding noise) is
    # not blamed on second order alone
    assert all(x.hint != "second_order_only" for x in r.rows), failures(r)
    twin = gradlab.check(tf.ExactSinX, example(), reference=tf.reference)
    assert twin.passed, failures(twin)


def test_a_float32_forward_of_a_float64_function_is_precision_loss() -> None:
    r = gradlab.check(tf.Float32Forward, example(), reference=tf.reference)
    forward = next(x for x in r.rows if x.variant == "base" and x.check == "forward")
    assert forward.status == "warn" and forward.findings[0].hint == "precision_loss", failures(r)
    jacobian = next(x for x in r.rows if x.check == "jacobian")
    # gradcheck's step of 1e-6 would difference float32 rounding (noise, no factor): the step
    # the forward's noise permits resolves the derivative (gradlab.checks.numeric.fdstep)
    assert jacobian.status == "pass" and "finite-difference step" in jacobian.note, failures(r)


def cli(spec: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        *extra: str) -> tuple[int, str]:
    code, out, err = run_cli(["check", str(TOLS / spec), "--no-isolate", "--report-dir",
                              str(tmp_path), *extra], capsys)
    return code, out + err


def test_through_specs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = cli("approx.yaml", capsys, tmp_path)
    words = " ".join(out.split())  # the terminal wraps long lines anywhere
    assert code == 1 and "approximate" in out and "tolerances that would pass" in words, out
    code, out = cli("approx_tolerated.yaml", capsys, tmp_path)
    assert code == 0, out
    # dense: a random probe v^T J u averages a 0.5% error varying with the values down to
    # about gradcheck's rtol (fast mode's known blind spot); the Jacobian entries do not
    code, out = cli("approx_fd_strict.yaml", capsys, tmp_path, "--mode", "dense")
    assert code == 1 and "jacobian" in out, out
    # float32-accurate float64 results: one precision_loss warning, no failure (issue 28)
    code, out = cli("float32_backward.yaml", capsys, tmp_path)
    assert code == 0 and "precision_loss" in out and "second_order_only" not in out, out
    code, out = cli("float32_forward.yaml", capsys, tmp_path)
    assert code == 0 and "precision_loss" in out and "constant_factor" not in out, out
    code, out = cli("exact.yaml", capsys, tmp_path)
    assert code == 0, out


@pytest.mark.parametrize(("spec", "key"), [
    ("bad_fd_negative.yaml", "tolerances.finite_differences.atol"),
    ("bad_fd_value.yaml", "tolerances.finite_differences"),
    ("bad_fd_key.yaml", "tolerances.finite_differences"),
    ("bad_fd_typo.yaml", "tolerances.finite_difference: unknown key 'finite_difference' (did "
                         "you mean finite_differences?"),
])
def test_a_bad_finite_difference_tolerance_is_one_line(spec: str, key: str,
                                                       capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    code, out = cli(spec, capsys, tmp_path)
    assert code == 2, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{spec}: {key}" in lines[0], out


def test_passing_tolerance_passes_on_random_tensors() -> None:
    gen = torch.Generator().manual_seed(0)
    for trial in range(60):
        n = int(torch.randint(1, 300, (1,), generator=gen))
        scale = 10.0 ** float(torch.randint(-3, 4, (1,), generator=gen))
        want = torch.randn(n, generator=gen, dtype=torch.float64) * scale
        rel = 10.0 ** float(torch.randint(-9, -1, (1,), generator=gen))
        noise = torch.randn(n, generator=gen, dtype=torch.float64)
        got = want * (1 + rel * noise) + rel * scale * torch.randn(n, generator=gen,
                                                                   dtype=torch.float64)
        if trial % 3 == 0:
            got, want = got.float(), want.float()
        tol = DEFAULT_TOLERANCES["float64" if got.dtype == torch.float64 else "float32"]
        out = dg.passing_tolerance(got, want, tol)
        assert out is not None
        assert dg.compare(got, want, out, scaled=True).ok, (trial, out)
        assert out.atol >= tol.atol and out.rtol >= tol.rtol
        for x, own in ((out.atol, tol.atol), (out.rtol, tol.rtol)):
            # one significant digit, or the table's own (float32's rtol is 1.3e-6)
            assert float(f"{x:.1g}") == x or x == own


def test_passing_tolerance_edges() -> None:
    want = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tol = DEFAULT_TOLERANCES["float64"]
    assert dg.passing_tolerance(want.clone(), want, tol) == tol  # already passes
    nan = torch.tensor([1.0, math.nan, 3.0], dtype=torch.float64)
    assert dg.passing_tolerance(nan, want, tol) is None  # no tolerance helps
    assert dg.passing_tolerance(want + 1, want, Tolerance(0.0, 0.0)) is None
    assert dg.round_up(3.2e-7) == 4e-7 and dg.round_up(3e-7) == 3e-7 and dg.round_up(0.0) == 0


def test_level_hint() -> None:
    gen = torch.Generator().manual_seed(1)
    want = torch.randn(200, generator=gen, dtype=torch.float64)
    # the level of an error outside float64's rounding: the strict table (the default one,
    # torch.testing's 1e-7, passes a float32-accurate result outright)
    tol = STRICT_TOLERANCES["float64"]

    def level(got: torch.Tensor, dtype: str = "float64") -> str:
        return hints.level_hint(dg.compare(got, want, tol, scaled=True), dtype)

    rounded = want.float().double()  # float32-accurate
    assert level(rounded) == "precision_loss"
    assert level(rounded, "float32") == "approximate"  # float32's own rounding is no loss
    assert level(want * (1 + 0.004 * torch.sin(5 * want))) == "approximate"
    noise = torch.randn(200, generator=gen, dtype=torch.float64)
    # float32's rounding through a few operations, the result float64 (not cast at the end):
    # its level alone cannot tell it from an approximate method's (approximate names both)
    assert level(want * (1 + 2e-7 * noise)) == "approximate"
    # an ODE adjoint at its tolerance: 1.3e-6 of the scale, in float64 values
    adjoint = want + 1.3e-6 * torch.sin(3 * want) * want.abs().max()
    assert level(adjoint) == "approximate"
    # deep float32 computation cast at the end: every value a float32 one, 3e-6 off
    assert level((want * (1 + 3e-6 * noise)).float().double()) == "precision_loss"
    assert level(want * 2) == ""  # a bug, not a level
    assert level(want + 0.5 * torch.randn(200, generator=gen, dtype=torch.float64)) == ""
    assert level(torch.where(want > 1, math.nan, want)) == ""
    assert level(want) == ""


def test_the_tolerance_that_would_pass_survives_the_json_report() -> None:
    r = gradlab.check(tf.ApproxSinX, example(), reference=tf.reference, variants=False)
    row = base_gradient(r)
    again = row_from_dict(json.loads(json.dumps(row.as_dict())))
    assert again.findings == row.findings and again.findings[0].passing_tolerance is not None
    assert message(again) == message(row)

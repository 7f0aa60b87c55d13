"""Variant verdicts (issue 21): inputs the reference refuses are declared skips, table lines
show the worst real result, a layout hint only after a plain contiguous copy of the failing
values passes, and every number shown was measured (a missing reference said everywhere).

Each point through `gradlab.check` and through `gradlab check SPEC`, a broken Function beside
its correct twin (tests/data/variants).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from rich.console import Console
from typer.testing import CliRunner

import gradlab
from gradlab.checks.diagnosis.hints import VALUE_LEVEL_FACTOR
from gradlab.cli import app
from gradlab.render.check import check_table, group_rows, render_verdict, verdict_line
from gradlab.render.files import check_report_texts, read_check_json
from gradlab.render.words import message
from gradlab.results import CheckRow, Report

VARIANTS = DATA / "variants"
sys.path.insert(0, str(VARIANTS))
import variant_functions as vf  # noqa: E402

#: Hints that send the user to memory layouts, tiles or magnitudes.
LAYOUT_HINTS = {"noncontiguous_only", "transposed_only", "channels_last_only", "expanded_only",
                "grad_output_layout", "magnitude_only", "ragged_only", "size1_only"}
#: Hints that say the error depends on the values (level_hint's, or value_dependent).
VALUE_HINTS = {"value_dependent", "approximate", "precision_loss"}
#: Only the rows these tests are about: fast.
FIRST_ORDER = ["forward", "gradient", "contract"]


def cli(spec: str, tmp_path: Path, *more: str) -> Any:
    # --wide: every column, whatever the terminal's width
    return CliRunner().invoke(app, ["check", str(VARIANTS / spec), "--no-isolate", "--wide",
                                    "--report-dir", str(tmp_path), *more])


def said(report: Report) -> list[tuple[str, str, str, str]]:
    return [(r.variant, r.check, r.hint, message(r)) for r in report.rows if r.failed]


# --- A: inputs the reference refuses ---------------------------------------------------------


def conv_example() -> list[Any]:
    gen = torch.Generator().manual_seed(0)
    shapes = ((1, 4, 8, 8), (6, 2, 3, 3), (6,))
    return [(torch.rand(s, generator=gen, dtype=torch.float64) - 0.5).requires_grad_()
            for s in shapes] + [2]


def test_a_grouped_op_that_computes_where_the_reference_refuses_passes() -> None:
    r = gradlab.check(vf.ChunkedGroupConv, conv_example(), reference=vf.grouped_conv_reference,
                      checks=FIRST_ORDER)
    assert r.passed, said(r)
    (refused,) = [x for x in r.rows if x.status == "skip"]
    # 6 -> 7 output channels: groups=2 no longer divides them
    assert (refused.variant, refused.declared) == ("ragged[6->7]", True)
    assert refused.reason == "reference_refused_function_accepts"
    words = message(refused)
    assert "the reference refuses" in words and "lacks input validation" in words
    assert "ragged[6->7]: RuntimeError" in words
    assert not any(x.hint in LAYOUT_HINTS for x in r.rows)


def test_its_twin_broken_at_sizes_the_reference_accepts_still_gets_ragged_only() -> None:
    r = gradlab.check(vf.ChunkedGroupConvTiledBackward, conv_example(),
                      reference=vf.grouped_conv_reference, checks=FIRST_ORDER)
    assert [(x.variant, x.hint) for x in r.failures] == [("ragged[8->9]", "ragged_only")]
    assert [x.reason for x in r.rows if x.status == "skip"] == [
        "reference_refused_function_accepts"]


def forward_lines(folder: Path) -> list[dict[str, Any]]:
    """The report's forward lines as the table folds them (the terminal may wrap the table)."""
    (path,) = folder.glob("check-*.json")
    return [g for g in group_rows(read_check_json(path).rows) if g["check"] == "forward"]


def test_grouped_conv_specs(tmp_path: Path) -> None:
    ok = cli("grouped_conv.yaml", tmp_path / "ok")
    assert ok.exit_code == 0, ok.output
    (line,) = forward_lines(tmp_path / "ok")
    assert (line["status"], line["variants"], line["skipped_variants"]) == ("pass", 16, 1)
    assert "reference_refused_function_accepts 1" in " ".join(ok.output.split())
    broken = cli("grouped_conv_tiled.yaml", tmp_path)
    assert broken.exit_code == 1 and "likely cause: ragged_only" in broken.output


def test_bundled_conv2d_groups_passes_with_its_forward_line_pass(tmp_path: Path) -> None:
    """The Function refuses the grown channels as the reference does: reference_refused."""
    res = CliRunner().invoke(app, ["check", "conv2d", "-k", "groups_2", "--dtype", "float64",
                                   "--no-isolate", "--wide", "--report-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (line,) = forward_lines(tmp_path)
    assert (line["status"], line["skipped_variants"]) == ("pass", 1)
    (path,) = tmp_path.glob("check-*.json")
    rows = json.loads(path.read_text())["rows"]
    assert [r["reason"] for r in rows if r["status"] == "skip"] == ["reference_refused"]


# --- B: table lines fold variants by their worst real result ---------------------------------


def row(variant: str, status: str, *, check: str = "forward", declared: bool = False,
        reason: str = "", err: float | None = 1e-9) -> CheckRow:
    return CheckRow("op", "c", "float64", "cpu", variant, check, status, max_abs_err=err,
                    max_rel_err=err, reason=reason, declared=declared)


def table_text(rows: list[CheckRow], width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(check_table(Report(rows), width))
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def refused() -> CheckRow:
    return row("ragged[4->5]", "skip", declared=True, reason="reference_refused", err=None)


def test_a_refused_variant_is_counted_apart_and_does_not_decide_the_line() -> None:
    rows = [row(f"v{i}", "pass") for i in range(13)] + [refused()]
    (g,) = group_rows(rows)
    assert g["status"] == "pass" and g["max_abs_err"] == 1e-9
    text = table_text(rows)
    assert "13 +1 skipped" in text and all(len(ln) <= 100 for ln in text.splitlines())
    line = verdict_line(Report(rows), passed=True)
    assert "1 passed, 0 failed, 0 errors, 0 skipped" in line
    assert "14 rows: 13 passed, 0 failed, 0 errors, 1 skipped (reference_refused 1)" in line


def test_a_failing_variant_decides_the_line_beside_a_refused_one() -> None:
    rows = [row("base", "pass"), row("v", "fail", err=2.0), refused()]
    (g,) = group_rows(rows)
    assert (g["status"], g["max_abs_err"]) == ("fail", 2.0)
    assert "1/2 bad +1 skipped" in table_text(rows)


def test_a_line_is_skip_only_when_nothing_ran_or_a_skip_was_not_declared() -> None:
    (nothing,) = group_rows([row("base", "skip", declared=True, reason="cuda_unavailable",
                                 err=None)])
    assert (nothing["status"], nothing["declared"], nothing["reason"]) == (
        "skip", True, "cuda_unavailable")
    assert " 1 skipped " in table_text([row("base", "skip", declared=True, err=None)], 160)
    (undeclared,) = group_rows([row("base", "pass"), row("v", "skip", reason="x", err=None)])
    assert (undeclared["status"], undeclared["declared"]) == ("skip", False)
    line = verdict_line(Report([row("base", "pass"), row("v", "skip", reason="x", err=None)]))
    # the check fails (something asked for went unchecked), as JUnit and the exit code say
    assert "1 failed (undeclared skip: x 1)" in line and "1 skipped (undeclared: x 1)" in line


# --- C: value-level, not layout ---------------------------------------------------------------


def test_an_approximate_backward_gets_a_value_level_finding_not_a_layout_hint() -> None:
    """A fixed-step ODE solve in backward: the expanded variant's (and the ragged and
    magnitude ones') values cross the float64 tolerance; their plain contiguous copies (the
    ragged values at the case's own sizes, the magnitudes halfway) fail alike.  The values'
    error, an approximate method's signature where the base passes: a warn giving the number
    (method_accuracy), as the ragged and ties variants' (helper-18's linear_cg)."""
    r = gradlab.check(vf.ApproxExpSum, [vf.small_sums_example()],
                      reference=vf.exp_sum_reference, checks=FIRST_ORDER)
    assert not r.failures, said(r)
    # at the magnitude variant the error is the method's, alike in float32 and float64: a
    # warn (gradlab.checks.families.verdicts.scale_limited), its value-level hint kept
    (big,) = [x for x in r.rows if x.variant == "magnitude" and x.check == "gradient"]
    assert (big.status, big.reason) == ("warn", "scale_limited") and big.hint in VALUE_HINTS
    (expanded,) = [x for x in r.rows if x.variant == "expanded[0]" and x.check == "gradient"]
    assert (expanded.status, expanded.reason) == ("warn", "method_accuracy"), said(r)
    assert expanded.hint in VALUE_HINTS and all(f.pattern is None for f in expanded.findings)
    assert "tolerances that would pass: {float64:" in message(expanded)


class ApproxExpSumOutputOnCtx(vf.ApproxExpSum):
    """The same method, its output also kept on ctx (a reference cycle: a contract finding
    at the base case, which says nothing of its values)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = vf.ApproxExpSum.forward(ctx, x)
        ctx.y = y
        return y


def test_a_contract_finding_leaves_the_variants_values_judged_as_a_passing_base() -> None:
    r = gradlab.check(ApproxExpSumOutputOnCtx, [vf.small_sums_example()],
                      reference=vf.exp_sum_reference, checks=FIRST_ORDER)
    assert ("contract", "ctx_output") in {(x.check, x.hint) for x in r.failures}, said(r)
    (big,) = [x for x in r.rows if x.variant == "magnitude" and x.check == "gradient"]
    assert (big.status, big.reason) == ("warn", "scale_limited"), said(r)


def test_a_layout_bug_keeps_its_layout_hint() -> None:
    r = gradlab.check(vf.ExpSumRawGradOut, [vf.small_sums_example()],
                      reference=vf.exp_sum_reference, checks=FIRST_ORDER)
    assert {x.hint for x in r.failures} == {"grad_output_layout"}, said(r)
    ok = gradlab.check(vf.ExpSum, [vf.small_sums_example()], reference=vf.exp_sum_reference,
                       checks=FIRST_ORDER)
    assert ok.passed, said(ok)


def test_tied_values_are_the_values_bug_not_the_expanded_layouts() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    r = gradlab.check(vf.MaxOverRowsTies, [x.requires_grad_()], reference=vf.amax_reference,
                      checks=FIRST_ORDER)
    (bad,) = r.failures
    assert (bad.variant, bad.hint) == ("expanded[0]", "value_dependent"), said(r)
    # a factor 3 on tied values is a bug: no tolerance offered to hide it
    assert all(f.passing_tolerance is None for f in bad.findings)
    assert "a plain contiguous copy fails alike" in message(bad)
    ok = gradlab.check(vf.MaxOverRows, [x.detach().requires_grad_()],
                       reference=vf.amax_reference, checks=FIRST_ORDER)
    assert ok.passed, said(ok)


def sin_example() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(3, 4, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()]


@pytest.mark.parametrize("fn, hints", [(vf.ApproxSin, VALUE_HINTS),
                                       (vf.SinOverflowing, {"magnitude_only"})],
                         ids=["approximate", "overflowing"])
def test_a_magnitude_failure_near_the_tolerance_is_value_level(fn: Any, hints: set[str]) -> None:
    """ApproxSin's error at the magnitude variant is within VALUE_LEVEL_FACTOR of the bound;
    an overflow (NaN) is gross and keeps magnitude_only."""
    tol = {"float64": (1e-10, vf.APPROX_SIN_RTOL)}
    r = gradlab.check(fn, sin_example(), reference=vf.sin_reference, tolerances=tol,
                      checks=FIRST_ORDER)
    flagged = [x for x in r.rows if x.status in ("fail", "warn")]
    assert [x.variant for x in flagged] == ["magnitude"], said(r)
    assert {x.hint for x in flagged} <= hints, said(r)
    # an approximation's error, alike in float32 and float64, is a warn; an overflow (NaN)
    # fails (gradlab.checks.families.verdicts.scale_limited)
    assert [x.status for x in flagged] == ["warn" if fn is vf.ApproxSin else "fail"], said(r)
    ok = gradlab.check(vf.Sin, sin_example(), reference=vf.sin_reference, tolerances=tol,
                       checks=FIRST_ORDER)
    assert ok.passed, said(ok)
    assert VALUE_LEVEL_FACTOR * vf.APPROX_SIN_RTOL > vf.DELTA


@pytest.mark.parametrize("spec, hint", [("exp_sum_raw_grad_out", "grad_output_layout"),
                                        ("max_ties", "value_dependent"),
                                        ("sin_overflowing", "magnitude_only")])
def test_value_level_specs(spec: str, hint: str | None, tmp_path: Path) -> None:
    res = cli(f"{spec}.yaml", tmp_path)
    assert res.exit_code == 1, res.output
    causes = {ln.split("likely cause: ")[1].split(":")[0] for ln in res.output.splitlines()
              if "likely cause: " in ln}
    assert causes == {hint}, res.output


@pytest.mark.parametrize("spec", ["approx_exp_sum", "approx_sin"])
def test_an_approximate_method_warns_and_strict_fails_it(spec: str, tmp_path: Path) -> None:
    """approx_sin: off only at inputs scaled 1000x, alike in float32 and float64 (the
    approximation's, not rounding's); approx_exp_sum: an ODE backward off at the expanded,
    ragged and ties variants' values by its method's accuracy.  A warn, the run passes;
    --strict fails it, with its value-level hint."""
    res = cli(f"{spec}.yaml", tmp_path)
    assert res.exit_code == 0 and "warning" in res.output, res.output
    res = cli(f"{spec}.yaml", tmp_path, "--strict")
    causes = {ln.split("likely cause: ")[1].split(":")[0] for ln in res.output.splitlines()
              if "likely cause: " in ln}
    assert res.exit_code == 1 and causes and causes <= VALUE_HINTS, res.output


@pytest.mark.parametrize("spec", ["exp_sum", "max", "no_reference"])
def test_correct_twin_specs_pass(spec: str, tmp_path: Path) -> None:
    res = cli(f"{spec}.yaml", tmp_path)
    assert res.exit_code == 0, res.output


# --- D: honest numbers, a missing reference said ---------------------------------------------


def test_probe_mode_rows_show_the_probe_error_they_measured() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(vf.Sin, [x], reference=vf.sin_reference, mode="fast",
                      checks=["jacobian", "second_order"])
    rows = {x.check: x for x in r.rows}
    for check in ("jacobian", "second_order"):
        assert rows[check].mode == "fast"
        # finite differences are never exact: a 0 here was the probes rounded to float32
        err = rows[check].max_abs_err
        assert err is not None and 0 < err < 1e-5, (check, err)


def test_without_a_reference_every_place_says_so(tmp_path: Path) -> None:
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(vf.Sin, [x], name="sin", checks=FIRST_ORDER)
    assert r.passed
    base = next(x for x in r.rows if (x.variant, x.check) == ("base", "forward"))
    assert (base.status, base.declared, base.reason) == ("skip", True, "no_reference_base")
    assert base.max_abs_err is None and base.max_rel_err is None
    compared = [x for x in r.rows if x.variant != "base" and x.check in ("forward", "gradient")]
    assert compared and all(x.reason == "no_reference" for x in compared)
    assert "compared with the Function's own contiguous run" in message(compared[0])
    # the value variants compare a run with itself again: nothing measured
    assert all(x.max_abs_err is None for x in compared
               if x.variant.startswith(("magnitude", "ragged")))
    console = Console(width=100, file=io.StringIO(), color_system=None)
    render_verdict(r, console)
    assert "no reference for sin:" in console.file.getvalue()  # type: ignore[attr-defined]
    payload = json.loads(check_report_texts(r)[1])
    assert payload["ops"] == {"sin": {"reference": "none"}}
    given = gradlab.check(vf.Sin, [x], name="sin", reference=vf.sin_reference,
                          checks=FIRST_ORDER)
    assert json.loads(check_report_texts(given)[1])["ops"] == {"sin": {"reference": "given"}}
    res = cli("no_reference.yaml", tmp_path)
    assert res.exit_code == 0 and "no reference for Sin" in " ".join(res.output.split())
    (path,) = tmp_path.glob("check-*.json")
    assert json.loads(path.read_text())["ops"]["Sin"] == {"reference": "none"}


# --- 0-d tensors stay 0-d in every variant ----------------------------------------------------


def scale_example() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    return [x, torch.tensor(0.5, dtype=torch.float64, requires_grad=True)]


def test_a_0d_scale_stays_0d_in_every_variant_and_its_sign_bug_is_still_caught() -> None:
    ok = gradlab.check(vf.ZeroDimScale.apply, scale_example(), reference=vf.scale_reference)
    assert ok.passed, said(ok)
    variants = {r.variant for r in ok.rows}
    assert "ragged[4->5]" in variants and len(variants) > 10, variants
    bad = gradlab.check(vf.ZeroDimScaleSignBug.apply, scale_example(),
                        reference=vf.scale_reference)
    wrong = [r for r in bad.failures if r.check == "gradient"]
    # the base run and the variants alike: w's gradient (input 1), never a shape
    assert any(r.variant == "base" for r in wrong), said(bad)
    assert {(f.subject, f.index, f.hint) for r in wrong for f in r.findings} <= {
        ("input", 1, h) for h in ("", *VALUE_HINTS)}, said(bad)


class RowsOfFour(torch.autograd.Function):
    """2x; its backward checks a size forward never does (4 rows, a kernel's fixed horizon):
    it raises at the ragged variant's 5 rows.  wrong_shape: BROKEN instead, past 4 rows its
    gradient keeps 4 of them (autograd refuses it)."""

    wrong_shape = False

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    @classmethod
    def backward(cls, ctx: Any, g: torch.Tensor) -> torch.Tensor:
        if cls.wrong_shape:
            return 2 * g[:4]
        assert g.shape[0] == 4, "a horizon of 4 steps"
        return 2 * g


class RowsOfFourWrongShape(RowsOfFour):
    wrong_shape = True


def test_a_backward_raising_only_at_the_ragged_sizes_warns_as_a_reshaped_edge() -> None:
    x = torch.rand(4, 8, dtype=torch.float64).requires_grad_()
    r = gradlab.check(RowsOfFour, [x], reference=lambda t: 2 * t, checks=FIRST_ORDER)
    ragged = [x for x in r.rows if x.variant.startswith("ragged") and x.check == "gradient"]
    assert ragged and {(x.status, x.reason) for x in ragged} >= {("warn", "reshaped_raises")}
    assert not r.failures, said(r)
    wrong = gradlab.check(RowsOfFourWrongShape, [x], reference=lambda t: 2 * t,
                          checks=FIRST_ORDER)
    assert any(x.variant.startswith("ragged") for x in wrong.failures), said(wrong)

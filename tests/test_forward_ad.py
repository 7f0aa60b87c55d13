"""The forward_ad check (issue 22, must-have 1): a Function's hand-written jvp (what
torch.func.jvp, jacfwd and dual numbers run) against central finite differences along random
tangents and against the reference's jvp, through `gradlab.check` and through a spec; a
Function without jvp where the reference has forward mode is a warn capability
(`requires: [forward_ad]` makes it a failure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.results import CheckRow
from gradlab.results.capabilities import NO, YES, capability_matrix

FAD = DATA / "forward_ad"
sys.path.insert(0, str(FAD))
import fad_functions as ff  # noqa: E402


def x() -> torch.Tensor:
    return torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def fad_row(fn: object, args: list[torch.Tensor], reference: object = torch.tanh,
            **kw: object) -> CheckRow:
    report = gradlab.check(fn, args, reference=reference, **kw)
    (row,) = [r for r in report.rows if r.check == "forward_ad"]
    return row


@pytest.mark.parametrize("mode", ["auto", "fast", "dense"])
def test_a_correct_jvp_passes(mode: str) -> None:
    row = fad_row(ff.tanh, [x()], mode=mode)
    assert row.status == "pass", row
    report = gradlab.check(ff.tanh, [x()], reference=torch.tanh, mode=mode)
    assert report.passed
    (line,) = capability_matrix(report.rows)
    assert line.cell("forward_ad").state == YES


@pytest.mark.parametrize("mode", ["auto", "fast", "dense"])
def test_a_jvp_using_x_where_tanh_belongs_fails_where_backward_is_right(mode: str) -> None:
    report = gradlab.check(ff.tanh_jvp_uses_x, [x()], reference=torch.tanh, mode=mode)
    assert not report.passed
    assert {r.check for r in report.failures} == {"forward_ad"}  # backward is right
    (row,) = report.failures
    assert row.hint == "forward_ad_only"
    (f,) = row.findings
    assert f.subject == "input" and f.index == 0 and f.worst
    # localised: the worst entry is on the diagonal (tanh is elementwise)
    assert all(e.input_index == e.output_index for e in f.worst)


@pytest.mark.parametrize("mode", ["auto", "fast"])
def test_a_jvp_wrong_by_a_factor_2_is_constant_factor(mode: str) -> None:
    row = fad_row(ff.tanh_jvp_doubled, [x()], mode=mode)
    assert (row.status, row.hint) == ("fail", "constant_factor")


def test_the_wrong_input_is_named() -> None:
    w = torch.rand(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    row = fad_row(ff.mul_jvp_second_wrong, [x(), w], reference=ff.mul_reference, mode="fast")
    assert row.status == "fail"
    assert [f.index for f in row.findings] == [1]


def test_a_function_without_jvp_is_information_and_fails_when_required() -> None:
    # issue 28: most custom Functions have no jvp (gradcheck leaves check_forward_ad off):
    # the matrix's fwd column says so, no warn row, not even under --strict
    report = gradlab.check(ff.tanh_no_jvp, [x()], reference=torch.tanh)
    assert report.passed
    assert not [r for r in report.rows if r.status == "warn"]
    (row,) = [r for r in report.rows if r.check == "forward_ad"]
    assert (row.status, row.hint, row.reason) == ("pass", "", "forward_ad_missing")
    assert gradlab.check(ff.tanh_no_jvp, [x()], reference=torch.tanh, strict=True).passed
    (line,) = capability_matrix(report.rows)
    assert line.cell("forward_ad").state == NO
    required = gradlab.check(ff.tanh_no_jvp, [x()], reference=torch.tanh,
                             requires=["forward_ad"])
    assert not required.passed
    assert [r.check for r in required.failures] == ["forward_ad"]


def test_a_jvp_that_raises_is_an_error_not_a_missing_capability() -> None:
    row = fad_row(ff.TanhJvpNone.apply, [x()])
    assert (row.status, row.reason) == ("error", ""), row
    assert "RuntimeError" in row.note


def cdist_of_second(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Correct: torch.cdist has no forward-mode formula, met only along y."""
    return x * 2 + torch.cdist(y, y)


def pairwise_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + ((y[:, None] - y[None]) ** 2).sum(-1).sqrt()


def test_forward_mode_missing_along_one_input_only_is_information() -> None:
    # torchrbf's RBF interpolator (the float32 calibration set): an error row before
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 3, generator=gen, dtype=torch.float64).requires_grad_()
    y = torch.randn(3, 2, generator=gen, dtype=torch.float64).requires_grad_()
    r = gradlab.check(cdist_of_second, [x, y], reference=pairwise_reference,
                      checks=["forward_ad"])
    assert [(a.status, a.reason) for a in r.rows] == [("pass", "forward_ad_missing")]


def test_neither_with_forward_mode_is_a_declared_skip() -> None:
    # no reference and no jvp: nothing has forward mode, nothing is lost
    row = fad_row(ff.tanh_no_jvp, [x()], reference=None)
    assert (row.status, row.declared, row.reason) == ("skip", True, "forward_ad_unsupported")


def test_without_reference_a_jvp_is_judged_by_finite_differences() -> None:
    assert fad_row(ff.tanh, [x()], reference=None).status == "pass"
    assert fad_row(ff.tanh_jvp_uses_x, [x()], reference=None).status == "fail"


def run_spec(name: str, tmp: Path) -> tuple[int, str]:
    # --table full: every check's line, forward_ad's included, for a passing case too
    result = CliRunner().invoke(app, ["check", str(FAD / name), "--no-isolate",
                                      "--report-dir", str(tmp), "--table", "full"])
    return result.exit_code, result.output


@pytest.mark.parametrize(("spec", "code", "words"), [
    ("tanh_ok.yaml", 0, "forward_ad"),
    ("tanh_jvp_wrong.yaml", 1, "the jvp is wrong where backward is right"),
    ("tanh_no_jvp.yaml", 0, "0 warnings"),
    ("tanh_no_jvp_required.yaml", 1, "add a jvp staticmethod"),
])
def test_specs(spec: str, code: int, words: str, tmp_path: Path) -> None:
    exit_code, out = run_spec(spec, tmp_path)
    assert exit_code == code, out
    assert words in " ".join(out.split()), out


def test_the_matrix_has_a_fwd_column(tmp_path: Path) -> None:
    exit_code, out = run_spec("tanh_no_jvp.yaml", tmp_path)
    assert exit_code == 0 and " fwd " in out and "WARN" not in out
    # the matrix's line comes after the table's: op, 1st, 2nd, fwd, ...
    line = [ln for ln in out.splitlines() if ln.split()[:1] == ["tanh_no_jvp"]][-1]
    assert line.split()[3] == "no", out


def test_the_first_dual_number_adds_no_warning_to_the_users_run() -> None:
    """torch's forward-mode decompositions script functions with the deprecated
    torch.jit.script when first loaded: a check (in a fresh process, where that load happens)
    must not hand those DeprecationWarnings to the user's test summary."""
    code = ("import warnings, torch, gradlab\n"
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)\n"
            "assert gradlab.check(torch.exp, [x], reference=torch.exp).passed\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]

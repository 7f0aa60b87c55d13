"""Complex tensors are refused, never checked on their real part (issue 22 item 2's floor):
until gradlab has Wirtinger checks, a complex Function must not come out green.  Sparse
tensors are refused up front too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.errors import ComplexUnsupportedError
from gradlab.render.words import message

HERE = DATA / "complex"
sys.path.insert(0, str(HERE))
import complex_functions as cf  # noqa: E402


def test_complex_inputs_are_refused_by_the_api_with_the_argument_named() -> None:
    a = torch.randn(3, dtype=torch.complex128, requires_grad=True)
    b = torch.randn(3, dtype=torch.complex128, requires_grad=True)
    with pytest.raises(ComplexUnsupportedError, match=r"args\[1\] is complex128"):
        gradlab.check(cf.MulNoConj.apply, [torch.randn(3, dtype=torch.float64), b],
                      reference=cf.mul_reference)
    with pytest.raises(ValueError, match="Wirtinger"):  # a ValueError like any bad argument
        gradlab.check(cf.MulNoConj.apply, [a, b], reference=cf.mul_reference)
    with pytest.raises(ComplexUnsupportedError, match=r"kwargs\['w'\]"):
        gradlab.check(lambda x, w: x * w, [torch.randn(3, dtype=torch.float64)],
                      kwargs={"w": a.detach()})


def test_sparse_inputs_are_refused_by_the_api_too() -> None:
    dense = torch.randn(3, 4, dtype=torch.float64)
    sparse = dense.to_sparse().requires_grad_()
    with pytest.raises(ValueError, match=r"args\[0\] has layout torch.sparse_coo"):
        gradlab.check(torch.sparse.sum, [sparse])
    assert gradlab.check(torch.sin, [dense.requires_grad_()], reference=torch.sin).passed


def test_a_complex_output_is_an_error_row_not_a_pass() -> None:
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(cf.Rfft.apply, [x], reference=cf.rfft_reference)
    assert not r.passed
    errors = [row for row in r.rows if row.status == "error"]
    assert errors and all(row.hint == "complex_unsupported" for row in errors)
    assert not any(row.status == "pass" and row.check in ("forward", "gradient", "jacobian")
                   for row in r.rows)
    assert "output 0 is complex128" in message(errors[0])
    assert errors[0].crash_location == ""  # no line of the Function is at fault


def test_a_real_function_still_passes() -> None:
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    assert gradlab.check(torch.sin, [x], reference=torch.sin).passed


def test_through_specs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(HERE)
    bad = CliRunner().invoke(app, ["check", "complex_input.yaml", "--no-isolate",
                                   "--report-dir", str(tmp_path)])
    assert bad.exit_code == 2, bad.output
    line = bad.output.strip()
    assert "complex_input.yaml: args[0].dtype: 'complex64'" in line and "\n" not in line
    out = CliRunner().invoke(app, ["check", "rfft.yaml", "--no-isolate",
                                   "--report-dir", str(tmp_path)])
    assert out.exit_code == 1 and "complex_unsupported" in out.output, out.output

"""The batched_grad capability (gradlab.checks.numeric.batched_grad): backward under vmap over a
batch of grad_outputs (autograd.grad with is_grads_batched) against one backward per grad_output,
through gradlab.check and through specs, beside a correct twin."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.checks.numeric import batched_grad
from gradlab.cli import app
from gradlab.results import FAIL, PASS, SKIP
from gradlab.results.capabilities import NA, NO, WRONG, YES, capability_matrix

FOLDER = DATA / "batched_grad"
sys.path.insert(0, str(FOLDER))
import bg_functions as bg  # noqa: E402


def x() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(3, 4, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()]


def row(report: gradlab.Report) -> gradlab.CheckRow:  # type: ignore[name-defined]
    (r,) = [r for r in report.rows if r.check == "capabilities" and r.variant == "batched_grad"]
    return r


def state(report: object) -> str:
    (line,) = capability_matrix(report.rows)  # type: ignore[attr-defined]
    return line.cell("batched_grad").state


def test_a_correct_function_passes() -> None:
    r = gradlab.check(bg.Exp, x(), reference=torch.exp, requires=["batched_grad"])
    assert r.passed and row(r).status == PASS and state(r) == YES


@pytest.mark.parametrize("fn", [bg.ExpSkipsZero, bg.ExpItemScaled])
def test_a_backward_vmap_refuses_is_information_and_fails_when_required(fn: object) -> None:
    r = gradlab.check(fn, x(), reference=torch.exp)
    assert r.passed
    assert (row(r).status, row(r).reason) == (PASS, "batched_grad_missing")
    assert state(r) == NO
    r = gradlab.check(fn, x(), reference=torch.exp, requires=["batched_grad"])
    assert not r.passed
    assert (row(r).status, row(r).hint) == (FAIL, "batched_grad_missing")


def test_grad_output_data_is_refused_not_a_crash() -> None:
    """torch's legacy vmap crashes the process on .data of a batched tensor: gradlab's guard
    makes it raise (a missing capability), and is gone afterwards.  (grad_output.data also
    detaches double backward: second_order's business, not checked here.)"""
    r = gradlab.check(bg.ExpGradData, x(), reference=torch.exp,
                      checks=["forward", "gradient", "capabilities"])
    assert r.passed and (row(r).status, row(r).reason) == (PASS, "batched_grad_missing")
    assert ".data" in row(r).note
    assert "data" not in torch.Tensor.__dict__


def test_a_reference_that_cannot_either_is_a_declared_skip() -> None:
    r = gradlab.check(bg.ExpItemScaled, x(), reference=bg.exp_item_reference,
                      requires=["batched_grad"])
    assert (row(r).status, row(r).reason, row(r).declared) == (
        SKIP, "batched_grad_unsupported", True)
    assert state(r) == NA


def test_a_backward_wrong_only_under_vmap_fails() -> None:
    r = gradlab.check(bg.ExpFallbackClipped, x(), reference=torch.exp)
    assert not r.passed
    assert [f.hint for f in r.failures] == ["batched_grad_wrong"]
    assert row(r).findings[0].subject == "input" and state(r) == WRONG


def test_an_old_torch_is_a_declared_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.autograd.grad

    def old_grad(*args: object, is_grads_batched: bool = False, **kw: object) -> object:
        if is_grads_batched:
            raise TypeError("grad() got an unexpected keyword argument 'is_grads_batched'")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.autograd, "grad", old_grad)
    r = gradlab.check(bg.Exp, x(), reference=torch.exp, checks=["capabilities"])
    assert (row(r).status, row(r).reason, row(r).declared) == (
        SKIP, "batched_grad_old_torch", True)
    assert torch.__version__ in row(r).note
    assert batched_grad.CAPABILITY == "batched_grad"


@pytest.mark.parametrize(("spec", "code", "hint"), [
    ("bg_ok", 0, ""), ("bg_branch", 0, ""), ("bg_branch_required", 1, "batched_grad_missing"),
    ("bg_wrong", 1, "batched_grad_wrong")])
def test_through_specs(spec: str, code: int, hint: str, monkeypatch: pytest.MonkeyPatch,
                       tmp_path: Path) -> None:
    monkeypatch.chdir(FOLDER)
    out = CliRunner().invoke(app, ["check", f"{spec}.yaml", "--no-isolate",
                                   "--report-dir", str(tmp_path)])
    assert out.exit_code == code, out.output
    assert hint in out.output

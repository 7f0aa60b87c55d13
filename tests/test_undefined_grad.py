"""gradcheck's check_undefined_grad for one-output Functions: backward handed an undefined
gradient (a Function with ctx.set_materialize_grads(False) gets None) must not crash and must
give no gradient; multi-output Functions had this through undefined_grad[outK] already."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.render.words import message

HERE = DATA / "undefined"
sys.path.insert(0, str(HERE))
import undefined_functions as uf  # noqa: E402


def example() -> list[torch.Tensor]:
    return [torch.randn(3, 4, dtype=torch.float64, requires_grad=True)]


def test_a_backward_that_cannot_take_none_fails_with_its_hint() -> None:
    r = gradlab.check(uf.ScaleNoneUnsafe.apply, example(), reference=uf.scale_reference,
                      checks=["forward", "gradient", "contract"])
    rows = [x for x in r.rows if x.variant == "undefined_grad[out0]"]
    assert rows and all(x.failed and x.hint == "undefined_grad" for x in rows), \
        [(x.variant, x.status, x.hint, message(x)) for x in r.rows]
    assert "NoneType" in message(rows[0])
    assert not r.passed


@pytest.mark.parametrize("fn", [uf.ScaleNoneSafe.apply, torch.exp])
def test_functions_that_handle_it_pass(fn: object) -> None:
    ref = uf.scale_reference if fn is not torch.exp else torch.exp
    r = gradlab.check(fn, example(), reference=ref, checks=["forward", "gradient", "contract"])
    rows = [x for x in r.rows if x.variant == "undefined_grad[out0]"]
    assert rows and all(x.status == "pass" for x in rows)
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


def test_through_specs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(HERE)
    bad = CliRunner().invoke(app, ["check", "none_unsafe.yaml", "--no-isolate",
                                   "--report-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "undefined_grad" in bad.output, bad.output
    ok = CliRunner().invoke(app, ["check", "none_safe.yaml", "--no-isolate",
                                  "--report-dir", str(tmp_path)])
    assert ok.exit_code == 0, ok.output

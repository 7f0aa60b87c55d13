"""The trust specs (tests/data/trust/): none gives a green run unless it declares what does not
apply, each correct twin passes, and the same folder gives identical rows run after run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from typer.testing import CliRunner

from gradlab.checks.run import driver
from gradlab.checks.run.options import Options
from gradlab.cli import app
from gradlab.render.words import message
from gradlab.spec import resolve

TRUST = DATA / "trust"
cli = CliRunner()

#: spec -> (exit code, a line the output must hold); the broken ones first, then the twins.
EXPECTED = {
    "cuda_only.yaml": (2, "cuda_only.yaml: devices: cuda is not available"),
    "raising_reference.yaml": (1, "the reference failed on this case"),
    "once_differentiable.yaml": (1, "second_order_missing"),
    "once_differentiable_claimed.yaml": (1, "likely cause: once_differentiable: the op declares "
                                            "second_order: true"),
    "mismatched_args.yaml": (2, "mismatched_args.yaml: cases[1].args: case 'wrong_weight' "
                                "(float64): the Function and the reference both raise on its "
                                "inputs: RuntimeError: mat1 and mat2 shapes cannot be "
                                "multiplied"),
    "nan_bounds.yaml": (2, "nan_bounds.yaml: args[0].low: expected a finite number"),
    "nan_forward.yaml": (1, "non_finite"),
    # autograd sums the [3, 1] gradient into the 0-d input: the contract warns (summed_shape)
    # and the summed gradient is wrong, which fails the gradient row
    "int_arg_wrong_shape.yaml": (1, "shape [3, 1], expected []"),
    "state_changer.yaml": (1, "default_dtype left at torch.float64"),
    "working_reference.yaml": (0, "PASSED"),
    "once_differentiable_declared.yaml": (0, "PASSED"),
    "finite_forward.yaml": (0, "PASSED"),
    "int_arg_right_shape.yaml": (0, "PASSED"),
}


@pytest.fixture(autouse=True)
def in_trust_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    # `function: trust_functions:X` resolves from the working directory
    monkeypatch.chdir(TRUST)
    monkeypatch.syspath_prepend(str(TRUST))


def check(*args: str, report_dir: Path) -> Any:
    return cli.invoke(app, ["check", *args, "--report-dir", str(report_dir)])


def test_every_spec_in_the_folder_has_an_expectation() -> None:
    assert {p.name for p in TRUST.glob("*.yaml")} == set(EXPECTED) | {"cpu_and_cuda.yaml"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_trust_spec(name: str, tmp_path: Path) -> None:
    code, line = EXPECTED[name]
    result = check(name, report_dir=tmp_path)
    assert result.exit_code == code, result.output
    # words wrap at the console's width: compare with the whitespace folded
    assert line in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_a_spec_mistake_is_one_line_and_leaves_no_report(tmp_path: Path) -> None:
    # the Function and the reference raise alike on a case's own inputs: the spec's mistake
    result = check("mismatched_args.yaml", report_dir=tmp_path)
    assert result.exit_code == 2, result.output
    # the progress of the case before it, then the one line; no table, no verdict
    *_, line = result.output.splitlines()
    assert line.startswith("gradlab: error: mismatched_args.yaml: cases[1].args: "), line
    assert "FAILED" not in result.output and "capabilities" not in result.output
    assert not list(tmp_path.glob("check-*")), list(tmp_path.iterdir())
    # the case that fits, alone, runs and passes
    result = check("mismatched_args.yaml", "--case", "fits", report_dir=tmp_path)
    assert result.exit_code == 0, result.output


def test_skip_unavailable_is_declared_and_counted(tmp_path: Path) -> None:
    result = check("cpu_and_cuda.yaml", "--skip-unavailable", report_dir=tmp_path)
    assert result.exit_code == 0, result.output
    assert "3 skipped (cuda_unavailable 3)" in " ".join(result.output.split())
    (path,) = tmp_path.glob("check-*.json")
    rows = json.loads(path.read_text())["rows"]
    skipped = [r for r in rows if r["status"] == "skip"]
    assert skipped and all(r["declared"] and r["device"] == "cuda" for r in skipped)


def test_skip_unavailable_with_nothing_left_is_not_a_pass(tmp_path: Path) -> None:
    result = check("cuda_only.yaml", "--skip-unavailable", report_dir=tmp_path)
    assert result.exit_code == 1, result.output
    assert "nothing was checked" in " ".join(result.output.split())


def test_a_missing_second_order_is_information_even_under_strict(tmp_path: Path) -> None:
    # once_differentiable where the reference is twice differentiable (no jvp either): the
    # capability matrix says `no`, no warn row (gradlab.checks.diagnosis.policy); requires: fails it
    # (once_differentiable.yaml)
    spec = tmp_path / "informs.yaml"
    spec.write_text("function: trust_functions:ExpOnce\nreference: torch:exp\n"
                    "args: [{shape: [3, 4]}]\n")
    for strict in ((), ("--strict",)):
        result = check(str(spec), *strict, report_dir=tmp_path)
        assert result.exit_code == 0, result.output
        assert " 0 warnings" in " ".join(result.output.split()), result.output


def test_a_warn_capability_warns_by_default_and_fails_under_strict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # raising under torch.autocast where the reference runs: a crash in a mixed-precision step
    monkeypatch.syspath_prepend(str(DATA / "bugclasses"))
    spec = DATA / "bugclasses" / "autocast_missing.yaml"
    result = check(str(spec), report_dir=tmp_path)
    assert result.exit_code == 0, result.output
    assert "1 warning (autocast_missing 1)" in " ".join(result.output.split())
    assert check(str(spec), "--strict", report_dir=tmp_path).exit_code == 1


def test_the_state_changer_fails_alone_and_the_next_op_passes() -> None:
    report = driver.run(resolve(str(TRUST / "state_changer.yaml")), Options())
    failing = {r.op for r in report.failures}
    assert failing == {"ExpLeavesFloat64Default"}, [message(r) for r in report.failures]
    later = [r for r in report.rows if r.op == "scale_by_new_ones"]
    assert later and all(r.status == "pass" for r in later)


def test_the_folder_gives_identical_rows_three_times() -> None:
    runnable = [n for n, (code, _) in EXPECTED.items() if code != 2]
    targets = [t for n in sorted(runnable) for t in resolve(str(TRUST / n))]

    def rows() -> str:
        report = driver.run(targets, Options())
        # as JSON text: NaN (a NaN forward's worst elements) must compare equal to itself
        return json.dumps([dataclasses.asdict(dataclasses.replace(r, seconds=0.0))
                           for r in report.rows], default=str)

    first = rows()
    assert first == rows() == rows()

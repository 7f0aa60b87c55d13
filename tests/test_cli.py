"""The CLI: exit codes 0/1/2, the table, the CSV, one-line errors without tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA, TESTS, run_cli
from typer.testing import CliRunner

from gradlab.cli import app
from gradlab.results import COLUMNS

runner = CliRunner()


def test_list_shows_every_op_without_importing_torch() -> None:
    code = ("import sys; from gradlab.cli import main; sys.argv=['gradlab','list']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("NO-TORCH")
    for name in ("linear", "conv2d", "blur", "modconv", "relu", "exp", "mulconstant"):
        assert name in out.stdout


def test_check_conv2d_double_passes_and_writes_csv(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", "conv2d", "--dtype", "double", "--report-dir",
                                 str(tmp_path), "--case", "out_channels_1", "--case", "basic"])
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output
    (csv,) = tmp_path.glob("check-*.csv")
    frame = pd.read_csv(csv)
    assert list(frame.columns[: len(COLUMNS)]) == list(COLUMNS)
    # the environment once per report: a one-row CSV beside it (and the JSON), not a column
    # repeated on every row
    (env,) = tmp_path.glob("env-check-*.csv")
    assert env.name == f"env-{csv.name}"
    env_frame = pd.read_csv(env)
    assert len(env_frame) == 1
    for col in ("torch_version", "device_name", "seed", "gradlab_version"):
        assert col in env_frame.columns and col not in frame.columns
    (js,) = tmp_path.glob("check-*.json")
    assert json.loads(js.read_text())["env"]["seed"] == env_frame["seed"][0] == 0
    assert f"report: {csv}, {js.name}, {env.name}" in result.output
    # autocast runs in bfloat16, edges/float16 the case in float16 (its graph): modes the
    # run's dtype does not choose
    own = frame[(frame["check"] != "autocast") & (frame["variant"] != "float16")]
    assert set(own["dtype"]) == {"float64"}
    assert set(frame[frame["variant"] == "float16"]["check"]) == {"edges"}
    assert set(frame["check"]) >= {"forward", "gradient", "jacobian", "second_order"}


def test_broken_user_function_exits_1_with_hint_and_repro(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    result = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"), "--report-dir",
                                 str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "no_chain_rule" in result.output
    assert "repro inputs:" in result.output
    assert list((tmp_path / "repro").glob("*.pt"))


def test_user_function_spec_passes(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(DATA / "user_ok.yaml"), "--report-dir",
                                 str(tmp_path)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["malformed.yaml", "empty.yaml", "top_list.yaml",
                                  "bad_shape.yaml", "unknown_key.yaml", "bad_function.yaml"])
def test_bad_spec_exits_2_with_one_line_no_traceback(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # the real entry point in this process: an exception escaping it fails the test
    code, _, err = run_cli(["check", str(DATA / name), "--report-dir", str(tmp_path)], capsys)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"gradlab: error: {DATA / name}: "), lines


def test_a_bad_spec_is_one_line_on_stderr_of_a_real_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gradlab", "check", str(DATA / "bad_shape.yaml"),
                           "--report-dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gradlab: error: "), lines


@pytest.mark.parametrize("args", [
    ["check", "no_such_op"],
    ["check", "exp", "--dtype", "int3"],
    ["check", "exp", "--device", "tpu"],
    ["check", "exp", "--mode", "slow"],
    ["check", "exp", "--check", "nope"],
    ["check", "exp", "--variant", "nope"],
    ["check"],
    ["frobnicate"],
])
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(args, capsys)
    assert code == 2, (out, err)
    assert "Traceback" not in err


def test_budget_stops_early_and_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", "modconv", "--budget", "0.001", "--report-dir",
                                 str(tmp_path)])
    assert result.exit_code == 1
    assert "stopped early by --budget" in result.output


def test_repro_file_and_command_rerun_the_same_case(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    import torch

    monkeypatch.chdir(TESTS)
    spec = str(DATA / "user_broken.yaml")
    first = runner.invoke(app, ["check", spec, "--report-dir", str(tmp_path), "--no-variants"])
    assert first.exit_code == 1
    (saved,) = list((tmp_path / "repro").glob("*float64*.pt"))
    data = torch.load(saved, weights_only=False)
    assert data["case"] == "base" and data["failures"]
    x = data["args"][0]
    # the command stands alone on its line: pasted as printed, it runs
    line = next(ln for ln in first.output.splitlines()
                if ln.startswith("  gradlab check ") and "float64" in ln)
    command = shlex.split(line)
    assert command[:2] == ["gradlab", "check"]
    again = runner.invoke(app, [*command[1:], "--report-dir", str(tmp_path / "again"),
                                "--no-variants"])
    assert again.exit_code == 1, again.output
    (saved_again,) = (tmp_path / "again" / "repro").glob("*float64*.pt")
    # the same case gets the same seed, so the same inputs, when re-run on its own
    assert torch.equal(torch.load(saved_again, weights_only=False)["args"][0], x)


def test_variant_option_keeps_only_those_families(tmp_path: Path) -> None:
    # `base` names the base case's rows: without it only the variants' rows are reported
    result = runner.invoke(app, ["check", "exp", "--dtype", "double", "--variant", "grad_output",
                                 "--variant", "base", "--report-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (csv,) = tmp_path.glob("check-*.csv")
    frame = pd.read_csv(csv)
    variants = set(frame[frame["check"] != "capabilities"]["variant"])
    assert variants == {"base", "grad_output:noncontiguous", "grad_output:transposed",
                        "grad_output:expanded"}


def test_gradlab_repro_reruns_a_case_from_its_saved_inputs(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    first = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"), "--report-dir",
                                str(tmp_path), "--no-variants", "--no-isolate"])
    assert first.exit_code == 1
    for saved in (tmp_path / "repro").glob("*.pt"):
        again = runner.invoke(app, ["repro", str(saved), "--report-dir", str(tmp_path / "r")])
        assert again.exit_code == 1, again.output
        assert "no_chain_rule" in again.output
    bad = tmp_path / "not_a_repro.pt"
    bad.write_bytes(b"junk")
    result = runner.invoke(app, ["repro", str(bad)])
    assert result.exit_code == 2 and "not a gradlab repro file" in result.output


def test_check_help_names_every_check() -> None:
    from gradlab.model import CHECKS

    result = runner.invoke(app, ["check", "--help"])
    assert result.exit_code == 0, result.output
    # the help wraps at the console's width: compare with the whitespace folded
    said = " ".join(result.output.split()).split("only these checks: ", 1)[1]
    assert said.startswith(", ".join(CHECKS) + " "), said
    assert "forward_ad" in CHECKS

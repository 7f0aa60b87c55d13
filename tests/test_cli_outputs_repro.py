"""Through gradlab's command-line entry point: every output path is checked before the first check
runs (exit 2, one line naming option and path, nothing run), a write that fails at the end keeps
the other outputs and names the one that failed, and a failing row's printed repro command
re-runs that row alone (issue 23, items 2 and 7).

The commands run in this process (conftest.run_cli, the entry point the installed `gradlab`
script calls): what is checked is what the command does, not the process around it (that the
installed script runs as one is tests/test_one_story.py's and tests/test_list_devices.py's).

tests/data/cli_rows/: sabotage.yaml's Function makes a folder at each path in
$GRADLAB_TEST_SABOTAGE while it runs (so whether a check ran shows on disk, and an output checked
writable before the run is not at its end); two_ops.yaml holds two ops sharing the case name
`small`, the first BROKEN for non-contiguous inputs (several variants fail, the base passes).
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, run_cli

ROWS = DATA / "cli_rows"
SABOTAGE = ROWS / "sabotage.yaml"
TWO_OPS = ROWS / "two_ops.yaml"
#: Quick bench settings (what is measured does not matter here).
QUICK_BENCH = ["--min-time", "0.01", "--min-samples", "1", "--max-time", "0.05"]


@dataclass(frozen=True)
class Ran:
    """What one `gradlab ARGS` gave: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


Gradlab = Callable[..., Ran]


@pytest.fixture
def gradlab(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Gradlab:
    """`gradlab ARGS` (in-process checks: GRADLAB_ISOLATE=0 from conftest), with
    $GRADLAB_TEST_SABOTAGE naming `sabotage`'s paths while it runs."""
    app = importlib.import_module("gradlab.cli.app")  # the module, not gradlab.cli.app (Typer)

    for console in (app.out, app.err):  # made at import: a 200-column terminal from here on
        monkeypatch.setattr(console, "width", 200)

    def run(args: list[str], sabotage: Sequence[Path] = ()) -> Ran:
        monkeypatch.setenv("GRADLAB_TEST_SABOTAGE", os.pathsep.join(map(str, sabotage)))
        return Ran(*run_cli(args, capsys))

    return run


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def unwritable(tmp_path: Path, option: str) -> tuple[list[str], Path]:
    """The arguments that give `option` a path that cannot be written, and that path."""
    afile = tmp_path / "afile.txt"  # a regular file as a folder: unwritable even for root
    afile.write_text("")
    if option == "--junit":
        return ["--junit", str(afile / "out.xml")], afile / "out.xml"
    if option == "--summary-md":  # a folder where the file should go
        return ["--summary-md", str(tmp_path)], tmp_path
    if option == "--report-dir":
        return ["--report-dir", str(afile / "reports")], afile / "reports"
    if option == "--plots":  # REPORT_DIR/plots is a file
        (tmp_path / "r" / "plots").parent.mkdir(exist_ok=True)
        (tmp_path / "r" / "plots").write_text("")
        return ["--plots"], tmp_path / "r" / "plots"
    assert option == "/proc"  # a folder nothing can be created in, root or not
    return ["--junit", "/proc/gradlab-no-such/out.xml"], Path("/proc/gradlab-no-such")


@pytest.mark.parametrize("option", ["--junit", "--summary-md", "--report-dir", "--plots",
                                    "/proc"])
def test_an_unwritable_output_exits_2_before_any_check(option: str, tmp_path: Path,
                                                      gradlab: Gradlab) -> None:
    args, bad = unwritable(tmp_path, option)
    marker = tmp_path / "a-check-ran"
    proc = gradlab(["check", str(SABOTAGE), "--no-variants", "--report-dir",
                    str(tmp_path / "r"), *args], sabotage=[marker])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = lines(proc.stdout + proc.stderr)
    named = "--junit" if option == "/proc" else option
    assert line.startswith(f"gradlab: error: {named}: ") and str(bad) in line, line
    assert not marker.exists()  # nothing ran
    assert not list(tmp_path.rglob("check-*"))  # no report


@pytest.mark.parametrize("command", ["bench", "merge"])
def test_bench_and_merge_check_their_outputs_first(command: str, tmp_path: Path,
                                                   gradlab: Gradlab) -> None:
    args, bad = unwritable(tmp_path, "--junit")
    marker = tmp_path / "a-check-ran"
    what = [str(SABOTAGE), *QUICK_BENCH] if command == "bench" else [str(tmp_path / "x.json")]
    proc = gradlab([command, *what, "--report-dir", str(tmp_path / "r"), *args],
                   sabotage=[marker])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = lines(proc.stdout + proc.stderr)
    assert line.startswith("gradlab: error: --junit: ") and str(bad) in line, line
    assert not marker.exists() and not list(tmp_path.rglob("bench-*"))


@pytest.mark.parametrize("option", ["--junit", "--summary-md"])
def test_a_write_failing_at_the_end_keeps_the_other_outputs(option: str, tmp_path: Path,
                                                           gradlab: Gradlab) -> None:
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    lost = junit if option == "--junit" else summary
    proc = gradlab(["check", str(SABOTAGE), "--no-variants", "--report-dir", str(tmp_path / "r"),
                    "--junit", str(junit), "--summary-md", str(summary)], sabotage=[lost])
    assert lost.is_dir()  # the check ran and took the file's place
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in lines(proc.stderr) if ln.startswith("gradlab: error:")]
    assert errors == [f"gradlab: error: {option}: {lost}: Is a directory (not written; the "
                      "other outputs were)"], proc.stderr
    kept = summary if lost == junit else junit
    assert kept.is_file() and kept.stat().st_size > 0
    assert len(list((tmp_path / "r").glob("check-*.json"))) == 1
    assert len(list((tmp_path / "r").glob("check-*.csv"))) == 1
    assert "PASSED" in proc.stdout  # the run itself passed: exit 2 is the lost file's


def test_a_bench_write_failing_at_the_end_keeps_its_report(tmp_path: Path,
                                                           gradlab: Gradlab) -> None:
    junit = tmp_path / "junit.xml"
    proc = gradlab(["bench", str(SABOTAGE), *QUICK_BENCH, "--report-dir", str(tmp_path / "r"),
                    "--junit", str(junit)], sabotage=[junit])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"gradlab: error: --junit: {junit}: Is a directory" in proc.stderr
    assert len(list((tmp_path / "r").glob("bench-*.json"))) == 1


def report_rows(folder: Path) -> list[dict[str, Any]]:
    (path,) = folder.glob("check-*.json")
    rows: list[dict[str, Any]] = json.loads(path.read_text())["rows"]
    return rows


#: What identifies a row, and what says how it failed.
WHERE = ("op", "case", "variant", "dtype", "device")
HOW = ("check", "status", "hint")


def rerun(gradlab: Gradlab, command: str, report_dir: Path) -> Ran:
    """A printed repro command, run as printed (with its own report folder)."""
    words = shlex.split(command)
    assert words[:2] == ["gradlab", "check"], command
    return gradlab([*words[1:], "--report-dir", str(report_dir)])


def test_the_repro_command_reruns_exactly_the_failing_row(tmp_path: Path,
                                                          gradlab: Gradlab) -> None:
    first = gradlab(["check", str(TWO_OPS), "--report-dir", str(tmp_path / "all")])
    assert first.returncode == 1, first.stdout + first.stderr
    rows = report_rows(tmp_path / "all")
    failing = [r for r in rows if r["status"] in ("fail", "error")]
    # the bug shows in several variants of both cases and both dtypes, never in the base
    assert {r["variant"] for r in failing} >= {"noncontiguous[0]", "transposed[0]"}
    assert {r["op"] for r in failing} == {"square_contiguous_only"}
    assert {(r["case"], r["dtype"]) for r in failing} == {
        (c, d) for c in ("small", "wide") for d in ("float64", "float32")}
    row = next(r for r in failing if r["case"] == "small" and r["dtype"] == "float32"
               and r["variant"] == "transposed[0]")
    command = row["repro_command"]
    assert ("--op square_contiguous_only --case small --variant 'transposed[0]' --show gradient "
            "--dtype float32 "
            "--device cpu") in command
    assert command in first.stdout or any(
        r["repro_command"] in first.stdout for r in failing)  # printed, one per finding
    again = rerun(gradlab, command, tmp_path / "one")
    assert again.returncode == 1, again.stdout + again.stderr
    # exactly that one row: its op, case, variant, dtype, device and check (the base case and
    # the variant's forward ran, as its yardstick, but are not reported), failing the same way
    (bad,) = report_rows(tmp_path / "one")
    assert tuple(bad[k] for k in WHERE + HOW) == tuple(row[k] for k in WHERE + HOW)
    assert bad["max_abs_err"] == pytest.approx(row["max_abs_err"])
    assert "1 op, 1 case, 1 check: 0 passed, 1 failed" in " ".join(again.stdout.split())


def test_a_base_row_repro_runs_only_its_own_check(tmp_path: Path, gradlab: Gradlab) -> None:
    first = gradlab(["check", str(DATA / "user_broken.yaml"), "--no-variants", "--check",
                     "gradient", "--check", "jacobian", "--dtype", "float64",
                     "--report-dir", str(tmp_path / "all"), "--path", str(DATA.parent)])
    assert first.returncode == 1, first.stdout + first.stderr
    failing = [r for r in report_rows(tmp_path / "all") if r["status"] == "fail"]
    assert {r["check"] for r in failing} == {"gradient", "jacobian"}
    for k, row in enumerate(failing):
        assert (f"--variant base --check {row['check']} --show {row['check']} --dtype"
                in row["repro_command"])
        again = rerun(gradlab, row["repro_command"], tmp_path / str(k))
        assert again.returncode == 1, again.stdout + again.stderr
        (one,) = report_rows(tmp_path / str(k))
        assert tuple(one[x] for x in WHERE + HOW) == tuple(row[x] for x in WHERE + HOW)


@pytest.mark.parametrize(("args", "expected"), [
    (["--op", "square_contiguos_only"], "gradlab: error: --op: unknown op "
                                        "'square_contiguos_only' (did you mean "
                                        "square_contiguous_only?"),
    (["--op", "square", "--case", "wide"], "gradlab: error: --case: no case named 'wide' "
                                           "("),
    (["--variant", "transposed(0)"], "gradlab: error: --variant: unknown variant family "
                                     "'transposed(0)'"),
    (["--variant", "base[0]"], "gradlab: error: --variant: unknown variant family 'base[0]'"),
    (["--show", "gradients"], "gradlab: error: --show: unknown check 'gradients' (did you "
                              "mean gradient?"),
    (["--variant", "transposed[0]", "--check", "jacobian"],
     "gradlab: error: --variant: jacobian run on the base case only (add --variant base)"),
])
def test_row_selection_mistakes_exit_2_in_one_line(args: list[str], expected: str,
                                                    tmp_path: Path, gradlab: Gradlab) -> None:
    proc = gradlab(["check", str(TWO_OPS), "--report-dir", str(tmp_path), *args])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = lines(proc.stdout + proc.stderr)
    assert line.startswith(expected), line


def test_an_output_file_is_probed_without_being_changed(tmp_path: Path) -> None:
    from gradlab.errors import ReportError
    from gradlab.fileio import ensure_writable_file

    old = tmp_path / "old.xml"
    old.write_text("kept until the real write")
    assert ensure_writable_file(old) == old and old.read_text() == "kept until the real write"
    assert not (tmp_path / "new" / "x.md").exists()
    ensure_writable_file(tmp_path / "new" / "x.md")  # its folder is made, the file is not
    assert (tmp_path / "new").is_dir() and not list((tmp_path / "new").iterdir())
    ensure_writable_file("/dev/null")  # a device is written in place
    os.mkfifo(tmp_path / "fifo")
    for bad, why in ((tmp_path / "fifo", "a FIFO is in the way"),
                     (tmp_path, "a folder is in the way")):
        with pytest.raises(ReportError, match=f"^{bad}: {why}"):
            ensure_writable_file(bad)

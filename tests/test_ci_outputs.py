"""CI outputs: JUnit XML (parsed with junitparser), the Markdown summary, the workflow file,
-q, --fail-fast, -k, and plain output off a terminal / under NO_COLOR."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import DATA, ROOT, TESTS
from rich.text import Text
from typer.testing import CliRunner

from gradlab.cli import app
from gradlab.render import console as console_mod
from gradlab.render.junit import bench_junit, check_junit, write_junit
from gradlab.render.markdown import summary_markdown
from gradlab.results import ERROR, FAIL, PASS, SKIP, CheckRow, Report
from gradlab.results.bench import BenchReport, BenchRow

runner = CliRunner()


def junitparser() -> Any:
    """junitparser, imported where it is used: on a machine without it (the GPU one) only the
    tests that parse JUnit XML skip, and collecting this file (pytest -m cuda) still works."""
    return pytest.importorskip("junitparser")


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One check of a failing and a passing Function, with --junit and --summary-md.

    In-process, as conftest's _no_worker_process has every test's run (a module-scoped
    fixture is made before that function-scoped one): these tests are about the files
    written, not where the checks ran."""
    out = tmp_path_factory.mktemp("ci")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(TESTS)
        mp.setenv("GRADLAB_ISOLATE", "0")
        result = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"),
                                     str(DATA / "user_ok.yaml"), "--report-dir", str(out),
                                     "--junit", str(out / "junit.xml"),
                                     "--summary-md", str(out / "summary.md")])
    frame = pd.read_csv(next(out.glob("check-*.csv")))
    return {"result": result, "out": out, "frame": frame}


def failing_checks(frame: pd.DataFrame) -> set[tuple[str, str, str]]:
    bad = frame[frame["status"].isin([FAIL, ERROR])]
    return set(zip(bad["op"], bad["case"], bad["check"], strict=True))


@pytest.mark.xdist_group("ci_broken_run")  # one worker makes broken_run
def test_junit_has_one_failing_testcase_per_failing_check(broken_run: dict[str, Any]) -> None:
    assert broken_run["result"].exit_code == 1
    xml = junitparser().JUnitXml.fromfile(str(broken_run["out"] / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"SquareNoChainRule", "Square"}
    failed = {(s.name, *c.name.split("/")) for s in xml for c in s
              if any(isinstance(r, junitparser().Failure) for r in c.result)}
    # exactly one testcase per failing (op, case, check), however many variant rows failed
    assert failed == failing_checks(broken_run["frame"])
    assert ("SquareNoChainRule", "base", "gradient") in failed
    assert not any(c.result for c in suites["Square"])  # the correct twin passes everywhere
    frame = broken_run["frame"]
    groups = frame.groupby(["op", "case", "check"]).ngroups
    assert sum(len(list(s)) for s in xml) == groups
    assert suites["SquareNoChainRule"].failures == len(failed)


@pytest.mark.xdist_group("ci_broken_run")  # one worker makes broken_run
def test_junit_failure_text_is_the_diagnosis_not_a_jacobian(broken_run: dict[str, Any]) -> None:
    xml = junitparser().JUnitXml.fromfile(str(broken_run["out"] / "junit.xml"))
    case = next(c for s in xml for c in s if s.name == "SquareNoChainRule"
                and c.name == "base/gradient")
    (failure,) = case.result
    assert failure.type == "no_chain_rule"
    assert "no_chain_rule" in failure.message and "rows failed" in failure.message
    assert "likely cause: no_chain_rule" in failure.text
    assert "grad[0]" in failure.text  # the worst elements say where
    # the finding once, numbered as every output numbers it, spoken for by its base row
    assert failure.text.startswith("FAIL SquareNoChainRule / base / input 0 (finding 1 of 1)")
    assert "gradient / base / float" in failure.text


def _row(status: str, **kw: Any) -> CheckRow:
    fields = {"op": "op<&>", "case": "c", "dtype": "float64", "device": "cpu",
              "variant": "base", "check": "forward"} | kw
    return CheckRow(fields.pop("op"), fields.pop("case"), fields.pop("dtype"),
                    fields.pop("device"), fields.pop("variant"), fields.pop("check"), status,
                    **fields)


def test_junit_escapes_markup_and_drops_control_characters(tmp_path: Path) -> None:
    report = Report(rows=[
        _row(ERROR, note='ValueError: bad <tensor> & "quote" \x00\x1b[31mred\x07'),
        _row(SKIP, check="jacobian", reason="cuda_unavailable", declared=True),
        _row(PASS, check="gradient"), _row(SKIP, check="gradient", device="cuda",
                                           reason="cuda_unavailable", declared=True),
    ])
    path = write_junit(check_junit(report), tmp_path / "j.xml")
    raw = path.read_bytes()
    assert b"\x00" not in raw and b"\x1b" not in raw and b"\x07" not in raw
    (suite,) = junitparser().JUnitXml.fromfile(str(path))
    assert suite.name == "op<&>"
    cases = {c.name: c for c in suite}
    (err,) = cases["c/forward"].result
    assert isinstance(err, junitparser().Error)
    assert 'bad <tensor> & "quote" [31mred' in err.text
    (skipped,) = cases["c/jacobian"].result
    assert isinstance(skipped, junitparser().Skipped)
    assert skipped.message == "CUDA is not available on this machine"
    assert cases["c/gradient"].result == []  # a pass beside a skip is a pass
    assert (suite.tests, suite.errors, suite.failures, suite.skipped) == (3, 1, 0, 1)


def test_junit_fails_a_skip_nobody_declared(tmp_path: Path) -> None:
    # as the exit code does: something asked for went unchecked
    report = Report(rows=[_row(PASS), _row(SKIP, check="contract",
                                           reason="raw_backward_unavailable")])
    xml = junitparser().JUnitXml.fromfile(str(write_junit(check_junit(report), tmp_path / "j.xml")))
    (suite,) = xml
    cases = {c.name: c for c in suite}
    assert isinstance(cases["c/contract"].result[0], junitparser().Failure)
    assert "could not be checked" in cases["c/contract"].result[0].text


def test_junit_marks_a_budget_cut_run_as_an_error(tmp_path: Path) -> None:
    report = Report(rows=[_row(PASS)], truncated=True)
    xml = junitparser().JUnitXml.fromfile(str(write_junit(check_junit(report), tmp_path / "j.xml")))
    run = next(c for s in xml for c in s if s.name == "gradlab")
    assert isinstance(run.result[0], junitparser().Error) and "--budget" in run.result[0].message


def test_bench_junit_one_testcase_per_op_case_and_phase(tmp_path: Path) -> None:
    rows = [BenchRow("exp", "big", "float32", "cpu", impl, phase, samples_s=[0.5, 0.5],
                     speedup=1.5 if impl == "custom" else None, speedup_low=1.2,
                     speedup_high=1.8)
            for impl in ("custom", "reference") for phase in ("forward", "backward")]
    rows.append(BenchRow("crash", "tiny", "float32", "cpu", "custom", "forward", status=ERROR,
                         note="ValueError: kaput"))
    xml = junitparser().JUnitXml.fromfile(str(write_junit(bench_junit(BenchReport(rows=rows)),
                                            tmp_path / "b.xml")))
    cases = {(s.name, c.name): c for s in xml for c in s}
    assert set(cases) == {("exp", "big/forward"), ("exp", "big/backward"),
                          ("crash", "tiny/forward")}
    (err,) = cases["crash", "tiny/forward"].result
    assert isinstance(err, junitparser().Error) and err.message == "ValueError: kaput"
    assert cases["exp", "big/forward"].result == []
    assert "speedup 1.5x [1.2, 1.8]" in (cases["exp", "big/forward"].system_out or "")


def test_cli_bench_writes_junit_and_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text(
        "ops:\n  - op: exp\n    bench: [{name: tiny, args: [{shape: [8, 8]}]}]\n")
    result = runner.invoke(app, ["bench", "spec.yaml", "--min-time", "0.001", "--min-samples",
                                 "3", "--report-dir", "out", "--junit", "out/b.xml", "--plots"])
    assert result.exit_code == 0, result.output
    xml = junitparser().JUnitXml.fromfile("out/b.xml")
    assert sorted(c.name for s in xml for c in s) == sorted(
        f"tiny/{p}" for p in ("forward", "forward_grad", "backward", "forward_backward"))
    pngs = sorted(p.name.rsplit("-", 1)[1] for p in (tmp_path / "out" / "plots").glob("*.png"))
    assert pngs == ["saved.png", "speedup.png"]


def table_rows(markdown: str) -> list[list[str]]:
    """The body rows of the first Markdown table, as cells."""
    first = markdown.split("\n|", 1)[1] if "\n|" in markdown else ""
    lines = ("|" + first).split("\n\n", 1)[0].splitlines()
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]


@pytest.mark.xdist_group("ci_broken_run")  # one worker makes broken_run
def test_summary_md_lists_each_finding_with_its_checks_variants_hint_and_message(
        broken_run: dict[str, Any]) -> None:
    text = (broken_run["out"] / "summary.md").read_text()
    assert text.startswith("## gradlab check: FAILED")
    (row,) = table_rows(text)  # one bug, one line, however many checks and variants show it
    frame = broken_run["frame"]
    bad = frame[frame["status"].isin([FAIL, ERROR])]
    assert (row[0], row[1], row[3]) == ("SquareNoChainRule", "base", "fail")
    assert row[2].split(", ") == list(dict.fromkeys(bad["check"]))
    # the small-values variant passes: a gradient of 2x at x ~ 1e-12 is below every tolerance
    failing = list(dict.fromkeys(bad["variant"]))
    ran = frame[frame["op"] == "SquareNoChainRule"]["variant"].nunique()
    assert row[4] == f"{len(failing)} of {ran}: {', '.join(failing)}" and len(failing) < ran
    assert "no_chain_rule" in row[5] and "input 0 [3, 4]" in row[6]
    assert "gradlab check" in text.split("Re-run a failing case:")[1]


def test_summary_md_cells_cannot_break_the_table() -> None:
    report = Report(rows=[_row(FAIL, note="a | b\nc <script>")])
    (row,) = table_rows(summary_markdown(report))
    assert len(row) == 7 and "a \\| b c &lt;script>" in row[6]


def test_workflow_is_valid_yaml_with_the_expected_steps() -> None:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "gradlab.yml").read_text())
    assert {"push", "pull_request"} <= set(doc.get("on") or doc.get(True))
    steps = doc["jobs"]["check"]["steps"]
    runs = [s.get("run", "") for s in steps]
    install = next(r for r in runs if "pip install torch" in r)
    assert "whl/cpu" in install
    check = next(s for s in steps if "gradlab check specs/" in s.get("run", ""))
    for arg in ("--junit reports/junit.xml", "--summary-md reports/summary.md"):
        assert arg in " ".join(check["run"].split())
    summary = next(s for s in steps if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert summary["if"] == "always()" and "reports/summary.md" in summary["run"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"].startswith("reports")
    assert steps.index(check) < steps.index(summary) < steps.index(upload)


def test_quiet_prints_only_failures_and_the_verdict(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    ok = runner.invoke(app, ["check", str(DATA / "user_ok.yaml"), "-q", "--report-dir",
                             str(tmp_path)])
    assert ok.exit_code == 0
    # the verdict alone (it may wrap at the console's width)
    line = " ".join(ok.output.split())
    assert line.startswith("PASSED: ") and " 0 failed, 0 errors" in line
    assert "report:" not in line and "gradlab check" not in line
    bad = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"), "--quiet",
                              "--report-dir", str(tmp_path)])
    assert bad.exit_code == 1
    lines = [ln for ln in bad.output.splitlines() if ln.strip()]
    assert lines[0].startswith("FAIL SquareNoChainRule")
    # the verdict is last (it may wrap over several lines)
    start = max(k for k, ln in enumerate(lines) if ln.startswith("FAILED: "))
    assert "0 errors" in " ".join(lines[start:]) and lines[start - 1].startswith("failing ")
    assert "gradlab check" not in lines[0] and "report:" not in bad.output


def test_fail_fast_stops_after_the_first_failing_case_and_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    result = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"),
                                 str(DATA / "user_ok.yaml"), "--fail-fast", "--report-dir",
                                 str(tmp_path), "--junit", str(tmp_path / "j.xml")])
    assert result.exit_code == 1
    assert "--fail-fast" in result.output
    doc = json.loads(next(tmp_path.glob("check-*.json")).read_text())
    assert doc["stopped"] is True
    ops = {r["op"] for r in doc["rows"]}
    assert ops == {"SquareNoChainRule"}  # Square, the next case, never ran
    # the failing case itself ran to the end: both dtypes and the numerical checks
    assert {r["dtype"] for r in doc["rows"] if r["check"] != "autocast"} == {"float64",
                                                                              "float32"}
    assert "jacobian" in {r["check"] for r in doc["rows"]}


def test_k_selects_op_case_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    both = [str(DATA / "user_broken.yaml"), str(DATA / "user_ok.yaml")]
    result = runner.invoke(app, ["check", *both, "-k", "square/*", "--report-dir",
                                 str(tmp_path), "--no-variants"])
    assert result.exit_code == 0, result.output  # the glob matches "Square/base" only
    assert set(pd.read_csv(next(tmp_path.glob("check-*.csv")))["op"]) == {"Square"}
    none = runner.invoke(app, ["check", *both, "-k", "nothing_like_this"])
    assert none.exit_code == 2 and "-k: no op/case matches" in none.output


@pytest.mark.parametrize(("env", "tty", "plain"), [
    ({}, True, False), ({}, False, True), ({"NO_COLOR": "1"}, True, True),
    ({"NO_COLOR": ""}, True, False), ({"FORCE_COLOR": "1"}, False, False),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, True),
])
def test_plain_output_off_a_terminal_and_under_no_color(env: dict[str, str], tty: bool,
                                                        plain: bool) -> None:
    assert console_mod.plain(tty, env) is plain


def test_no_color_console_writes_no_escape_codes(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    console = console_mod.make_console()
    console.print(Text("FAILED", style="bold red"))
    assert capsys.readouterr().out == "FAILED\n"

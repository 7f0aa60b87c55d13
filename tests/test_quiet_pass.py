"""A passing run is short (issue 30): a line per passing op and case (the dtypes covered, the
variants counted, the worst error), every line of a case that did not pass, every line of every
case with `--table full`; the log's per-op progress line fits the width."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import run_cli
from rich.console import Console

from gradlab.render.check import case_lines, render_check
from gradlab.render.progress import LOG_WIDTH, LogProgress, log_width, op_line
from gradlab.results import CheckRow, Report
from gradlab.results.summary import count_words, summarize


def row(case: str, check: str, status: str = "pass", dtype: str = "float64",
        variant: str = "base", err: float | None = 1e-12, **kw: object) -> CheckRow:
    return CheckRow("op", case, dtype, "cpu", variant, check, status,  # type: ignore[arg-type]
                    max_abs_err=err, max_rel_err=err, **kw)


def report() -> Report:
    """Case `good` passes in two dtypes (a refused variant declared skipped); case `bad` fails
    one gradient variant."""
    good = [row("good", "forward"), row("good", "gradient"),
            row("good", "gradient", variant="noncontiguous[0]", err=3e-12),
            row("good", "gradient", dtype="float32", err=2e-6),
            row("good", "gradient", "skip", variant="ragged[4->5]", err=None,
                reason="reference_refused", declared=True),
            row("good", "jacobian", err=1e-10)]
    bad = [row("bad", "forward"), row("bad", "gradient"),
           row("bad", "gradient", "fail", variant="transposed[0]", err=0.5, hint="transposed_only"),
           row("bad", "jacobian")]
    return Report(rows=good + bad)


def screen(rep: Report, width: int = 160, full: bool = False) -> str:
    # a terminal's screen (off one, the verdict line is never wrapped)
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=True)
    render_check(rep, console, full=full)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def table_lines(text: str, case: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.split()[:2] == ["op", case]]


def test_a_passing_case_is_one_line_with_its_dtypes_variants_and_worst_error() -> None:
    passing, others = case_lines(report())
    (good,) = passing
    assert (good["case"], good["dtypes"], good["checks"]) == ("good", "float64, float32", 3)
    # base, noncontiguous[0] and the refused ragged variant have rows; the skip counted apart
    assert (good["variants"], good["skipped_variants"]) == (3, 1)
    assert good["max_abs_err"] == 2e-6
    assert {g["case"] for g in others} == {"bad"}
    (line,) = table_lines(screen(report()), "good")
    assert line.split() == ["op", "good", "float64,", "float32", "cpu", "3", "3", "+1",
                            "skipped", "2.00e-06", "2.00e-06", f"{good['seconds']:.3f}"]


def test_a_case_that_did_not_pass_keeps_every_line_and_its_finding() -> None:
    text = screen(report())
    bad = table_lines(text, "bad")
    assert [ln.split()[4] for ln in bad] == ["forward", "gradient", "jacobian"]
    assert "fail" in bad[1] and "1/2 bad" in bad[1]
    assert "cases that did not pass" in text and "cases that passed" in text
    assert "likely cause: transposed_only" in text
    assert count_words(summarize(report().rows)) in " ".join(text.split())


def test_table_full_prints_a_line_per_check_of_every_case() -> None:
    text = screen(report(), full=True)
    assert [ln.split()[4] for ln in table_lines(text, "good")] == [
        "forward", "gradient", "gradient", "jacobian"]  # in the rows' order
    assert "cases that passed" not in text


@pytest.mark.parametrize("width", [80, 100])
def test_the_passing_table_fits_the_width_keeping_dtypes_variants_and_error(width: int) -> None:
    rep = Report(rows=[row(f"case_{i:02d}_long_name", c, dtype=d)
                       for i in range(3) for c in ("forward", "gradient")
                       for d in ("float64", "float32", "bfloat16")])
    text = screen(rep, width)
    assert max(len(ln.rstrip()) for ln in text.splitlines()) <= width
    header = next(ln for ln in text.splitlines() if ln.split()[:2] == ["op", "case"]).split()
    assert {"dtypes", "variants", "abs"} <= set(header)  # what a passing line is about
    (line,) = table_lines(text, "case_00_long_name")
    assert "float64, float32, bfloat16" in line


def test_the_cli_compact_by_default_full_on_request(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", "exp", "--case", "vector", "--no-variants", "--report-dir", str(tmp_path)]
    code, out, _ = run_cli(args, capsys)
    assert code == 0, out
    assert len([ln for ln in out.splitlines() if ln.split()[:2] == ["exp", "vector"]]) == 1
    code, out, _ = run_cli([*args, "--table", "full"], capsys)
    assert code == 0, out
    lines = [ln.split() for ln in out.splitlines() if ln.split()[:2] == ["exp", "vector"]]
    named = {word for words in lines for word in words}
    assert {"forward", "gradient", "jacobian", "second_order"} <= named
    assert len(lines) >= 8  # forward, gradient, contract in two dtypes, jacobian, ...
    code, _, err = run_cli([*args, "--table", "wide"], capsys)
    assert code == 2
    assert err.strip() == "gradlab: error: --table: expected compact or full, got 'wide'"


def test_the_progress_line_fits_the_width() -> None:
    rep = report()
    summary = summarize(rep.rows)
    long = op_line("op", summary, 1.25, 1000)
    assert long == f"checked op: {count_words(summary)} (1.2 s)"  # what fits is said whole
    for width in (60, 80, 100):
        line = op_line("op", summary, 1.25, width)
        assert len(line) <= width, line
        assert line.startswith("checked op: 2 cases, ")
    assert op_line("op", summary, 1.25, 100) == (
        "checked op: 2 cases, 6 checks: 5 passed, 1 failed; 1 finding, 10 rows (1.2 s)")
    passing = summarize([r for r in rep.rows if r.case == "good"])
    assert op_line("op", passing, 0.5, 80) == (
        "checked op: 1 case, 3 checks passed, 6 rows (0.5 s)")
    assert op_line("a_very_long_op_name" * 5, summary, 1.0, 80).endswith("...")


def test_the_log_width_is_columns_else_eighty() -> None:
    assert log_width({"COLUMNS": "100"}) == 100
    assert log_width({}) == LOG_WIDTH == 80
    assert log_width({"COLUMNS": "x"}) == 80
    console = Console(file=io.StringIO(), width=300, color_system=None)
    log = LogProgress(console, clock=iter(range(10)).__next__, width=80)
    log.rows_done(report().rows)
    log.flush()
    (line,) = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(line) <= 80 and line.startswith("checked op: ")

"""One story in every output (issue 23, items 3 and 4).

One mixed report (pass, fail, error, skip and warn rows over two ops and three cases, one bug
that shows in three variants and two checks, one crash in two checks) goes through every
rendering: the terminal, the Markdown summary, JUnit XML, the JSON and CSV, `str(report)`,
`_repr_html_` and the `assert_gradients` message.  Each count is read back from what each
rendering says (or, for the files, from their structure) and must be the same everywhere.
Then `assert_gradients` on a one-bug Function: a short message that says the diagnosis once,
lists the variants, names the class, and pytest shows the test's line, not gradlab's frames.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from conftest import DATA
from rich.console import Console

import gradlab
from gradlab.render.check import render_check
from gradlab.render.files import check_report_texts
from gradlab.render.junit import check_junit
from gradlab.render.markdown import summary_markdown
from gradlab.render.progress import LogProgress
from gradlab.results import CheckRow, ErrorStats, Finding, Report
from gradlab.testing import assert_gradients, failure_text

sys.path.insert(0, str(DATA / "story"))
from story_functions import Cube, CubeTwiceGrad, cube_reference

# --- the mixed report, and its numbers counted by hand ----------------------------------------

#: ops, cases, checks, checks passed/failed/errored/skipped/warned, findings, failing variants,
#: variants, rows, rows passed/failed/errored/skipped/warned.
EXPECTED = {"ops": 2, "cases": 3, "checks": 10, "check_pass": 4, "check_fail": 2,
            "check_error": 2, "check_skip": 1, "check_warn": 1, "findings": 2,
            "failing_variants": 3, "variants": 4, "rows": 15, "row_pass": 6, "row_fail": 4,
            "row_error": 2, "row_skip": 2, "row_warn": 1}
#: The variants the one bug shows in.
BUG_VARIANTS = ["base", "noncontiguous[0]", "transposed[0]"]


def row(op: str, case: str, check: str, status: str, variant: str = "base",
        **kw: object) -> CheckRow:
    return CheckRow(op, case, "float64", "cpu", variant, check, status, **kw)  # type: ignore[arg-type]


def factor_two() -> list[Finding]:
    stats = ErrorStats(max_abs=1.5, max_rel=0.5, frac_wrong=1.0, cosine=1.0, ratio=2.0)
    return [Finding("input", 0, hint="constant_factor", shape=(3, 4), stats=stats)]


def mixed_report() -> Report:
    bug = {"hint": "constant_factor", "max_abs_err": 1.5, "max_rel_err": 0.5}
    rows = [
        row("alpha", "small", "forward", "pass", max_abs_err=0.0),
        row("alpha", "small", "forward", "pass", "noncontiguous[0]", max_abs_err=0.0),
        *(row("alpha", "small", "gradient", "fail", v, findings=factor_two(), **bug)  # type: ignore[arg-type]
          for v in BUG_VARIANTS),
        row("alpha", "small", "jacobian", "fail", findings=factor_two(), **bug),  # type: ignore[arg-type]
        row("alpha", "small", "forward_ad", "warn", hint="forward_ad_missing"),
        row("alpha", "small", "autocast", "skip", reason="cuda_unavailable", declared=True),
        row("alpha", "big", "forward", "pass"),
        row("alpha", "big", "gradient", "pass"),
        row("alpha", "big", "gradient", "pass", "noncontiguous[0]"),
        row("alpha", "big", "gradient", "skip", "ragged[4->5]", reason="reference_refused",
            declared=True),
        row("beta", "one", "forward", "error", hint="crash", note="RuntimeError: boom"),
        row("beta", "one", "gradient", "error", hint="crash", note="RuntimeError: boom"),
        row("beta", "one", "contract", "pass"),
    ]
    return Report(rows=rows, env={"torch": torch.__version__})


# --- reading the counts back -------------------------------------------------------------------

_REASONS = r"(?: \([^)]*\))?"
#: gradlab.results.summary.count_words, as every rendering says it.
COUNT_WORDS = re.compile(
    rf"(\d+) ops?, (\d+) cases?, (\d+) checks?: (\d+) passed, (\d+) failed{_REASONS}, "
    rf"(\d+) errors?, (\d+) skipped{_REASONS}, (\d+) warnings?{_REASONS}; (\d+) findings? in "
    rf"(\d+) of (\d+) variants?; (\d+) rows?: (\d+) passed, (\d+) failed{_REASONS}, "
    rf"(\d+) errors?, (\d+) skipped{_REASONS}, (\d+) warnings?")
FINDING_HEAD = re.compile(r"\(finding (\d+) of (\d+)\)")


def said(text: str) -> dict[str, int]:
    """The numbers of the one count sentence in `text` (whitespace as rich may wrap it)."""
    (found,) = COUNT_WORDS.findall(" ".join(text.split()))
    return dict(zip(EXPECTED, map(int, found), strict=True))


def numbered_findings(text: str) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in FINDING_HEAD.findall(text)}


def listed_variants(text: str) -> set[str]:
    """The variant names on the 'where:' lines of finding blocks."""
    return {v for m in re.findall(r"where: .* variants?: (.*)", text) for v in m.split(", ")}


def from_rows(records: list[dict[str, str]]) -> dict[str, int]:
    """What a file's rows say by themselves (CSV or JSON rows): ops, cases, checks, findings,
    variants and rows by status."""
    bad = [r for r in records if r["finding"] not in ("", None)]
    out = {"ops": len({r["op"] for r in records}),
           "cases": len({(r["op"], r["case"]) for r in records}),
           "checks": len({(r["op"], r["case"], r["check"]) for r in records}),
           "findings": len({r["finding"] for r in bad}),
           "failing_variants": len({r["variant"] for r in bad}),
           "variants": len({r["variant"] for r in records}), "rows": len(records)}
    for s in ("pass", "fail", "error", "skip", "warn"):
        out[f"row_{s}"] = sum(r["status"] == s for r in records)
    return out


def check_status(case: ET.Element) -> str:
    kinds = {child.tag for child in case}
    for tag, status in (("error", "error"), ("failure", "fail"), ("skipped", "skip")):
        if tag in kinds:
            return status
    out = case.find("system-out")
    return "warn" if out is not None and "WARN" in (out.text or "") else "pass"


def from_junit(xml: str) -> dict[str, int]:
    root = ET.fromstring(xml)
    suites = [s for s in root if s.get("name") != "gradlab"]
    cases = [(s.get("name"), c) for s in suites for c in s.iter("testcase")]
    statuses = [check_status(c) for _, c in cases]
    texts = "\n".join(el.text or "" for _, c in cases for el in c
                      if el.tag in ("failure", "error"))
    out = {"ops": len(suites), "cases": len({(s, c.get("name", "").split("/")[0])
                                             for s, c in cases}),
           "checks": len(cases), "findings": len(numbered_findings(texts)),
           "failing_variants": len(listed_variants(texts))}
    for s in ("pass", "fail", "error", "skip", "warn"):
        out[f"check_{s}"] = statuses.count(s)
    # the root's totals agree with the testcases
    assert (int(root.get("tests", -1)), int(root.get("failures", -1)), int(root.get("errors", -1)),
            int(root.get("skipped", -1))) == (len(cases), statuses.count("fail"),
                                              statuses.count("error"), statuses.count("skip"))
    return out


def log_lines(report: Report) -> list[str]:
    """What `gradlab check` logs to stderr off a terminal: a line per op as its rows come."""
    console = Console(file=io.StringIO(), width=400, color_system=None)
    log = LogProgress(console, clock=iter(range(100)).__next__)
    for case in dict.fromkeys((r.op, r.case) for r in report.rows):
        log.rows_done([r for r in report.rows if (r.op, r.case) == case])
    log.flush()
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined,no-any-return]


def summed(lines: list[str]) -> dict[str, int]:
    """The per-op lines' numbers added up (all but the variants, which ops share)."""
    total: dict[str, int] = {}
    for line in lines:
        for k, v in said(line).items():
            total[k] = total.get(k, 0) + v
    return {k: v for k, v in total.items() if "variants" not in k}


def agrees(name: str, got: dict[str, int]) -> None:
    wrong = {k: (v, EXPECTED[k]) for k, v in got.items() if EXPECTED[k] != v}
    assert not wrong, f"{name} counts differently (got, expected): {wrong}"


# --- one report, eight renderings --------------------------------------------------------------


def test_every_rendering_counts_the_mixed_report_the_same() -> None:
    report = mixed_report()
    console = Console(file=io.StringIO(), width=400, color_system=None)
    render_check(report, console)
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    agrees("terminal", said(terminal))
    agrees("terminal findings", {"findings": len(numbered_findings(terminal)),
                                 "failing_variants": len(listed_variants(terminal))})

    markdown = summary_markdown(report)
    agrees("markdown", said(markdown))
    body = markdown.split("### Findings")[1].split("\n\n")[1].splitlines()[2:]
    agrees("markdown table", {"findings": len(body)})

    agrees("junit", from_junit(ET.tostring(check_junit(report).getroot(), encoding="unicode")))

    csv_text, json_text, _ = check_report_texts(report)
    agrees("csv", from_rows(list(csv.DictReader(io.StringIO(csv_text)))))
    payload = json.loads(json_text)
    agrees("json rows", from_rows(payload["rows"]))
    s = payload["summary"]
    agrees("json summary", {"ops": s["ops"], "cases": s["cases"], "checks": s["checks"],
                            "findings": s["findings"], "variants": s["variants"],
                            "failing_variants": s["failing_variants"], "rows": s["rows"],
                            **{f"check_{k}": n for k, n in s["check_statuses"].items()},
                            **{f"row_{k}": n for k, n in s["row_statuses"].items()}})
    assert len(payload["findings"]) == EXPECTED["findings"]
    assert report.summary().counts() == s  # the API's Report.summary() is that data

    html = report._repr_html_()
    agrees("_repr_html_", said(re.sub(r"<[^>]+>", " ", html.split("</p>")[0])))
    agrees("_repr_html_ table", {"findings": html.count("<tr>") - 1})

    agrees("stderr log", summed(log_lines(report)))

    message = failure_text(report, "mixed")
    agrees("assert_gradients message", said(message))
    agrees("assert_gradients findings", {"findings": len(numbered_findings(message)),
                                         "failing_variants": len(listed_variants(message))})


def test_str_report_is_the_terminal_summary_with_the_same_counts() -> None:
    agrees("str(report)", said(str(mixed_report())))


def test_a_bug_in_several_variants_and_checks_is_one_finding_everywhere() -> None:
    report = mixed_report()
    message = failure_text(report, "mixed")
    assert message.count("likely cause: constant_factor") == 1
    assert "where: gradient, jacobian · float64 · cpu · 3 of 3 variants: " \
           "base, noncontiguous[0], transposed[0]" in message
    # each failing JUnit testcase points at the same numbered finding
    root = check_junit(report).getroot()
    texts = {c.get("name"): "".join(el.text or "" for el in c)
             for c in root.iter("testcase") if c.find("failure") is not None}
    assert set(texts) == {"small/gradient", "small/jacobian"}
    assert all("(finding 1 of 2)" in t for t in texts.values())
    _, json_text, _ = check_report_texts(report)
    (bug, crash) = json.loads(json_text)["findings"]
    assert (bug["checks"], bug["variants"], bug["rows"]) == (["gradient", "jacobian"],
                                                            BUG_VARIANTS, 4)
    assert (crash["status"], crash["checks"]) == ("error", ["forward", "gradient"])


# --- assert_gradients on one bug ---------------------------------------------------------------


def example() -> torch.Tensor:
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_one_bug_message_is_short_names_the_class_and_lists_the_variants() -> None:
    report = gradlab.check(CubeTwiceGrad.apply, [example()], reference=cube_reference)
    assert {r.op for r in report.rows} == {"CubeTwiceGrad"}  # gradlab.check names it so too
    variants = list(dict.fromkeys(r.variant for r in report.failures))
    assert len(variants) >= 5  # the bug shows in many variants
    with pytest.raises(AssertionError) as info:
        assert_gradients(CubeTwiceGrad.apply, [example()], reference=cube_reference)
    text = str(info.value)
    assert len(text) < 1500, text
    assert text.startswith("gradlab: CubeTwiceGrad (case example): FAILED: ")
    assert "apply" not in text  # the class, not its apply
    assert text.count("likely cause: constant_factor") == 1  # the diagnosis once
    assert listed_variants(text) == set(variants)
    assert numbered_findings(text) == {(1, 1)}


def test_a_correct_twin_passes() -> None:
    report = assert_gradients(Cube.apply, [example()], reference=cube_reference)
    assert report.passed


USER_TEST = """
import torch
from story_functions import CubeTwiceGrad, cube_reference
from gradlab.testing import assert_gradients


def test_cube():
    x = torch.randn(3, 4, dtype=torch.float64)
    assert_gradients(CubeTwiceGrad, [x], reference=cube_reference)  # the user's line
"""


@pytest.mark.parametrize("tb", ["auto", "long"])
def test_pytest_shows_the_users_line_not_gradlab_frames(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tb: str) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_user=USER_TEST)
    proc = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--tb={tb}")
    out = proc.stdout.str()
    assert proc.ret == 1, out
    assert "# the user's line" in out
    assert "gradlab/testing.py" not in out and "gradlab" + "/__init__.py" not in out
    assert "AssertionError: gradlab: CubeTwiceGrad (case example): FAILED" in out
    assert "likely cause: constant_factor" in out


def test_the_plugin_says_the_same_short_story_naming_the_spec_and_case(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (pytester.path / "cube.yaml").write_text(
        "function: story_functions:CubeTwiceGrad\nreference: story_functions:cube_reference\n"
        "dtypes: [float64]\nargs: [{shape: [3, 4]}]\n")
    proc = pytester.runpytest_inprocess("-p", "gradlab.pytest_plugin", "-p", "no:cacheprovider",
                                        "--gradlab-inprocess", "cube.yaml")
    out = proc.stdout.str()
    assert proc.ret == 1, out
    text = out[out.index("gradlab: CubeTwiceGrad/base in cube.yaml: FAILED: "):]
    text = text[:text.index("re-run: gradlab check cube.yaml --op CubeTwiceGrad --case base")]
    assert len(text) < 1500, text
    assert text.count("likely cause: constant_factor") == 1 and "(finding 1 of 1)" in text
    assert len(listed_variants(text)) >= 5


def test_function_name_is_the_class_for_a_function_and_its_apply() -> None:
    import functools

    from gradlab.spec.imports import function_name

    assert {function_name(f) for f in (CubeTwiceGrad, CubeTwiceGrad.apply,
                                       functools.partial(CubeTwiceGrad.apply))} == {
        "CubeTwiceGrad"}
    assert function_name(cube_reference) == "cube_reference"


# --- the installed command: stdout, stderr and every file of one run ---------------------------

GRADLAB = Path(sys.executable).parent / "gradlab"


def same(name: str, got: dict[str, int], want: dict[str, int]) -> None:
    wrong = {k: (v, want[k]) for k, v in got.items() if want[k] != v}
    assert not wrong, f"{name} counts differently from the terminal (got, terminal): {wrong}"


def test_the_gradlab_command_tells_one_story_on_stdout_stderr_and_in_every_file(
        tmp_path: Path) -> None:
    story = DATA / "story"
    proc = subprocess.run([str(GRADLAB), "check", str(story / "cube_broken.yaml"),
                           str(story / "cube_ok.yaml"), "--report-dir", str(tmp_path),
                           "--junit", str(tmp_path / "j.xml"), "--summary-md",
                           str(tmp_path / "s.md")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="300"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    terminal = said(proc.stdout.split("FAILED: ")[-1])
    assert (terminal["ops"], terminal["cases"], terminal["findings"]) == (2, 2, 1)
    assert proc.stdout.count("likely cause: constant_factor") == 1
    same("stderr", summed([ln for ln in proc.stderr.splitlines() if ln.startswith("checked ")]),
         terminal)
    same("markdown", said((tmp_path / "s.md").read_text()), terminal)
    same("junit", from_junit((tmp_path / "j.xml").read_text()), terminal)
    (csv_path,) = tmp_path.glob("check-*.csv")
    with csv_path.open() as f:
        same("csv", from_rows(list(csv.DictReader(f))), terminal)
    payload = json.loads(csv_path.with_suffix(".json").read_text())
    same("json", from_rows(payload["rows"]), terminal)
    assert payload["summary"]["findings"] == 1

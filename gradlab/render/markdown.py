"""The check run as Markdown for a CI job summary (GitHub's $GITHUB_STEP_SUMMARY): the verdict,
totals, a table row per failing op, case and check with its likely cause and message, and the
capability matrix."""

from __future__ import annotations

from pathlib import Path

from gradlab.model import MATRIX
from gradlab.render.capabilities import HEADERS
from gradlab.render.diagnosis import check_groups, counts, hint_words
from gradlab.render.words import message
from gradlab.results import ERROR, FAIL, PASS, SKIP, WARN, Report
from gradlab.results.capabilities import capability_matrix

#: Failing groups listed in the table (a job summary has a size limit; the files have all).
TABLE_ROWS = 100
#: Longest table cell: a summary is read at a glance.
CELL_CHARS = 300
HEADER = ("op", "case", "check", "status", "failing rows", "likely cause", "message")


def cell(text: str, limit: int = CELL_CHARS) -> str:
    """Text that stays inside one Markdown table cell: pipes escaped, no line breaks, no HTML."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def table_line(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def summary_markdown(report: Report, title: str = "gradlab check") -> str:
    """The Markdown summary of a check report."""
    groups = check_groups(report.rows)
    bad = [g for g in groups if g.failures]
    n = counts(report.rows)
    verdict = "PASSED" if report.passed else "FAILED"
    lines = [f"## {title}: {verdict}", "",
             f"**{len(groups) - len(bad)} of {len(groups)} checks passed** (op, case and "
             f"check, over dtypes, devices and variants); rows: {n[PASS]} passed, {n[FAIL]} "
             f"failed, {n[ERROR]} errors, {n[SKIP]} skipped, {n[WARN]} warnings."]
    if report.truncated:
        lines += ["", "Stopped early by `--budget`: the cases not started are missing, and "
                      "count as a failure."]
    if report.stopped:
        lines += ["", "Stopped after the first failing case (`--fail-fast`)."]
    if not report.rows:
        lines += ["", "No case ran."]
    if bad:
        lines += ["", "### Failing checks", "", table_line(HEADER),
                  table_line(["---"] * len(HEADER))]
        for g in bad[:TABLE_ROWS]:
            first = g.failures[0]
            cause = f"`{first.hint}`: {hint_words(first)}" if first.hint else ""
            lines.append(table_line([cell(g.op), cell(g.case), cell(g.check), g.status,
                                     f"{len(g.failures)} of {len(g.rows)}", cell(cause),
                                     cell(message(first))]))
        if len(bad) > TABLE_ROWS:
            lines += ["", f"... and {len(bad) - TABLE_ROWS} more failing checks (see the "
                          "report files)."]
        repros = list(dict.fromkeys(r.repro_command for g in bad for r in g.failures
                                    if r.repro_command))
        if repros:
            lines += ["", "Re-run a failing case:", "", "```", *repros[:TABLE_ROWS], "```"]
    return "\n".join(lines + capability_lines(report)) + "\n"


def capability_lines(report: Report) -> list[str]:
    """The capability matrix as a Markdown table (none when nothing was measured)."""
    matrix = capability_matrix(report.rows)
    if not matrix:
        return []
    head = ["op", *(HEADERS[c] for c in MATRIX)]
    return ["", "### Capabilities", "", table_line(head), table_line(["---"] * len(head)),
            *(table_line([cell(line.op), *(line.cell(c).state for c in MATRIX)])
              for line in matrix)]


def write_summary_md(report: Report, path: str | Path) -> Path:
    """Write the Markdown summary to `path` (its folder made if needed)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(summary_markdown(report), encoding="utf-8")
    return p

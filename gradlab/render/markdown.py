"""The check run as Markdown for a CI job summary (GitHub's $GITHUB_STEP_SUMMARY): the verdict,
the run's numbers, a table line per finding with where it shows, its likely cause and message,
and the capability matrix."""

from __future__ import annotations

from pathlib import Path

from gradlab.model import MATRIX
from gradlab.render.capabilities import HEADERS
from gradlab.render.diagnosis import hint_words
from gradlab.render.environment import tf32_line
from gradlab.render.words import message
from gradlab.results import CheckRow, Report
from gradlab.results.capabilities import capability_matrix
from gradlab.results.summary import FindingGroup, count_words, summarize

#: Findings listed in the table (a job summary has a size limit; the files have all).
TABLE_ROWS = 100
#: Longest table cell: a summary is read at a glance.
CELL_CHARS = 300
HEADER = ("op", "case", "checks", "status", "variants", "likely cause", "message")


def cell(text: str, limit: int = CELL_CHARS) -> str:
    """Text that stays inside one Markdown table cell: pipes escaped, no line breaks, no HTML."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def table_line(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def finding_line(f: FindingGroup[CheckRow], all_variants: int) -> str:
    """A finding as a table line: where, its likely cause, and its example row's message."""
    ex = f.example
    if f.hint:
        cause = f"`{f.hint}`: {hint_words(ex)}"
    else:
        cause = f"not checked: `{f.reason}`" if f.reason else ""
    variants = f"{len(f.variants)} of {all_variants}: {', '.join(f.variants)}"
    return table_line([cell(f.op), cell(f.case), cell(", ".join(f.checks)), f.status,
                       cell(variants), cell(cause),
                       cell(f"{ex.check} / {ex.variant} / {ex.dtype}: {message(ex)}")])


def summary_markdown(report: Report, title: str = "gradlab check") -> str:
    """The Markdown summary of a check report: the verdict, the run's numbers, a table line
    per finding (gradlab.results.summary's grouping, as every output has it)."""
    summary = summarize(report.rows)
    verdict = "PASSED" if report.passed else "FAILED"
    lines = [f"## {title}: {verdict}", "", f"**{count_words(summary)}** (a check is an op, "
             "case and check over its dtypes, devices and variants; a finding is one bug)."]
    tf32 = tf32_line(report.rows, report.env)
    if tf32:
        lines += ["", tf32]
    if report.truncated:
        lines += ["", "Stopped early by `--budget`: the cases not started are missing, and "
                      "count as a failure."]
    if report.stopped:
        lines += ["", "Stopped after the first failing case (`--fail-fast`)."]
    if not report.rows:
        lines += ["", "No case ran."]
    found = summary.findings
    if found:
        lines += ["", "### Findings", "", table_line(HEADER), table_line(["---"] * len(HEADER))]
        lines += [finding_line(f, len(summary.case_variants[f"{f.op}/{f.case}"]))
                  for f in found[:TABLE_ROWS]]
        if len(found) > TABLE_ROWS:
            lines += ["", f"... and {len(found) - TABLE_ROWS} more findings (see the report "
                          "files)."]
        # each finding's example row, as the terminal shows it (every failing row has its own)
        repros = list(dict.fromkeys(f.repro.repro_command for f in found
                                    if f.repro is not None and f.repro.repro_command))
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

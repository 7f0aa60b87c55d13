"""A run's findings as plain text: what JUnit failures, the Markdown summary, `gradlab.testing`
and the pytest plugin say (no rich: they are not terminals).  The grouping and the counts are
gradlab.results.summary's, the same the terminal shows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gradlab.render.findings import finding_text
from gradlab.render.words import HINTS, REASONS
from gradlab.results import CheckRow
from gradlab.results.summary import CheckGroup, FindingGroup, RunSummary, summarize

__all__ = ["CheckGroup", "check_groups", "check_text", "counts", "diagnosis", "hint_words",
           "skip_reason"]

#: Findings spelled out in a message; the rest are counted (the report files have them all).
FINDINGS_SHOWN = 10


def check_groups(rows: Sequence[CheckRow]) -> list[CheckGroup[CheckRow]]:
    """One group per (op, case, check), in the order the rows came."""
    return summarize(rows).checks


def hint_words(row: CheckRow) -> str:
    """The likely cause in words ('' when there is no hint)."""
    return HINTS.get(row.hint, row.hint)


def skip_reason(rows: Iterable[CheckRow]) -> str:
    """Why rows were skipped, in words (the distinct reasons, joined)."""
    reasons = dict.fromkeys(REASONS.get(r.reason, r.reason) or r.note or "skipped" for r in rows)
    return "; ".join(reasons)


def _texts(summary: RunSummary[CheckRow],
           numbered: list[tuple[int, FindingGroup[CheckRow]]], shown: int) -> str:
    total = len(summary.findings)
    blocks = [finding_text(f, i, total, len(summary.case_variants[f"{f.op}/{f.case}"]))
              for i, f in numbered[:shown]]
    if len(numbered) > shown:
        blocks.append(f"... and {len(numbered) - shown} more findings (every row is in the "
                      "report files)")
    return "\n\n".join(blocks)


def diagnosis(summary: RunSummary[CheckRow], shown: int = FINDINGS_SHOWN) -> str:
    """Every finding's text (the first `shown`), blank-line separated ('' when none)."""
    return _texts(summary, list(enumerate(summary.findings, 1)), shown)


def check_text(summary: RunSummary[CheckRow], check: CheckGroup[CheckRow],
               shown: int = FINDINGS_SHOWN) -> str:
    """The findings one check shows (a JUnit testcase's failure text), with their numbers."""
    return _texts(summary, list(summary.numbered(check)), shown)


def counts(rows: Sequence[CheckRow]) -> dict[str, int]:
    """Rows per status, every status present (zero when none)."""
    return summarize(rows).rows

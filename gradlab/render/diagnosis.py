"""Failing rows as plain text, grouped by op, case and check: what JUnit failures, the Markdown
summary, `gradlab.testing` and the pytest plugin say (no rich: they are not terminals)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gradlab.render.words import HINTS, REASONS, message
from gradlab.results import ERROR, FAIL, PASS, SKIP, WARN, CheckRow

#: Worst first: a group takes the status of its worst row.
RANK = {ERROR: 4, FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
#: Failing rows spelled out per group; the rest are counted (the report files have them all).
ROWS_SHOWN = 8


@dataclass
class CheckGroup:
    """The rows of one op, case and check over every dtype, device and variant."""

    op: str
    case: str
    check: str
    rows: list[CheckRow] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The worst status of the rows; skip only when every row was skipped; a skip nobody
        declared fails (something asked for went unchecked, as the exit code says)."""
        worst = max((r.status for r in self.rows), key=RANK.__getitem__, default=SKIP)
        if worst not in (FAIL, ERROR) and any(r.unverified for r in self.rows):
            return FAIL
        return worst

    @property
    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if r.failed or r.unverified]

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rows)

    @property
    def name(self) -> str:
        return f"{self.op}/{self.case}/{self.check}"


def check_groups(rows: Iterable[CheckRow]) -> list[CheckGroup]:
    """One group per (op, case, check), in the order the rows came."""
    groups: dict[tuple[str, str, str], CheckGroup] = {}
    for r in rows:
        key = (r.op, r.case, r.check)
        groups.setdefault(key, CheckGroup(*key)).rows.append(r)
    return list(groups.values())


def hint_words(row: CheckRow) -> str:
    """The likely cause in words ('' when there is no hint)."""
    return HINTS.get(row.hint, row.hint)


def skip_reason(rows: Sequence[CheckRow]) -> str:
    """Why rows were skipped, in words (the distinct reasons, joined)."""
    reasons = dict.fromkeys(REASONS.get(r.reason, r.reason) or r.note or "skipped" for r in rows)
    return "; ".join(reasons)


def row_title(row: CheckRow) -> str:
    """'FAIL float32 / cpu / transposed[0]': which row of its group."""
    return f"{row.status.upper()} {row.dtype} / {row.device} / {row.variant}"


def row_text(row: CheckRow, indent: str = "  ") -> list[str]:
    """A failing row as a few lines: which, likely cause, message, where, repro."""
    lines = [row_title(row)]
    if row.hint:
        lines.append(f"{indent}likely cause: {row.hint}: {hint_words(row)}")
    if message(row):
        lines.append(f"{indent}{message(row)}")
    worst = "; ".join(str(e) for e in row.worst)
    if worst:
        lines.append(f"{indent}worst elements: {worst}")
    elif row.crash_location:
        lines.append(f"{indent}raised at: {row.crash_location}")
    if row.repro_command:
        lines.append(f"{indent}repro: {row.repro_command}")
    return lines


def group_text(group: CheckGroup, shown: int = ROWS_SHOWN) -> str:
    """A failing group's diagnosis: a head line, then each failing row (the first `shown`)."""
    # the base rows (one per dtype and device) first: they say most, variants repeat them
    bad = sorted(group.failures, key=lambda r: r.variant != "base")
    lines = [f"{group.name}: {len(bad)} of {len(group.rows)} rows failed"]
    for r in bad[:shown]:
        lines += ["  " + line for line in row_text(r)]
    if len(bad) > shown:
        lines.append(f"  ... and {len(bad) - shown} more failing rows")
    return "\n".join(lines)


def diagnosis(rows: Iterable[CheckRow], shown: int = ROWS_SHOWN) -> str:
    """Every failing group's text, blank-line separated ('' when nothing failed)."""
    return "\n\n".join(group_text(g, shown) for g in check_groups(rows) if g.failures)


def counts(rows: Sequence[CheckRow]) -> dict[str, int]:
    """Rows per status, every status present (zero when none)."""
    return {s: sum(r.status == s for r in rows) for s in (PASS, FAIL, ERROR, SKIP, WARN)}

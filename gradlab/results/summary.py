"""One grouping and one count of a check run: every output tells the same story from it (the
terminal, the Markdown summary, JUnit, the JSON and CSV, `str(report)`, `_repr_html_`,
`gradlab.testing.assert_gradients` and the pytest plugin).

The units, once:

- op: an op's name; case: an op and one of its cases ('op/case').
- check: one op, case and check over every dtype, device and variant (a JUnit testcase, a line
  of the Markdown summary).  Its status is the worst of its rows (error, fail, warn, pass; skip
  only when nothing ran), and fail when a skip nobody declared is among them: something asked
  for went unchecked, and the exit code fails the run for it.
- finding: one bug, the failing rows (failed, errored, or skipped undeclared) of one op and
  case with one diagnosis (the likely cause and its subject: which input, output or
  grad_output), over every check, dtype, device and variant that shows it.  A formula bug that
  fails 13 variants and two checks is one finding listing them, not 14 diagnoses.
- variant: a variant's name ('base', 'noncontiguous[0]', ...); a finding lists those that show it.
- rows: every row by status.

`summarize(rows)` returns the data; `count_words(summary)` the one sentence that says it: the
verdict line, the Markdown totals, the stderr log, `str(report)`, `_repr_html_` and the
assert_gradients message all contain it (tests/test_one_story.py reads it back from each).  No
import of gradlab.results.check here (its Report calls this): rows are anything with a
CheckRow's fields (`Row`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from gradlab.results.status import ERROR, FAIL, PASS, SKIP, STATUSES, WARN

#: Worst first: a check takes the status of its worst row (a skip only when nothing ran).
RANK = {ERROR: 4, FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
#: Check order when choosing the row that speaks for a finding (gradients say most).
CHECK_ORDER = ("gradient", "jacobian", "forward", "contract", "second_order")


class Row(Protocol):
    """What the grouping reads of a row (gradlab.results.CheckRow has it all)."""

    op: str
    case: str
    dtype: str
    device: str
    variant: str
    check: str
    status: str
    hint: str
    reason: str
    declared: bool
    seconds: float
    repro: str
    findings: Any

    @property
    def failed(self) -> bool: ...

    @property
    def unverified(self) -> bool: ...

    @property
    def worst(self) -> Any: ...


R = TypeVar("R", bound=Row)


#: Reason codes of rows compared without a reference (gradlab.checks.run.runner, .variants).
NO_REFERENCE_REASONS = ("no_reference", "no_reference_base")


def op_references(rows: Sequence[Row]) -> dict[str, str]:
    """{op: "none"} for each op checked without a reference, {op: "given"} for each whose
    forward or gradient was compared with one; an op with neither kind of row (its forward and
    gradient checks switched off) is left out: nothing says which."""
    out: dict[str, str] = {}
    for r in rows:
        if r.reason in NO_REFERENCE_REASONS:
            out[r.op] = "none"
        elif r.check in ("forward", "gradient") and r.status != SKIP:
            out.setdefault(r.op, "given")
    return out


def no_reference_words(rows: Sequence[Row]) -> str:
    """What the ops checked without a reference were compared with, in one sentence ("" when
    every op had one): the terminal's line above its verdict, and `str(report)`'s last line,
    so a PASSED that verified less than it says is never only a reason code."""
    ops = [op for op, ref in op_references(rows).items() if ref == "none"]
    if not ops:
        return ""
    more = f" (+{len(ops) - 3})" if len(ops) > 3 else ""
    return (f"no reference for {', '.join(ops[:3])}{more}: forward values not verified; "
            "variants compared with the Function's own contiguous run, gradients with finite "
            "differences")


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def subject(row: Row) -> str:
    """What a failing row is about: 'input 0', 'output 1', 'grad_output 0', or ''."""
    if not row.findings:
        return ""
    f = row.findings[0]
    return f"{f.subject} {f.index}" if f.index >= 0 else str(f.subject)


def is_bad(row: Row) -> bool:
    """A row that makes a finding: failed, errored, or a skip nobody declared."""
    return bool(row.failed or row.unverified)


@dataclass
class CheckGroup(Generic[R]):
    """The rows of one op, case and check over every dtype, device and variant."""

    op: str
    case: str
    check: str
    rows: list[R] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The worst status of the rows; skip only when every row was skipped; fail when a
        skip nobody declared is there."""
        worst = max((r.status for r in self.rows), key=RANK.__getitem__, default=SKIP)
        if worst not in (FAIL, ERROR) and any(r.unverified for r in self.rows):
            return FAIL
        return worst

    @property
    def failures(self) -> list[R]:
        return [r for r in self.rows if is_bad(r)]

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rows)

    @property
    def name(self) -> str:
        return f"{self.op}/{self.case}/{self.check}"


@dataclass
class FindingGroup(Generic[R]):
    """One finding: the failing rows of one op and case with one diagnosis.

    hint: the likely cause ('' when none); subject: 'input 0' and the like; reason: for skips
    nobody declared, why they were skipped ('' otherwise)."""

    op: str
    case: str
    hint: str
    subject: str
    reason: str = ""
    rows: list[R] = field(default_factory=list)

    @property
    def status(self) -> str:
        """error when any row errored, else fail (an undeclared skip fails the run too)."""
        return ERROR if any(r.status == ERROR for r in self.rows) else FAIL

    @property
    def checks(self) -> list[str]:
        return _unique(r.check for r in self.rows)

    @property
    def variants(self) -> list[str]:
        return _unique(r.variant for r in self.rows)

    @property
    def dtypes(self) -> list[str]:
        return _unique(r.dtype for r in self.rows)

    @property
    def devices(self) -> list[str]:
        return _unique(r.device for r in self.rows)

    @property
    def example(self) -> R:
        """The row that speaks for the finding: a failed one before a skip, the base variant,
        with located elements, of the check that says most, in the first dtype."""
        dtypes = self.dtypes

        def rank(r: R) -> tuple[bool, bool, bool, int, int]:
            check = CHECK_ORDER.index(r.check) if r.check in CHECK_ORDER else len(CHECK_ORDER)
            return (not r.failed, r.variant != "base", not r.worst, check,
                    dtypes.index(r.dtype))

        return min(self.rows, key=rank)

    @property
    def repro(self) -> R | None:
        """A row with a saved repro (the example's when it has one)."""
        return next((r for r in (self.example, *self.rows) if r.repro), None)


@dataclass
class RunSummary(Generic[R]):
    """A run grouped and counted (see the module docstring for the units)."""

    ops: list[str]
    #: 'op/case', in order
    cases: list[str]
    checks: list[CheckGroup[R]]
    findings: list[FindingGroup[R]]
    #: every variant name that has a row, in order
    variants: list[str]
    #: rows per status (every status present)
    rows: dict[str, int]
    #: variant names per 'op/case' (what a finding's variants are out of)
    case_variants: dict[str, list[str]] = field(default_factory=dict)

    @property
    def statuses(self) -> dict[str, int]:
        """Checks per status (every status present)."""
        return {s: sum(g.status == s for g in self.checks) for s in STATUSES}

    @property
    def failing_variants(self) -> list[str]:
        """The variants that show a finding, in order."""
        return _unique(v for f in self.findings for v in f.variants)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def numbered(self, check: CheckGroup[R]) -> list[tuple[int, FindingGroup[R]]]:
        """The findings a check shows, with their 1-based numbers in `findings`."""
        return [(i, f) for i, f in enumerate(self.findings, 1)
                if f.op == check.op and f.case == check.case and check.check in f.checks]

    def counts(self) -> dict[str, Any]:
        """The numbers as plain data (the JSON's 'summary')."""
        return {"ops": len(self.ops), "cases": len(self.cases), "checks": len(self.checks),
                "findings": len(self.findings), "variants": len(self.variants),
                "failing_variants": len(self.failing_variants),
                "check_statuses": self.statuses, "rows": self.total_rows,
                "row_statuses": dict(self.rows)}


def finding_key(row: Row) -> tuple[str, str, str, str, str]:
    """(op, case, hint, subject, reason of an undeclared skip): the rows of one finding."""
    return (row.op, row.case, row.hint, subject(row), row.reason if row.unverified else "")


def summarize(rows: Sequence[R]) -> RunSummary[R]:
    """The run's ops, cases, checks, findings and variants, and its rows per status."""
    checks: dict[tuple[str, str, str], CheckGroup[R]] = {}
    findings: dict[tuple[str, str, str, str, str], FindingGroup[R]] = {}
    case_variants: dict[str, list[str]] = {}
    for r in rows:
        checks.setdefault((r.op, r.case, r.check), CheckGroup(r.op, r.case, r.check)).rows.append(r)
        case_variants.setdefault(f"{r.op}/{r.case}", []).append(r.variant)
        if is_bad(r):
            key = finding_key(r)
            findings.setdefault(key, FindingGroup(*key)).rows.append(r)
    return RunSummary(ops=_unique(r.op for r in rows), cases=list(case_variants),
                      checks=list(checks.values()), findings=list(findings.values()),
                      variants=_unique(r.variant for r in rows),
                      rows={s: sum(r.status == s for r in rows) for s in STATUSES},
                      case_variants={k: _unique(v) for k, v in case_variants.items()})


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _reasons(summary: RunSummary[Any], status: str) -> str:
    """' (cuda_unavailable 2, ...)': why the checks of `status` are what they are."""
    counts: dict[str, int] = {}
    for g in summary.checks:
        if g.status != status:
            continue
        if status == FAIL and not any(r.failed for r in g.rows):
            key = "undeclared skip: " + next(r.reason or "unspecified"
                                             for r in g.rows if r.unverified)
        elif status in (SKIP, WARN):
            first = next((r for r in g.rows if r.status == status), g.rows[0])
            key = first.reason or first.hint or "unspecified"
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return f" ({', '.join(f'{k} {n}' for k, n in counts.items())})" if counts else ""


def _row_reasons(summary: RunSummary[Any], status: str) -> str:
    """' (reference_refused 1, ...)': the reasons of the rows of `status` (skips)."""
    counts: dict[str, int] = {}
    for g in summary.checks:
        for r in g.rows:
            if r.status == status:
                key = r.reason or "unspecified"
                key = key if r.declared else f"undeclared: {key}"
                counts[key] = counts.get(key, 0) + 1
    return f" ({', '.join(f'{k} {n}' for k, n in counts.items())})" if counts else ""


def status_words(summary: RunSummary[Any], *, rows: bool = False) -> str:
    """'3 passed, 1 failed, 0 errors, 1 skipped (cuda_unavailable 1), 0 warnings': the checks
    by status (with why they failed without a failing row, were skipped or warned), or the
    rows (with why they were skipped)."""
    counts = summary.rows if rows else summary.statuses

    def why(status: str) -> str:
        if rows:
            return _row_reasons(summary, status) if status == SKIP else ""
        return _reasons(summary, status)

    return (f"{counts[PASS]} passed, {counts[FAIL]} failed{why(FAIL)}, "
            f"{_n(counts[ERROR], 'error')}, {counts[SKIP]} skipped{why(SKIP)}, "
            f"{_n(counts[WARN], 'warning')}{why(WARN)}")


def count_words(summary: RunSummary[Any]) -> str:
    """The one sentence every output says a run's numbers with: '2 ops, 3 cases, 14 checks:
    10 passed, 2 failed, 1 error, 1 skipped, 0 warnings; 2 findings in 13 of 15 variants;
    60 rows: 40 passed, ...'."""
    return (f"{_n(len(summary.ops), 'op')}, {_n(len(summary.cases), 'case')}, "
            f"{_n(len(summary.checks), 'check')}: {status_words(summary)}; "
            f"{_n(len(summary.findings), 'finding')} in {len(summary.failing_variants)} of "
            f"{_n(len(summary.variants), 'variant')}; {_n(summary.total_rows, 'row')}: "
            f"{status_words(summary, rows=True)}")

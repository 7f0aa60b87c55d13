"""Failing rows grouped into findings: one bug, one block.

A formula bug fails every variant in every dtype (and the numerical checks too) with the same
diagnosis; shown row by row it buries everything after it.  Rows of one op and case with the
same likely cause on the same input are one finding: it says where it occurs (checks, variants,
dtypes, devices) and shows the localisation once, from its most telling row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gradlab.results import ERROR, CheckRow

#: Check order when choosing the row that speaks for a finding (gradients say most).
CHECK_ORDER = ("gradient", "jacobian", "forward", "contract", "second_order")


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def subject(row: CheckRow) -> str:
    """What a failing row is about: 'input 0', 'output 1', 'grad_output 0', or ''."""
    if not row.findings:
        return ""
    f = row.findings[0]
    return f"{f.subject} {f.index}" if f.index >= 0 else f.subject


@dataclass
class FailureGroup:
    """Failing rows of one op and case with one likely cause on one subject."""

    op: str
    case: str
    hint: str
    subject: str
    rows: list[CheckRow] = field(default_factory=list)

    @property
    def status(self) -> str:
        return ERROR if any(r.status == ERROR for r in self.rows) else self.rows[0].status

    @property
    def checks(self) -> list[str]:
        return _unique([r.check for r in self.rows])

    @property
    def variants(self) -> list[str]:
        return _unique([r.variant for r in self.rows])

    @property
    def dtypes(self) -> list[str]:
        return _unique([r.dtype for r in self.rows])

    @property
    def devices(self) -> list[str]:
        return _unique([r.device for r in self.rows])

    @property
    def example(self) -> CheckRow:
        """The row that speaks for the finding: the base variant, with located elements, of
        the check that says most, in the first dtype."""
        dtypes = self.dtypes

        def rank(r: CheckRow) -> tuple[int, int, int, int]:
            check = CHECK_ORDER.index(r.check) if r.check in CHECK_ORDER else len(CHECK_ORDER)
            return (r.variant != "base", not r.worst, check, dtypes.index(r.dtype))

        return min(self.rows, key=rank)

    @property
    def repro(self) -> CheckRow | None:
        """A row with a saved repro (the example's when it has one)."""
        rows = [self.example, *self.rows]
        return next((r for r in rows if r.repro), None)


def group_failures(rows: Sequence[CheckRow]) -> list[FailureGroup]:
    """The failing rows as findings, in the order their first row appeared."""
    found: dict[tuple[str, str, str, str], FailureGroup] = {}
    for r in rows:
        if not r.failed:
            continue
        key = (r.op, r.case, r.hint, subject(r))
        found.setdefault(key, FailureGroup(*key)).rows.append(r)
    return list(found.values())


def failing_cases(rows: Sequence[CheckRow]) -> list[str]:
    """Every failing 'op/case', in order (the summary names them all)."""
    return _unique([f"{r.op}/{r.case}" for r in rows if r.failed])


def where(f: FailureGroup, all_variants: int) -> str:
    """'gradient, jacobian · float64, float32 · cpu · 12 of 14 variants: base, ... (+9)'."""
    variants = f.variants
    shown = ", ".join(variants[:3]) + (f" (+{len(variants) - 3})" if len(variants) > 3 else "")
    count = f"{len(variants)} of {all_variants} variants" if all_variants > 1 else "variant"
    return " · ".join([", ".join(f.checks), ", ".join(f.dtypes), ", ".join(f.devices),
                       f"{count}: {shown}"])

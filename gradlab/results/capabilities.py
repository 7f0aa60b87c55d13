"""The capability matrix: per op, what it supports, read from a run's rows.

First order comes from the forward, gradient and jacobian rows, second order from the
second_order rows, autocast from the autocast rows, the rest from the `capabilities` rows (one
per capability and case, the capability as its variant; see gradlab.checks.numeric.capabilities).
Each cell is the worst state over the op's cases, dtypes and devices.  Plain data: gradlab.render
words and prints it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradlab.model import MATRIX
from gradlab.results.status import ERROR, FAIL, SEVERITY, SKIP, WARN

if TYPE_CHECKING:  # annotations only: `gradlab list` draws the matrix without the row types
    from gradlab.results.check import CheckRow

#: Cell states.  yes: runs and matches; breaks: matches, with graph breaks (torch.compile);
#: no: raises (or, deterministic: differs bitwise); wrong: runs and differs (a failure); n/a:
#: the reference lacks it too; "-": not measured.
YES, BREAKS, NO, WRONG, NA, UNMEASURED = "yes", "breaks", "no", "wrong", "n/a", "-"
STATES = (YES, BREAKS, NO, WRONG, NA, UNMEASURED)
#: Which state a cell shows when its rows disagree: the worst.
STATE_ORDER = {UNMEASURED: 0, NA: 1, YES: 2, BREAKS: 3, NO: 4, WRONG: 5}

#: The checks whose rows make the first_order cell.
FIRST_ORDER_CHECKS = ("forward", "gradient", "jacobian")
#: Reasons that say the Function lacks the capability (a `*_missing` reason does too).
ABSENT_REASONS = frozenset({"raises_as_declared"})
#: Reasons that say neither the Function nor the reference has it.
NOT_APPLICABLE_REASONS = frozenset({"second_order_unsupported", "autocast_unsupported",
                                    "forward_ad_unsupported", "batched_grad_unsupported"})
#: The check a capability row of a column is on (the column's own name elsewhere).
CAPABILITY_CHECK = "capabilities"


@dataclass(frozen=True)
class Cell:
    """One capability of one op: its state, the worst row status behind it, a note."""

    state: str = UNMEASURED
    #: the status of the row that decided the state ("" when no row did).
    status: str = ""
    note: str = ""


@dataclass
class OpCapabilities:
    """One line of the matrix: an op and a cell per column of gradlab.model.MATRIX."""

    op: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def cell(self, capability: str) -> Cell:
        return self.cells.get(capability, Cell())

    def states(self) -> dict[str, str]:
        """{capability: state} for every column."""
        return {c: self.cell(c).state for c in MATRIX}


def row_state(row: CheckRow) -> str:
    """The state one row says its capability is in."""
    if row.status == SKIP:
        return NA if row.reason in NOT_APPLICABLE_REASONS else UNMEASURED
    if row.reason.endswith("_missing") or row.reason in ABSENT_REASONS:
        return NO
    if row.status in (FAIL, ERROR):
        return WRONG
    if row.status == WARN:
        # measured and different where the op declared it off (second_order: false, double
        # backward silently wrong), else a capability the reference has and the Function lacks
        return WRONG if row.findings else NO
    return BREAKS if row.reason == "graph_break" else YES


def column_of(row: CheckRow) -> str | None:
    """The matrix column a row speaks for, or None."""
    if row.check in FIRST_ORDER_CHECKS:
        # a refused expanded input is its own capability, not a first-order fault
        return None if row.status == WARN else "first_order"
    if row.check in ("second_order", "forward_ad", "autocast"):
        return row.check
    if row.check == CAPABILITY_CHECK and row.variant in MATRIX:
        return row.variant
    return None


def _worse(cell: Cell, state: str, row: CheckRow) -> bool:
    if STATE_ORDER[state] != STATE_ORDER[cell.state]:
        return STATE_ORDER[state] > STATE_ORDER[cell.state]
    return SEVERITY.get(row.status, 0) > SEVERITY.get(cell.status, 0)


def capability_matrix(rows: Iterable[CheckRow]) -> list[OpCapabilities]:
    """One OpCapabilities per op, in the order the ops first appear."""
    ops: dict[str, OpCapabilities] = {}
    for r in rows:
        line = ops.setdefault(r.op, OpCapabilities(r.op))
        col = column_of(r)
        if col is None:
            continue
        state = row_state(r)
        if _worse(line.cell(col), state, r):
            line.cells[col] = Cell(state, r.status, r.note)
    return [line for line in ops.values() if line.cells]


def from_states(op: str, states: Mapping[str, str]) -> OpCapabilities:
    """A matrix line from stated facts (the bundled ops' registry, for `gradlab list`)."""
    return OpCapabilities(op, {c: Cell(s) for c, s in states.items() if c in MATRIX})


def matrix_dict(matrix: Iterable[OpCapabilities]) -> dict[str, dict[str, str]]:
    """{op: {capability: state}} (the JSON report's `capabilities`)."""
    return {line.op: line.states() for line in matrix}

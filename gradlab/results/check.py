"""Check result rows (plain data) and the report that collects them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gradlab.results.status import ERROR, FAIL

#: The table columns, in order (CSV adds the environment columns after these).
COLUMNS = ("op", "case", "dtype", "device", "variant", "check", "status", "max_abs_err",
           "max_rel_err", "seconds", "hint", "message", "location")


@dataclass
class CheckRow:
    """The outcome of one check of one case, dtype, device and variant."""

    op: str
    case: str
    dtype: str
    device: str
    variant: str
    check: str
    status: str
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    seconds: float = 0.0
    #: short likely-cause code (see gradlab.diagnose.HINTS), empty when none applies.
    hint: str = ""
    #: one readable sentence: what is wrong and where.
    message: str = ""
    #: worst elements, e.g. "grad[weight][1, 2] (output [0, 1]): got 0.5 want 1.0".
    location: str = ""
    #: per-input statistics (max errors, wrong fraction, cosine, best-fit ratio, worst elements).
    details: dict[str, Any] = field(default_factory=dict)
    #: path of the saved inputs for a failing case (see gradlab.repro).
    repro: str = ""

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, ERROR)

    def as_dict(self) -> dict[str, Any]:
        """The row as a flat dict (details kept as a nested dict)."""
        return asdict(self)


@dataclass
class Report:
    """All rows of a run plus the environment it ran in."""

    rows: list[CheckRow] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    #: true when --budget stopped the run early (rows not run are missing, not passed).
    truncated: bool = False

    @property
    def passed(self) -> bool:
        """True when no row failed or errored and at least one row ran."""
        return bool(self.rows) and not any(r.failed for r in self.rows) and not self.truncated

    @property
    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if r.failed]

    def extend(self, rows: Iterable[CheckRow]) -> None:
        self.rows.extend(rows)

    def __iter__(self) -> Iterator[CheckRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame with COLUMNS first, then the environment columns."""
        import pandas as pd

        records = [{c: getattr(r, c) for c in COLUMNS} | {"repro": r.repro} for r in self.rows]
        frame = pd.DataFrame.from_records(records, columns=[*COLUMNS, "repro"])
        for key, value in self.env.items():
            frame[key] = value
        return frame

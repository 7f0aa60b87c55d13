"""Bench results as data: one row per implementation and phase, the report, its columns.

Nothing here measures or prints: gradlab.bench fills these, gradlab.render shows and stores them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gradlab.errors import GradlabError
from gradlab.results.status import ERROR, PASS

#: The phase every other phase of a case is a part of: none can take longer (beyond noise)...
WHOLE = "forward_backward"
#: ...and the parts whose costs add up to it.
PARTS = ("forward_grad", "backward")

#: The columns of a bench row, in order (CSV adds the environment columns after these; the raw
#: samples go to the JSON only).
COLUMNS = ("op", "case", "dtype", "device", "impl", "phase", "status", "median_s", "iqr_s",
           "min_s", "n", "number", "noisy", "speedup", "speedup_low", "speedup_high",
           "significant", "saved_bytes", "peak_mem_bytes", "first_call_s", "resampled",
           "contradicted", "note")


class BenchError(GradlabError):
    """A bench run or comparison cannot go on (bad options, unreadable result file)."""


@dataclass
class BenchRow:
    """One implementation in one phase of one case, dtype and device."""

    op: str
    case: str
    dtype: str
    device: str
    impl: str
    phase: str
    status: str = PASS
    median_s: float | None = None
    iqr_s: float | None = None
    min_s: float | None = None
    n: int = 0
    #: calls per sample (a sample is the mean of a block of calls).
    number: int = 1
    noisy: bool = False
    #: on custom rows: reference median / custom median (> 1: the custom Function is faster).
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    #: the speedup's interval excludes 1.
    significant: bool | None = None
    saved_bytes: int | None = None
    #: CUDA only: peak allocated by one call beyond what was allocated before it.
    peak_mem_bytes: int | None = None
    first_call_s: float | None = None
    #: times the phase was sampled again because its median contradicted forward_backward's (a
    #: part slower than the whole); its samples are the last sampling's.
    resampled: int = 0
    #: still contradicting after the last resampling: compare does not judge this phase.
    contradicted: bool = False
    note: str = ""
    #: seconds per call, in the order taken (JSON only).
    samples_s: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.op, self.case, self.dtype, self.device, self.impl, self.phase)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchReport:
    """All rows of a bench run, its settings and the environment it ran in."""

    rows: list[BenchRow] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    #: Ctrl-C stopped the run: the rows measured so far are all there is.
    interrupted: bool = False

    @property
    def errors(self) -> list[BenchRow]:
        return [r for r in self.rows if r.status == ERROR]

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame: COLUMNS, then the environment columns."""
        import pandas as pd

        frame = pd.DataFrame.from_records([{c: getattr(r, c) for c in COLUMNS}
                                           for r in self.rows], columns=list(COLUMNS))
        for k, v in self.env.items():
            frame[k] = v
        return frame

"""Results: typed rows and reports that the checks and the bench return (no printing here)."""

from gradlab.results.check import (
    COLUMNS,
    CheckRow,
    Element,
    ErrorStats,
    Finding,
    ProbeStats,
    Report,
)
from gradlab.results.status import ERROR, FAIL, PASS, SKIP, STATUSES, WARN

__all__ = ["COLUMNS", "ERROR", "FAIL", "PASS", "SKIP", "STATUSES", "WARN", "CheckRow", "Element",
           "ErrorStats", "Finding", "ProbeStats", "Report"]

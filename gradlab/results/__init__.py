"""Results: typed rows and reports that the checks and the bench return (no printing here)."""

from gradlab.results.check import (
    COLUMNS,
    ERROR_MAP_SIDE,
    CheckRow,
    Element,
    ErrorStats,
    Finding,
    Pattern,
    ProbeStats,
    Report,
    exit_code,
    merge_reports,
)
from gradlab.results.status import ERROR, FAIL, PASS, SKIP, STATUSES, WARN

__all__ = ["COLUMNS", "ERROR", "ERROR_MAP_SIDE", "FAIL", "PASS", "SKIP", "STATUSES", "WARN",
           "CheckRow", "Element", "ErrorStats", "Finding", "Pattern", "ProbeStats", "Report",
           "exit_code", "merge_reports"]

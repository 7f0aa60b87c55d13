"""Results: typed rows and reports that the checks and the bench return (no printing here).

The row and report types load on first use: `gradlab list` needs the status words only, and
results.check's dataclasses are 4 ms of its start-up."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from gradlab.results.status import ERROR, FAIL, PASS, SKIP, SPEC_INPUTS, STATUSES, WARN

if TYPE_CHECKING:
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

__all__ = ["COLUMNS", "ERROR", "ERROR_MAP_SIDE", "FAIL", "PASS", "SKIP", "SPEC_INPUTS",
           "STATUSES", "WARN",
           "CheckRow", "Element", "ErrorStats", "Finding", "Pattern", "ProbeStats", "Report",
           "exit_code", "merge_reports"]


def __getattr__(name: str) -> Any:
    # reached only for names not yet here: the status words are, results.check's load now
    if name in __all__:
        value = getattr(import_module("gradlab.results.check"), name)
        globals()[name] = value  # once: later lookups are plain attribute reads
        return value
    raise AttributeError(f"module 'gradlab.results' has no attribute {name!r}")

"""Report files: names that never collide, written atomically, and the check report's CSV and JSON.

A report's CSV and JSON share one stem, 'check-YYYYmmdd-HHMMSS-XXXX': the time, then a random
suffix taken with O_EXCL (gradlab.fileio.reserve_stem), so runs in the same second, in one
process or several, never write into each other's files.  Each file is written to a temporary
file in the same folder and renamed into place: a reader sees no file or a complete one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gradlab.errors import ReportError
from gradlab.fileio import atomic_write, ensure_writable, reserve_stem
from gradlab.render.words import message
from gradlab.results import COLUMNS, Report

#: The files of one report, in the order the writers return them.
SUFFIXES = (".csv", ".json")


def unique_stem(folder: Path, stem: str) -> str:
    """'STEM-YYYYmmdd-HHMMSS-XXXX', its .csv and .json created empty and exclusively here."""
    return reserve_stem(folder, stem, SUFFIXES)


def write_report_files(folder: str | Path, stem: str, csv_text: str,
                       json_text: str) -> list[Path]:
    """CSV and JSON under a new stem in `folder` (created if needed); ReportError naming the
    folder when it cannot be written."""
    out = ensure_writable(folder)
    name = unique_stem(out, stem)
    paths = [out / f"{name}{suffix}" for suffix in SUFFIXES]
    try:
        for path, text in zip(paths, (csv_text, json_text), strict=True):
            atomic_write(path, text)
    except OSError as exc:
        raise ReportError(f"{out}: cannot write {name}: {exc.strerror or exc}") from None
    return paths


def check_report_texts(report: Report) -> tuple[str, str]:
    """The CSV (table columns + environment) and JSON (rows with details) of a check report."""
    frame = report.to_frame()
    frame.insert(len(COLUMNS), "message", [message(r) for r in report.rows])
    frame["interrupted"] = report.interrupted
    payload = {"env": report.env, "passed": report.passed, "truncated": report.truncated,
               "interrupted": report.interrupted,
               "columns": list(COLUMNS),
               "rows": [r.as_dict() | {"message": message(r)} for r in report.rows]}
    return frame.to_csv(index=False), json.dumps(payload, indent=1, default=str)


def write_check_reports(report: Report, folder: str | Path) -> list[Path]:
    """CSV and JSON of `report` in `folder`, under a new stem."""
    return write_report_files(folder, "check", *check_report_texts(report))


#: Seconds between two writes of a report while its run goes on.
WRITE_EVERY_S = 2.0


class CheckReportWriter:
    """One run's check report, rewritten as cases finish: its names are taken once, each write
    is atomic, and a write made while the run goes on says `interrupted` (true of the file
    until the final write replaces it), so a run killed outright leaves every row finished
    up to its last write, marked as partial."""

    def __init__(self, folder: str | Path, every: float = WRITE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.folder = ensure_writable(folder)
        self.every, self.clock = every, clock
        self.last = -math.inf
        self.paths: list[Path] = []

    def write(self, report: Report, *, final: bool = False) -> list[Path]:
        """Write `report` (unless not final and the last write was under `every` ago)."""
        if not final and self.clock() - self.last < self.every:
            return self.paths
        if not self.paths:
            name = unique_stem(self.folder, "check")
            self.paths = [self.folder / f"{name}{suffix}" for suffix in SUFFIXES]
        if not final:
            report = replace(report, interrupted=True)
        try:
            for path, text in zip(self.paths, check_report_texts(report), strict=True):
                atomic_write(path, text)
        except OSError as exc:
            raise ReportError(f"{self.folder}: cannot write {self.paths[0].stem}: "
                              f"{exc.strerror or exc}") from None
        self.last = self.clock()
        return self.paths

"""Report files: names that never collide, written atomically, and the check report's CSV and JSON.

A report's CSV and JSON share one stem, 'check-YYYYmmdd-HHMMSS-XXXX': the time, then a random
suffix taken with O_EXCL (gradlab.fileio.reserve_stem), so runs in the same second, in one
process or several, never write into each other's files.  Each file is written to a temporary
file in the same folder and renamed into place: a reader sees no file or a complete one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from gradlab.errors import GradlabError, ReportError
from gradlab.fileio import atomic_write, ensure_writable, read_limited, reserve_stem
from gradlab.render.words import message
from gradlab.results import (
    COLUMNS,
    CheckRow,
    Element,
    ErrorStats,
    Finding,
    ProbeStats,
    Report,
)
from gradlab.results.capabilities import capability_matrix, matrix_dict
from gradlab.results.summary import RunSummary, op_references, summarize

#: Marks a check JSON file (older files without it are read too, by their keys).
FORMAT = "gradlab-check"
#: The largest check JSON `gradlab merge` reads (a whole bundled suite is about 3 MiB).
MAX_REPORT_BYTES = 256 * 1024 * 1024

#: The files of one report, in the order the writers return them.
SUFFIXES = (".csv", ".json")
#: A check report's environment (envinfo, the same for every row) is written once, in the JSON
#: and in a one-row CSV beside the report's: 'env-check-...csv' (a prefix, not a suffix, so that
#: a glob for check-*.csv still finds the report alone).
ENV_PREFIX = "env-"


def env_path(csv_path: Path) -> Path:
    """The environment file of the check report whose CSV is `csv_path`."""
    return csv_path.with_name(ENV_PREFIX + csv_path.name)


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


def finding_numbers(summary: RunSummary[CheckRow]) -> dict[int, int]:
    """{id(row): its finding's 1-based number} for every row of a finding."""
    return {id(r): i for i, f in enumerate(summary.findings, 1) for r in f.rows}


def finding_dicts(summary: RunSummary[CheckRow]) -> list[dict[str, Any]]:
    """The findings as plain data: number, op, case, hint, subject, status, checks, variants."""
    return [{"finding": i, "op": f.op, "case": f.case, "hint": f.hint, "subject": f.subject,
             "reason": f.reason, "status": f.status, "checks": f.checks, "dtypes": f.dtypes,
             "devices": f.devices, "variants": f.variants, "rows": len(f.rows)}
            for i, f in enumerate(summary.findings, 1)]


def check_report_texts(report: Report) -> tuple[str, str, str]:
    """The CSV (table columns, the message, the row's finding number), JSON (rows with details,
    the environment, the run's numbers and findings as gradlab.results.summary groups them,
    and the capability matrix: {op: {capability: state}}) and environment CSV (one row: see
    ENV_PREFIX) of a check report."""
    messages = [message(r) for r in report.rows]
    summary = summarize(report.rows)
    numbers = finding_numbers(summary)
    records = [{**{c: rec[c] for c in COLUMNS}, "message": m, "finding": numbers.get(id(r)),
                **{k: v for k, v in rec.items() if k not in COLUMNS and k not in report.env},
                "interrupted": report.interrupted}
               for rec, m, r in zip(report.records(), messages, report.rows, strict=True)]
    payload = {"format": FORMAT, "env": report.env, "passed": report.passed,
               "truncated": report.truncated, "interrupted": report.interrupted,
               "stopped": report.stopped,
               "columns": list(COLUMNS),
               "summary": summary.counts(),
               "findings": finding_dicts(summary),
               "capabilities": matrix_dict(capability_matrix(report.rows)),
               # what each op's forward and gradients were compared with
               "ops": {op: {"reference": ref} for op, ref in op_references(report.rows).items()},
               "rows": [r.as_dict() | {"message": m, "finding": numbers.get(id(r))}
                        for r, m in zip(report.rows, messages, strict=True)]}
    # no indent: json's C encoder runs only without one (0.2 s against 0.02 s for the bundled
    # specs' 2,300 rows, and the report is rewritten while a run goes on)
    header = list(records[0]) if records else [*COLUMNS, "message", "finding", "repro",
                                               "interrupted"]
    return (csv_text(header, records), json.dumps(payload, default=str),
            csv_text(list(report.env), [report.env]))


def csv_text(header: list[str], records: list[dict[str, Any]]) -> str:
    """CSV as pandas' to_csv writes it (None and NaN as empty cells), without importing pandas
    (a fifth of a second, at every run's end)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for rec in records:
        writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                         for v in (rec.get(k) for k in header)])
    return out.getvalue()


def write_check_reports(report: Report, folder: str | Path) -> list[Path]:
    """CSV, JSON and environment CSV of `report` in `folder`, under a new stem."""
    return CheckReportWriter(folder).write(report, final=True)


#: Seconds between two writes of a report while its run goes on (at least; see COST_SHARE).
WRITE_EVERY_S = 2.0
#: Partial writes may take at most this share of a run: each rewrites every row so far (0.45 s
#: for the bundled specs' 2,148 rows), so a fixed interval made long runs spend a quarter of
#: their time rewriting their own report.
COST_SHARE = 0.1


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
        self.cost = 0.0  # seconds the last write took
        self.paths: list[Path] = []

    def write(self, report: Report, *, final: bool = False) -> list[Path]:
        """Write `report` (unless not final and the last write was under `every` ago)."""
        if not final and self.clock() - self.last < max(self.every, self.cost / COST_SHARE):
            return self.paths
        start = self.clock()
        if not self.paths:
            name = unique_stem(self.folder, "check")
            self.paths = [self.folder / f"{name}{suffix}" for suffix in SUFFIXES]
            self.paths.append(env_path(self.paths[0]))
        if not final:
            report = replace(report, interrupted=True)
        try:
            for path, text in zip(self.paths, check_report_texts(report), strict=True):
                atomic_write(path, text)
        except OSError as exc:
            raise ReportError(f"{self.folder}: cannot write {self.paths[0].stem}: "
                              f"{exc.strerror or exc}") from None
        self.last = self.clock()
        self.cost = self.last - start
        return self.paths


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of dataclass `cls` (extra keys, like message, go)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _finding(data: dict[str, Any]) -> Finding:
    f = Finding(**_known(Finding, data))
    f.shape, f.dims = _tuple(f.shape), _tuple(f.dims)
    f.passing_tolerance = _tuple(f.passing_tolerance)
    f.stats = ErrorStats(**data["stats"]) if data.get("stats") else None
    f.probes = ProbeStats(**data["probes"]) if data.get("probes") else None
    f.worst = [Element(**(e | {"output_index": tuple(e.get("output_index", ())),
                               "input_index": tuple(e.get("input_index", ()))}))
               for e in data.get("worst", [])]
    return f


def row_from_dict(data: dict[str, Any]) -> CheckRow:
    """A CheckRow from its JSON form (CheckRow.as_dict, as the check JSON holds it)."""
    row = CheckRow(**_known(CheckRow, data))
    row.findings = [_finding(f) for f in data.get("findings", [])]
    return row


def read_check_json(path: str | Path) -> Report:
    """A check report from a check-*.json file; a file that is not one is a GradlabError."""
    p = Path(path)
    try:
        payload = json.loads(read_limited(p, MAX_REPORT_BYTES).decode("utf-8"))
    except GradlabError as exc:  # not a regular file, too big, unreadable
        raise GradlabError(f"{p}: {exc}") from None
    except OSError as exc:
        raise GradlabError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise GradlabError(f"{p}: not JSON: {exc}") from None
    if (not isinstance(payload, dict) or payload.get("format", FORMAT) != FORMAT
            or not isinstance(payload.get("rows"), list)):
        raise GradlabError(f"{p}: not a gradlab check report (check-*.json)")
    try:
        rows = [row_from_dict(r) for r in payload["rows"]]
    except (TypeError, KeyError, AttributeError) as exc:
        raise GradlabError(f"{p}: malformed check report row: {exc}") from None
    return Report(rows=rows, env=dict(payload.get("env") or {}),
                  truncated=bool(payload.get("truncated")), stopped=bool(payload.get("stopped")),
                  interrupted=bool(payload.get("interrupted")))

"""Report files: names that never collide, and the check report's CSV and JSON (written and read
back here, so `gradlab merge` reads what `gradlab check` writes)."""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from gradlab.errors import GradlabError
from gradlab.render.words import message
from gradlab.results import COLUMNS, CheckRow, Element, ErrorStats, Finding, ProbeStats, Report

#: Marks a check JSON file (older files without it are read too, by their keys).
FORMAT = "gradlab-check"


def unique_stem(folder: Path, stem: str) -> str:
    """'STEM-YYYYmmdd-HHMMSS' (with -2, -3 ... when a run in the same second took it)."""
    base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, k = base, 1
    while (folder / f"{name}.csv").exists() or (folder / f"{name}.json").exists():
        k += 1
        name = f"{base}-{k}"
    return name


def write_check_reports(report: Report, folder: str | Path) -> list[Path]:
    """CSV (table columns + environment) and JSON (rows with details) in `folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    name = unique_stem(out, "check")
    csv_path = out / f"{name}.csv"
    frame = report.to_frame()
    frame.insert(len(COLUMNS), "message", [message(r) for r in report.rows])
    frame.to_csv(csv_path, index=False)
    json_path = out / f"{name}.json"
    payload = {"format": FORMAT, "env": report.env, "passed": report.passed,
               "truncated": report.truncated, "stopped": report.stopped,
               "columns": list(COLUMNS),
               "rows": [r.as_dict() | {"message": message(r)} for r in report.rows]}
    json_path.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return [csv_path, json_path]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of dataclass `cls` (extra keys, like message, go)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _finding(data: dict[str, Any]) -> Finding:
    f = Finding(**_known(Finding, data))
    f.shape, f.dims = _tuple(f.shape), _tuple(f.dims)
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
        payload = json.loads(p.read_text(encoding="utf-8"))
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
                  truncated=bool(payload.get("truncated")), stopped=bool(payload.get("stopped")))

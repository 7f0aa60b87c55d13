"""Report files: names that never collide, and the check report's CSV and JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

from gradlab.render.words import message
from gradlab.results import COLUMNS, Report


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
    frame["interrupted"] = report.interrupted
    frame.to_csv(csv_path, index=False)
    json_path = out / f"{name}.json"
    payload = {"env": report.env, "passed": report.passed, "truncated": report.truncated,
               "interrupted": report.interrupted,
               "columns": list(COLUMNS),
               "rows": [r.as_dict() | {"message": message(r)} for r in report.rows]}
    json_path.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return [csv_path, json_path]

"""The bench report files: CSV for people and spreadsheets, JSON (with raw samples) for compare.

Version history of the JSON: 1 wrote a passing row's status as "ok"; 2 writes "pass", the word
check rows use.  Both are read; a version-1 "ok" comes back as "pass".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradlab.render.files import unique_stem
from gradlab.results.bench import COLUMNS, BenchError, BenchReport, BenchRow
from gradlab.results.status import PASS

#: Marks a bench JSON file (compare refuses anything else); bump VERSION on incompatible change.
FORMAT = "gradlab-bench"
VERSION = 2
#: The versions read_bench_json understands.
READABLE_VERSIONS = (1, 2)
#: Version 1's status words that changed since.
_V1_STATUS = {"ok": PASS}
_KEYS = {"op", "case", "dtype", "device", "impl", "phase"}


def write_bench_reports(report: BenchReport, folder: str | Path,
                        stem: str = "bench") -> list[Path]:
    """CSV (one row per op, case, impl and phase, then the environment columns) and JSON (the
    same rows with their raw samples, the settings and the environment) in `folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    name = unique_stem(out, stem)
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    report.to_frame().to_csv(csv_path, index=False)
    payload = {"format": FORMAT, "version": VERSION, "env": report.env,
               "settings": report.settings, "interrupted": report.interrupted,
               "columns": [*COLUMNS, "samples_s"], "rows": [r.as_dict() for r in report.rows]}
    json_path.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return [csv_path, json_path]


def read_bench_json(path: str | Path) -> BenchReport:
    """A BenchReport from a bench JSON file; BenchError naming the file when it is not one."""
    p = Path(path)
    doc = _load(p)
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise BenchError(f"{p}: 'rows' is not a list")
    parsed = [_parse_row(p, i, r, doc["version"]) for i, r in enumerate(rows)]
    return BenchReport(rows=parsed, env=dict(doc.get("env") or {}),
                       settings=dict(doc.get("settings") or {}),
                       interrupted=bool(doc.get("interrupted")))


def _load(p: Path) -> dict[str, Any]:
    """The JSON document of a bench file of a readable version."""
    if p.suffix.lower() == ".csv":
        raise BenchError(f"{p}: compare needs the bench JSON file (the CSV has no raw samples); "
                         f"use {p.with_suffix('.json').name}")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchError(f"{p}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BenchError(f"{p}: not a gradlab bench JSON file (no \"format\": \"{FORMAT}\")")
    if doc.get("version") not in READABLE_VERSIONS:
        raise BenchError(f"{p}: bench file version {doc.get('version')!r}, this gradlab reads "
                         f"{', '.join(map(str, READABLE_VERSIONS))}")
    return doc


def _parse_row(p: Path, i: int, r: Any, version: int) -> BenchRow:
    """rows[i] of a bench file as a BenchRow (unknown keys dropped, old status words mapped)."""
    if not isinstance(r, dict) or not _KEYS <= set(r):
        raise BenchError(f"{p}: rows[{i}]: expected a mapping with op, case, dtype, device, "
                         "impl and phase")
    samples = r.get("samples_s", [])
    if not isinstance(samples, list) or not all(isinstance(s, (int, float)) for s in samples):
        raise BenchError(f"{p}: rows[{i}].samples_s: expected a list of numbers")
    fields = {k: v for k, v in r.items() if k in BenchRow.__dataclass_fields__}
    status = fields.get("status")
    if version == 1 and isinstance(status, str):
        fields["status"] = _V1_STATUS.get(status, status)
    return BenchRow(**fields)

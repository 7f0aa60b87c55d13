"""The bench report files: CSV for people and spreadsheets, JSON (with raw samples) for compare.

Version history of the JSON: 1 wrote a passing row's status as "ok"; 2 writes "pass", the word
check rows use; 3 adds `resampled` and `contradicted` to each row (absent: 0 and false).  All
are read; a version-1 "ok" comes back as "pass".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradlab.bench.timing import MAX_SAMPLES
from gradlab.errors import InputFileError, one_line, shown
from gradlab.fileio import read_limited
from gradlab.render.files import write_report_files
from gradlab.results.bench import COLUMNS, BenchError, BenchReport, BenchRow
from gradlab.results.status import PASS

#: Marks a bench JSON file (compare refuses anything else); bump VERSION on incompatible change.
FORMAT = "gradlab-bench"
VERSION = 3
#: The versions read_bench_json understands.
READABLE_VERSIONS = (1, 2, 3)
#: Version 1's status words that changed since.
_V1_STATUS = {"ok": PASS}
_KEYS = {"op", "case", "dtype", "device", "impl", "phase"}
#: Largest bench JSON read.  A row holds tens to hundreds of samples (a few KiB); 16 MiB leaves
#: room for long runs while bounding compare, whose bootstrap costs about 0.1 s per 1,000
#: samples: a 16 MiB file of full 10,000-sample rows compares in under half a minute.
MAX_BENCH_BYTES = 16 << 20


def write_bench_reports(report: BenchReport, folder: str | Path,
                        stem: str = "bench") -> list[Path]:
    """CSV (one row per op, case, impl and phase, then the environment columns) and JSON (the
    same rows with their raw samples, the settings and the environment) in `folder`."""
    payload = {"format": FORMAT, "version": VERSION, "env": report.env,
               "settings": report.settings, "interrupted": report.interrupted,
               "columns": [*COLUMNS, "samples_s"], "rows": [r.as_dict() for r in report.rows]}
    return write_report_files(folder, stem, report.to_frame().to_csv(index=False),
                              json.dumps(payload, indent=1, default=str))


def read_bench_json(path: str | Path) -> BenchReport:
    """A BenchReport from a bench JSON file; BenchError naming the file (and the key) when it is
    not one, is larger than MAX_BENCH_BYTES or holds a value of the wrong type."""
    p = Path(path)
    doc = _load(p)
    for key in ("env", "settings"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise _bad(p, key, "a mapping", doc[key])
    if doc.get("interrupted") is not None and not isinstance(doc["interrupted"], bool):
        raise _bad(p, "interrupted", "true or false", doc["interrupted"])
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise _bad(p, "rows", "a list", rows)
    parsed = [_parse_row(p, i, r, doc["version"]) for i, r in enumerate(rows)]
    return BenchReport(rows=parsed, env=dict(doc.get("env") or {}),
                       settings=dict(doc.get("settings") or {}),
                       interrupted=bool(doc.get("interrupted")))


def _bad(p: Path, key: str, expected: str, got: Any) -> BenchError:
    return BenchError(f"{p}: {key}: expected {expected}, got {shown(got)}")


def _load(p: Path) -> dict[str, Any]:
    """The JSON document of a bench file of a readable version."""
    if p.suffix.lower() == ".csv":
        raise BenchError(f"{p}: compare needs the bench JSON file (the CSV has no raw samples); "
                         f"use {p.with_suffix('.json').name}")
    try:
        doc = json.loads(read_limited(p, MAX_BENCH_BYTES).decode("utf-8"))
    except InputFileError as exc:
        raise BenchError(f"{p}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"{p}: not UTF-8 text (byte offset {exc.start})") from None
    except RecursionError:
        raise BenchError(f"{p}: not JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and ints of more than 4,300 digits
        raise BenchError(f"{p}: not JSON: {one_line(str(exc), 160)}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BenchError(f"{p}: not a gradlab bench JSON file (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise BenchError(f"{p}: version: bench file version {shown(version)}, this gradlab reads "
                         f"{', '.join(map(str, READABLE_VERSIONS))}")
    return doc


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: What each row field may hold (a row read back is checked against it before compare uses it).
_FIELD_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(("op", "case", "dtype", "device", "impl", "phase", "status", "note"),
                    (lambda v: isinstance(v, str), "a string")),
    **dict.fromkeys(("median_s", "iqr_s", "min_s", "speedup", "speedup_low", "speedup_high",
                     "first_call_s"), (lambda v: v is None or _is_number(v), "a number or null")),
    **dict.fromkeys(("n", "number"), (lambda v: type(v) is int, "an integer")),
    "resampled": (lambda v: type(v) is int and v >= 0, "an integer >= 0"),
    **dict.fromkeys(("saved_bytes", "peak_mem_bytes"),
                    (lambda v: v is None or type(v) is int, "an integer or null")),
    **dict.fromkeys(("noisy", "contradicted"), (lambda v: isinstance(v, bool), "true or false")),
    "significant": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
}


def _samples(p: Path, i: int, samples: Any) -> list[float]:
    """rows[i].samples_s: at most MAX_SAMPLES finite, non-negative numbers (seconds)."""
    key = f"rows[{i}].samples_s"
    if not isinstance(samples, list):
        raise _bad(p, key, "a list of seconds", samples)
    if len(samples) > MAX_SAMPLES:
        raise BenchError(f"{p}: {key}: {len(samples):,} samples, more than the {MAX_SAMPLES:,} a "
                         "bench run takes")
    for j, s in enumerate(samples):
        if not (_is_number(s) and math.isfinite(s) and s >= 0):
            raise _bad(p, f"{key}[{j}]", "a finite number of seconds >= 0", s)
    return samples


def _parse_row(p: Path, i: int, r: Any, version: int) -> BenchRow:
    """rows[i] of a bench file as a BenchRow (unknown keys dropped, old status words mapped)."""
    if not isinstance(r, dict) or not _KEYS <= set(r):
        raise BenchError(f"{p}: rows[{i}]: expected a mapping with op, case, dtype, device, "
                         "impl and phase")
    fields = {k: v for k, v in r.items() if k in _FIELD_KINDS}
    for k, v in fields.items():
        ok, expected = _FIELD_KINDS[k]
        if not ok(v):
            raise _bad(p, f"rows[{i}].{k}", expected, v)
    fields["samples_s"] = _samples(p, i, r.get("samples_s", []))
    status = fields.get("status")
    if version == 1 and isinstance(status, str):
        fields["status"] = _V1_STATUS.get(status, status)
    return BenchRow(**fields)

"""The hint-precision numbers of a set of corpus-shaped entries, and the script around them:
benchmarks/hint_corpus.py (the corpus, tuned on) and benchmarks/hint_holdout.py (held-out
Functions) print the same table from here, and tests/test_holdout.py asserts on `measure`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from corpus_judge import Judged, judge, twins, verdict
from corpus_ops import Entry


def measure(judged: list[Judged], entries: Sequence[Entry] = ()) -> dict[str, Any]:
    """The numbers and every misfire as plain data: over the judged broken Functions, and over
    each distinct twin of `entries` (none: no twin is run)."""
    twin_fail = []
    distinct = twins(list(entries))
    for key, e in distinct.items():
        v = verdict(e.twin, e)
        if not v.passed:
            twin_fail.append({"twin": key, "entry": e.id, "crashed": v.crashed,
                              "findings": [list(f) for f in v.findings]})
    hinted = [j for j in judged if j.hinted]
    right = [j for j in hinted if j.right]
    nameable = [j for j in judged if j.entry.right]
    mixed = [j for j in judged if not j.entry.right]
    return {
        "entries": len(judged),
        "flagged": sum(j.flagged for j in judged),
        "hinted": len(hinted),
        "right": len(right),
        "precision": len(right) / len(hinted) if hinted else float("nan"),
        "share_hinted": len(hinted) / len(judged) if judged else float("nan"),
        "nameable": len(nameable),
        "nameable_hinted_right": sum(j.right for j in nameable),
        "mixed": len(mixed),
        "mixed_silent": sum(not j.hinted for j in mixed),
        "twins": len(distinct),
        "twins_passed": len(distinct) - len(twin_fail),
        "wrong": [{"entry": j.entry.id, "right": sorted(j.entry.right), "hints": j.verdict.hints,
                   "wrong": [list(w) for w in j.wrong], "pending": j.entry.pending}
                  for j in judged if j.wrong],
        "missed": [{"entry": j.entry.id, "pending": j.entry.pending} for j in judged
                   if not j.flagged],
        "unhinted": [{"entry": j.entry.id, "right": sorted(j.entry.right),
                      "pending": j.entry.pending, "crashed": j.verdict.crashed,
                      "first": j.verdict.findings[0][1] if j.verdict.findings else ""}
                     for j in judged if j.flagged and not j.hinted and j.entry.right],
        "twin_failures": twin_fail,
    }


def _pending(x: dict[str, Any]) -> str:
    return f" (pending {x['pending']})" if x["pending"] else ""


def report(m: dict[str, Any], title: str, seconds: float) -> list[str]:
    """The table, then every wrong hint, missed bug, silent entry and failing twin."""
    lines = [f"{title}: {m['entries']} broken Functions, {m['twins']} correct twins "
             f"({seconds:.0f} s)"]
    rows = [("entries (broken)", m["entries"]), ("flagged (not passed)", m["flagged"]),
            ("hinted", m["hinted"]), ("right (every hint shown right)", m["right"]),
            ("precision (right / hinted)", f"{100 * m['precision']:.1f}%"),
            ("share hinted (hinted / broken)", f"{100 * m['share_hinted']:.1f}%"),
            ("nameable cause: right hint shown",
             f"{m['nameable_hinted_right']} of {m['nameable']}"),
            ("mixed error (no hint right): silent", f"{m['mixed_silent']} of {m['mixed']}"),
            ("twins passed", f"{m['twins_passed']} of {m['twins']}")]
    lines += [f"  {name:<36} {value:>10}" for name, value in rows]
    for w in m["wrong"]:
        lines.append(f"WRONG {w['entry']}{_pending(w)}: right {w['right'] or '(none)'}, "
                     f"shown {w['hints']}")
        lines += [f"    {hint}: {msg}" for hint, msg in w["wrong"]]
    lines += [f"MISSED {x['entry']}{_pending(x)}" for x in m["missed"]]
    lines += [f"NO HINT {x['entry']}{_pending(x)}: right {x['right']}; "
              f"{x['crashed'] or x['first']}" for x in m["unhinted"]]
    for t in m["twin_failures"]:
        lines.append(f"TWIN FAILS {t['twin']} (entry {t['entry']}): {t['crashed']}")
        lines += [f"    {hint or '-'}: {msg}" for hint, msg in t["findings"]]
    return lines


def main(entries: Sequence[Entry], title: str, doc: str) -> None:
    """The scripts' command line: `[--json FILE] [-k SUBSTRING]`, then the report."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("-k", default="", help="only entries whose id contains this")
    a = parser.parse_args()
    torch.set_num_threads(1)  # as gradlab's own runs: tiny tensors gain nothing from more
    chosen = [e for e in entries if a.k in e.id]
    start = time.perf_counter()
    m = measure([judge(e) for e in chosen], chosen)
    print("\n".join(report(m, title, time.perf_counter() - start)))
    if a.json:
        a.json.write_text(json.dumps(m, indent=1))

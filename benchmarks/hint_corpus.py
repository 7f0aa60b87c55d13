"""Hint precision on the corpus of broken custom Functions (tests/data/corpus).

Every broken Function goes through `gradlab.check(fn, args, reference=...)` with the defaults;
the likely causes it shows (one per finding block, as the CLI prints them) are judged against
the causes that are right for that bug.  Prints: entries, flagged (did not pass), hinted (at
least one likely cause shown), right (every cause shown is right), precision = right / hinted,
share hinted = hinted / broken, the entries with a nameable cause that get a right one, the
mixed errors (no hint is right) that stay silent, twins passed; then every wrong hint with its
entry and message, every broken Function that passed, and every twin that failed.

    python3 benchmarks/hint_corpus.py [--json FILE] [-k SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not
sys.path.insert(0, str(ROOT / "tests" / "data" / "corpus"))

import torch  # noqa: E402
from corpus_functions import CORPUS  # noqa: E402
from corpus_judge import Judged, judge, twins, verdict  # noqa: E402


def measure(entries: list[Any]) -> dict[str, Any]:
    """Judge every entry and every distinct twin; the numbers and the misfires as plain data."""
    judged: list[Judged] = [judge(e) for e in entries]
    twin_fail = []
    distinct = twins(entries)
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
        "nameable": len(nameable),
        "nameable_hinted_right": sum(j.right for j in nameable),
        "mixed": len(mixed),
        "mixed_silent": sum(not j.hinted for j in mixed),
        "entries": len(judged),
        "flagged": sum(j.flagged for j in judged),
        "hinted": len(hinted),
        "right": len(right),
        "precision": len(right) / len(hinted) if hinted else float("nan"),
        "share_hinted": len(hinted) / len(judged) if judged else float("nan"),
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


def show(m: dict[str, Any], seconds: float) -> None:
    print(f"hint corpus: {m['entries']} broken Functions, {m['twins']} correct twins "
          f"({seconds:.0f} s)")
    rows = [("entries (broken)", m["entries"]), ("flagged (not passed)", m["flagged"]),
            ("hinted", m["hinted"]), ("right (every hint shown right)", m["right"]),
            ("precision (right / hinted)", f"{100 * m['precision']:.1f}%"),
            ("share hinted (hinted / broken)", f"{100 * m['share_hinted']:.1f}%"),
            ("nameable cause: right hint shown",
             f"{m['nameable_hinted_right']} of {m['nameable']}"),
            ("mixed error (no hint right): silent", f"{m['mixed_silent']} of {m['mixed']}"),
            ("twins passed", f"{m['twins_passed']} of {m['twins']}")]
    for name, value in rows:
        print(f"  {name:<36} {value:>10}")
    for w in m["wrong"]:
        pend = f" (pending {w['pending']})" if w["pending"] else ""
        print(f"WRONG {w['entry']}{pend}: right {w['right'] or '(none)'}, shown {w['hints']}")
        for hint, msg in w["wrong"]:
            print(f"    {hint}: {msg}")
    for x in m["missed"]:
        print(f"MISSED {x['entry']}" + (f" (pending {x['pending']})" if x["pending"] else ""))
    for x in m["unhinted"]:
        pend = f" (pending {x['pending']})" if x["pending"] else ""
        print(f"NO HINT {x['entry']}{pend}: right {x['right']}; {x['crashed'] or x['first']}")
    for t in m["twin_failures"]:
        print(f"TWIN FAILS {t['twin']} (entry {t['entry']}): {t['crashed']}")
        for hint, msg in t["findings"]:
            print(f"    {hint or '-'}: {msg}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("-k", default="", help="only entries whose id contains this")
    a = parser.parse_args()
    torch.set_num_threads(1)  # as gradlab's own runs: tiny tensors gain nothing from more
    entries = [e for e in CORPUS if a.k in e.id]
    start = time.perf_counter()
    m = measure(entries)
    show(m, time.perf_counter() - start)
    if a.json:
        a.json.write_text(json.dumps(m, indent=1))


if __name__ == "__main__":
    main()

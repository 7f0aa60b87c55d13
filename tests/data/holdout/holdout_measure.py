"""Hint precision on the held-out Functions, scored as the corpus is (corpus_judge.py).

An entry's hints are the likely causes the CLI prints (one per finding block); it is *right*
when every hint shown is in its right set.  precision = right / hinted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "corpus"))

from corpus_judge import Judged, Verdict, judge, twins, verdict
from holdout_ops import Entry

from gradlab.render.findings import group_failures  # noqa: F401  (the judge's grouping)


def judge_entry(e: Entry) -> Judged:
    return judge(e)  # type: ignore[arg-type]  # an Entry of the same shape as the corpus's


def twin_verdicts(entries: list[Entry]) -> dict[str, tuple[Entry, Verdict]]:
    """Each distinct twin (same Function, same inputs) once, with gradlab's verdict on it."""
    return {k: (e, verdict(e.twin, e)) for k, e in twins(entries).items()}  # type: ignore[arg-type]


def measure(judged: list[Judged], twin_results: dict[str, tuple[Entry, Verdict]]) -> dict[str, Any]:
    """The numbers and every misfire as plain data."""
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
        "twins": len(twin_results),
        "twins_passed": sum(v.passed for _, v in twin_results.values()),
        "wrong": [{"entry": j.entry.id, "right": sorted(j.entry.right), "hints": j.verdict.hints,
                   "wrong": [list(w) for w in j.wrong]} for j in judged if j.wrong],
        "missed": [j.entry.id for j in judged if not j.flagged],
        "unhinted": [{"entry": j.entry.id, "right": sorted(j.entry.right),
                      "crashed": j.verdict.crashed,
                      "first": j.verdict.findings[0][1] if j.verdict.findings else ""}
                     for j in judged if j.flagged and not j.hinted and j.entry.right],
        "twin_failures": [{"twin": k, "entry": e.id, "crashed": v.crashed,
                           "findings": [list(f) for f in v.findings]}
                          for k, (e, v) in twin_results.items() if not v.passed],
    }

"""The catalogue under `--explore`: what the input search adds to gradlab's defaults.

For every entry of tests/bug_catalogue this runs `gradlab.check(fn, inputs, reference=...,
checks=["explore"], explore=BUDGET)` (the search alone; the defaults' verdicts are
results.json's, from run_catalogue.py) on the broken Function and on its twin, and writes
EXPLORE.md: per entry whether the search finds the bug, the input it shrank the failure to
against the smallest failing input the entry names (`smallest_inputs`), whether that is within
2x in every dim, and the totals: caught at the defaults, caught with --explore (either), and
false alarms on the twins.

    python benchmarks/catalogue/run_explore.py [--budget 3] [--only ID ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from bug_catalogue import ENTRIES, Entry  # noqa: E402

import gradlab  # noqa: E402
from gradlab.render.words import message  # noqa: E402


def explored(entry: Entry, which: str, budget: float) -> dict[str, Any]:
    """The explore row of one Function: red or not, the shrunk case, its words."""
    fn = entry.buggy if which == "buggy" else entry.twin
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = gradlab.check(fn, entry.inputs(), reference=entry.reference, name=entry.id,
                                   checks=["explore"], explore=budget, **entry.check_kwargs)
        except Exception as exc:  # recorded, never hidden
            return {"red": True, "case": None, "words": f"raised {type(exc).__name__}: {exc}"}
    rows = [r for r in report.rows if r.check == "explore"]
    red = [r for r in rows if r.status in ("fail", "error")]
    case = red[0].findings[0].want if red and red[0].findings else None
    return {"red": bool(red), "case": case, "status": rows[0].status if rows else "-",
            "words": message(rows[0])[:300] if rows else ""}


def within_twice(entry: Entry, case: dict[str, Any] | None) -> str:
    """Whether the shrunk case is within 2x of the entry's smallest failing input in every
    dim of every argument it changed ("yes", "no: ...", or "-" when not comparable)."""
    if case is None or entry.smallest_inputs is None:
        return "-"
    smallest = entry.smallest_inputs()
    base = entry.inputs()
    worse = []
    for i, a in enumerate(base):
        if not isinstance(a, torch.Tensor) or i >= len(smallest):
            continue
        got = case["set"].get(i, {}).get("shape", list(a.shape))
        want = list(smallest[i].shape) if isinstance(smallest[i], torch.Tensor) else None
        if want is None or len(got) != len(want):
            return "-"
        if any(g > 2 * w for g, w in zip(got, want, strict=True)):
            worse.append(f"arg {i} {got} vs {want}")
    return "yes" if not worse else "no: " + "; ".join(worse)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    defaults = json.loads((HERE / "results.json").read_text())
    entries = [e for e in ENTRIES if not args.only or e.id in args.only]
    t0 = time.perf_counter()
    rows = []
    for e in entries:
        torch.manual_seed(0)
        b, t = explored(e, "buggy", args.budget), explored(e, "twin", args.budget)
        at_defaults = bool(defaults.get(e.id, {}).get("gradlab_buggy", {}).get("red"))
        rows.append((e, at_defaults, b, t, within_twice(e, b["case"]) if b["red"] else "-"))
        print(f"{e.id}: defaults {'caught' if at_defaults else 'missed'}, explore "
              f"{'caught' if b['red'] else 'missed'}, twin {'RED' if t['red'] else 'pass'}",
              flush=True)
    write(rows, args.budget, time.perf_counter() - t0)


def write(rows: list[tuple[Entry, bool, dict, dict, str]], budget: float, seconds: float) -> None:
    n = len(rows)
    defaults = sum(r[1] for r in rows)
    either = sum(r[1] or r[2]["red"] for r in rows)
    found = [r for r in rows if r[2]["red"]]
    alarms = [r for r in rows if r[3]["red"]]
    flagged = sum(r[1] or r[2]["red"] or r[2].get("status") == "warn" for r in rows)
    twin_warns = sum(r[3].get("status") == "warn" for r in rows)
    twice = sum(r[4] == "yes" for r in found)
    comparable = sum(r[4] != "-" for r in found)
    lines = [
        "# The catalogue under --explore",
        "",
        f"Command: `python benchmarks/catalogue/run_explore.py --budget {budget:g}` "
        f"({n} entries, {seconds:.0f} s; torch {torch.__version__}).",
        "",
        "| | count |", "| --- | ---: |",
        f"| caught at the defaults (results.json) | {defaults}/{n} ({100 * defaults / n:.0f}%) |",
        f"| caught with --explore (the defaults or the search) | {either}/{n} "
        f"({100 * either / n:.0f}%) |",
        f"| flagged with --explore: a fail or error at the defaults, or the search's row a "
        f"fail, error or warn | {flagged}/{n} ({100 * flagged / n:.0f}%) |",
        f"| found by the search itself | {len(found)}/{n} |",
        f"| false alarms of the search on the twins | {len(alarms)} |",
        f"| warns of the search on the twins | {twin_warns} |",
        f"| shrunk within 2x of the smallest failing input in every dim | {twice} of "
        f"{comparable} comparable |",
        "",
        "| entry | defaults | explore | shrunk to | within 2x | twin |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for e, d, b, t, tw in rows:
        case = json.dumps(b["case"]["set"]) if b["case"] else "-"
        lines.append(f"| `{e.id}` | {'caught' if d else 'missed'} | "
                     f"{'caught' if b['red'] else 'missed'} | {case} | {tw} | "
                     f"{'RED: ' + t['words'][:120] if t['red'] else 'pass'} |")
    (HERE / "EXPLORE.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

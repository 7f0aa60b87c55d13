"""Run the catalogue of real gradient bugs: gradlab and gradcheck + gradgradcheck on each.

For every entry of tests/bug_catalogue (a real bug report reproduced as a broken Function
beside its correct twin), this runs `gradlab.check(fn, inputs, reference=...)` at the
defaults and torch.autograd.gradcheck + gradgradcheck at theirs, on the broken Function and
on the twin, and writes:

  results.json    the measured verdicts per entry (merged: a subset run updates its entries)
  catalogue.csv   the catalogue: project, issue/PR, URL, mechanism, trigger, smallest
                  failing input, the example inputs, and the four verdicts
  RESULTS.md      the table per entry, totals by mechanism, the entries gradlab misses

    python benchmarks/catalogue/run_catalogue.py                 # every entry (~2 min)
    python benchmarks/catalogue/run_catalogue.py --module empty  # one module's entries
    python benchmarks/catalogue/run_catalogue.py --only pt1528-index-dup
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from bug_catalogue import ENTRIES, Entry  # noqa: E402
from bug_catalogue.base import shapes_of  # noqa: E402
from bug_catalogue.measure import measure  # noqa: E402

#: where the blanket reason (no variant produced the trigger) does not hold, what does
MISS_NOTES = {
    "summed_shape": " Here gradlab did run double backward: the values are right (autograd sums "
                    "the returned shape down to grad_output's), so only the raw return shows it.",
    "vmap": " Here gradlab's vmap capability row ran and passed; the gradient of a loss taken "
            "through vmap of the op, where the graph is lost, is what the demo compares.",
    "autocast_dtype": " Here gradlab did run under autocast and saw the crash: a warn row "
                      "(autocast_missing), which its policy does not count as a failure.",
}
KEYS = ("gradlab_buggy", "gradlab_twin", "gradcheck_buggy", "gradcheck_twin")


def record(entry: Entry) -> dict[str, Any]:
    """The measured verdicts of one entry as JSON-ready data."""
    m = measure(entry)
    return {k: {"red": m[k].red, "detail": m[k].detail, "hints": m[k].hints,
                "warns": m[k].warns, "variants": m[k].variants} for k in KEYS}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


def verdict(r: dict[str, Any], key: str) -> str:
    red = r[key]["red"]
    if key.endswith("twin"):
        return "FALSE ALARM" if red else "pass"
    return "caught" if red else "missed"


def totals(rows: list[tuple[Entry, dict[str, Any]]]) -> dict[str, int]:
    return {k: sum(r[k]["red"] for _, r in rows) for k in KEYS}


def summary(rows: list[tuple[Entry, dict[str, Any]]]) -> list[str]:
    n = len(rows)
    t = totals(rows)
    projects = {e.project for e, _ in rows}
    return [
        f"**{n} real bug reports from {len(projects)} projects**, each reproduced as a broken "
        "Function beside its correct twin.", "",
        "| tool | bugs caught | false alarms on the twins |",
        "| --- | ---: | ---: |",
        f"| gradlab, defaults | {pct(t['gradlab_buggy'], n)} | {t['gradlab_twin']} |",
        f"| gradlab, defaults, a fail or a warn | {pct(flagged(rows, 'gradlab_buggy'), n)} | "
        f"{flagged(rows, 'gradlab_twin')} |",
        f"| gradcheck + gradgradcheck, defaults | {pct(t['gradcheck_buggy'], n)} | "
        f"{t['gradcheck_twin']} |", "",
        "A warn is gradlab's word for a likely bug that is not certain (a wrong value only "
        "beyond the range of the case's own values, a backward that raises only at a shape "
        "the case lacks, a capability missing under autocast); the first row counts fail and "
        "error rows only.", ""]


def flagged(rows: list[tuple[Entry, dict[str, Any]]], key: str) -> int:
    """Entries with a fail, error or warn row (forward_ad's information-like warn aside: a
    classic Function without a jvp, which every twin has too)."""
    return sum(bool(r[key]["red"] or [w for w in r[key]["warns"]
                                      if not w.startswith("base/forward_ad")])
               for _, r in rows)


def method(rows: list[tuple[Entry, dict[str, Any]]]) -> list[str]:
    alarms = [e.id for e, r in rows if r["gradcheck_twin"]["red"]]
    notes = [f"- `{e.id}`: {e.note}." for e, _ in rows if e.note]
    return [
        "## How it was built and measured", "",
        "- Reports were collected from public GitHub trackers (issues, pull requests) by "
        "searching for wrong gradients, custom Function backward, double backward, layouts, "
        "empty tensors, repeated indices, in-place writes, half precision and the like, by a "
        "helper who used gradlab only through its documented API. Each entry links its report.",
        "- Each is reproduced in tests/bug_catalogue/ as a minimal broken Function written "
        "from the report's description (no code copied) beside its correct twin and a "
        "plain-autograd reference. Mechanisms are counted as classes, not packages.",
        "- Example inputs are what the Function's author would plausibly pass to a check: "
        "small float64 tensors, contiguous, floating inputs requiring grad (targets and labels "
        "not), distinct index values, non-empty shapes. The report's trigger is not built in.",
        "- `smallest` is the smallest failing input the report implies; tests/test_catalogue.py "
        "shows every bug on it without gradlab (demo.py: the broken Function disagrees with the "
        "reference under the report's condition, the twin agrees) for all entries.",
        "- gradlab: `gradlab.check(fn, inputs, reference=ref)` at its defaults; caught = a "
        "fail or error row. gradcheck + gradgradcheck: both at their defaults on the same "
        "Function and inputs; caught = either raises (a crash inside the Function counts).",
        f"- gradcheck's false alarms on twins ({', '.join(f'`{a}`' for a in alarms) or 'none'}):"
        " a twin that declares its in-place write with ctx.mark_dirty raises when gradcheck "
        "passes it leaf inputs (`a leaf Variable that requires grad has been used in an "
        "in-place operation`); gradlab feeds such a Function non-leaf inputs.", "",
        "Where a reproduction models the report's mechanism loosely:", "", *notes, ""]


def by_mechanism(rows: list[tuple[Entry, dict[str, Any]]]) -> list[str]:
    out = ["## By mechanism", "",
           "| mechanism | entries | gradlab caught | gradcheck + gradgradcheck caught |",
           "| --- | ---: | ---: | ---: |"]
    mechs = Counter(e.mechanism for e, _ in rows)
    for mech, n in sorted(mechs.items(), key=lambda kv: (-kv[1], kv[0])):
        sub = [(e, r) for e, r in rows if e.mechanism == mech]
        t = totals(sub)
        out.append(f"| `{mech}` | {n} | {pct(t['gradlab_buggy'], n)} | "
                   f"{pct(t['gradcheck_buggy'], n)} |")
    return [*out, ""]


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def per_entry(rows: list[tuple[Entry, dict[str, Any]]]) -> list[str]:
    out = ["## Every entry", "",
           "gradlab's column names the hints of its failing rows; `twin` columns say whether "
           "the correct twin passed.", "",
           "| entry | report | mechanism | trigger | smallest failing input | gradlab | "
           "gradlab twin | gradcheck + gradgradcheck | gradcheck twin |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e, r in rows:
        hints = ", ".join(r["gradlab_buggy"]["hints"])
        gl = verdict(r, "gradlab_buggy") + (f" ({hints})" if hints else "")
        out.append(f"| `{e.id}` | [{e.project} {e.ref}]({e.url}) | `{e.mechanism}` | "
                   f"{cell(e.trigger)} | {cell(e.smallest)} | {gl} | "
                   f"{verdict(r, 'gradlab_twin')} | {verdict(r, 'gradcheck_buggy')} | "
                   f"{verdict(r, 'gradcheck_twin')} |")
    return [*out, ""]


def missed(rows: list[tuple[Entry, dict[str, Any]]]) -> list[str]:
    out = ["## What gradlab misses, and why", "",
           "Each entry gradlab passes at the defaults: the condition that triggers it, the "
           "smallest failing input, and what gradlab's report shows on the example inputs "
           "(its warn rows) with the variants it ran. The demo (tests/bug_catalogue/demo.py) "
           "shows each bug on its smallest input; none of the variants gradlab ran produces "
           "that input or call (an exact zero where the example values avoid 0, 65,520 tied "
           "float16 values, double backward's raw return), except where an entry says "
           "otherwise below.", ""]
    for e, r in rows:
        if r["gradlab_buggy"]["red"]:
            continue
        warns = r["gradlab_buggy"]["warns"]
        said = f"warn rows: {', '.join(warns)}" if warns else "every row passed"
        ran = r["gradlab_buggy"].get("variants", [])
        out.append(f"- `{e.id}` (`{e.mechanism}`): trigger: {e.trigger}; smallest failing "
                   f"input: {e.smallest}; gradlab on `{shapes_of(e.inputs())}` ran "
                   f"{len(ran)} variants ({', '.join(v for v in ran if v != 'base')}"
                   f"): {said}.{MISS_NOTES.get(e.mechanism, '')}")
    alarms = [(e, r) for e, r in rows if r["gradlab_twin"]["red"]]
    if alarms:
        out += ["", "False alarms on twins:", ""]
        out += [f"- `{e.id}`: {r['gradlab_twin']['detail']}" for e, r in alarms]
    return [*out, ""]


def write(results: dict[str, Any], command: str) -> None:
    rows = [(e, results[e.id]) for e in ENTRIES if e.id in results]
    lines = ["# Catalogue of real gradient bugs: results", "",
             f"Generated by `{command}` (torch {torch.__version__}); do not edit by hand.", "",
             *summary(rows), *by_mechanism(rows), *missed(rows), *method(rows),
             *per_entry(rows)]
    (HERE / "RESULTS.md").write_text("\n".join(lines))
    with (HERE / "catalogue.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "project", "ref", "url", "mechanism", "trigger", "smallest",
                    "smallest_args", "grad_output", "order", "inputs", *KEYS, "note"])
        for e, r in rows:
            small = shapes_of(e.smallest_inputs()) if e.smallest_inputs else "(own demo)"
            w.writerow([e.id, e.project, e.ref, e.url, e.mechanism, e.trigger, e.smallest,
                        small, e.grad_kind or "", e.order, shapes_of(e.inputs()),
                        *(verdict(r, k) for k in KEYS), e.note])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="entry ids")
    ap.add_argument("--module", default=None, help="only this module's entries")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    picked = [e for e in ENTRIES if (not args.only or e.id in args.only)
              and (args.module is None or e.buggy.__module__.endswith("." + args.module))]
    path = HERE / "results.json"
    results = load(path)
    results = {k: v for k, v in results.items() if any(e.id == k for e in ENTRIES)}
    start = time.perf_counter()
    for e in picked:
        results[e.id] = record(e)
        print(f"{e.id}: gradlab {verdict(results[e.id], 'gradlab_buggy')}, gradcheck "
              f"{verdict(results[e.id], 'gradcheck_buggy')}")
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    write(results, "python benchmarks/catalogue/run_catalogue.py")
    print(f"{len(picked)} entries in {time.perf_counter() - start:.0f} s; "
          f"{len(results)} of {len(ENTRIES)} recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Hint precision on held-out broken Functions (tests/data/holdout), not tuned against.

The corpus (benchmarks/hint_corpus.py) is what the hints were calibrated on; these Functions
use other ops and were written apart from it, so their precision says how the hints
generalise.  Scored as the corpus is: an entry's hints are the likely causes the CLI prints,
right when every hint shown is in the entry's right set.  Prints the same table, then every
wrong hint with its message, every broken Function not flagged, every twin that failed.

    python3 benchmarks/hint_holdout.py [--json FILE] [-k SUBSTRING]
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
sys.path.insert(0, str(ROOT / "tests" / "data" / "holdout"))

import torch  # noqa: E402
from holdout_functions import HOLDOUT  # noqa: E402
from holdout_measure import judge_entry, measure, twin_verdicts  # noqa: E402


def show(m: dict[str, Any], seconds: float) -> None:
    print(f"hint holdout: {m['entries']} broken Functions, {m['twins']} correct twins "
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
        print(f"WRONG {w['entry']}: right {w['right'] or '(none)'}, shown {w['hints']}")
        for hint, msg in w["wrong"]:
            print(f"    {hint}: {msg}")
    for x in m["missed"]:
        print(f"MISSED {x}")
    for x in m["unhinted"]:
        print(f"NO HINT {x['entry']}: right {x['right']}; {x['crashed'] or x['first']}")
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
    entries = [e for e in HOLDOUT if a.k in e.id]
    start = time.perf_counter()
    m = measure([judge_entry(e) for e in entries], twin_verdicts(entries))
    show(m, time.perf_counter() - start)
    if a.json:
        a.json.write_text(json.dumps(m, indent=1))


if __name__ == "__main__":
    main()

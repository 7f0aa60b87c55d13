"""Compare the verdicts of two `gradlab check` JSON reports, row by row.

    python scripts/compare_verdicts.py OLD.json NEW.json

Rows are matched by (op, case, dtype, device, variant, check); former check names (gradcheck,
gradgradcheck) count as their current ones.  Prints the rows whose status differs or that are
in one report only, and exits 1 if there are any: a refactor must leave this silent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ALIASES = {"gradcheck": "jacobian", "gradgradcheck": "second_order"}


def verdicts(path: str) -> dict[tuple[str, ...], str]:
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    out = {}
    for r in rows:
        key = (r["op"], r["case"], r["dtype"], r["device"], r["variant"],
               ALIASES.get(r["check"], r["check"]))
        out[key] = r["status"]
    return out


def main(old_path: str, new_path: str) -> int:
    old, new = verdicts(old_path), verdicts(new_path)
    diffs = [(k, old.get(k, "-"), new.get(k, "-")) for k in sorted(set(old) | set(new))
             if old.get(k) != new.get(k)]
    for key, a, b in diffs:
        print(f"{' / '.join(key)}: {a} -> {b}")
    print(f"{len(old)} rows before, {len(new)} after, {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

"""Render gradlab.checks.diagnosis.policy's table into README.md (short) and docs/verdicts.md
(full), between their <!-- policy:begin --> and <!-- policy:end --> markers.

    python scripts/policy_tables.py          # rewrite both files
    python scripts/policy_tables.py --check  # exit 1 when either is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

from gradlab.checks.diagnosis.policy import rendered

ROOT = Path(__file__).resolve().parent.parent
#: file -> whether it holds the short table.
FILES = {ROOT / "README.md": True, ROOT / "docs" / "verdicts.md": False}


def main(argv: list[str]) -> int:
    stale = []
    for path, short in FILES.items():
        text = path.read_text(encoding="utf-8")
        new = rendered(text, short=short)
        if new != text:
            stale.append(path.name)
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if stale:
        print(("out of date: " if "--check" in argv else "rendered: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

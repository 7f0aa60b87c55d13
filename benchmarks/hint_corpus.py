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

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not
sys.path.insert(0, str(ROOT / "tests" / "data" / "corpus"))

from corpus_functions import CORPUS  # noqa: E402
from corpus_measure import main  # noqa: E402

if __name__ == "__main__":
    main(CORPUS, "hint corpus", __doc__ or "")

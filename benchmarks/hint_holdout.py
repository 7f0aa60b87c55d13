"""Hint precision on held-out broken Functions (tests/data/holdout), not tuned against.

The corpus (benchmarks/hint_corpus.py) is what the hints were calibrated on; these Functions
use other ops and were written apart from it, so their precision says how the hints
generalise.  Scored as the corpus is: an entry's hints are the likely causes the CLI prints,
right when every hint shown is in the entry's right set.  Prints the same table, then every
wrong hint with its message, every broken Function not flagged, every twin that failed.

    python3 benchmarks/hint_holdout.py [--json FILE] [-k SUBSTRING]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not
sys.path.insert(0, str(ROOT / "tests" / "data" / "holdout"))
sys.path.insert(0, str(ROOT / "tests" / "data" / "corpus"))  # the scorer

from corpus_measure import main  # noqa: E402
from holdout_functions import HOLDOUT  # noqa: E402

if __name__ == "__main__":
    main(HOLDOUT, "hint holdout", __doc__ or "")

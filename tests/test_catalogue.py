"""The catalogue of real gradient bugs (tests/bug_catalogue, benchmarks/catalogue/).

- every correct twin passes gradlab at the defaults: no fail or error row;
- every entry that benchmarks/catalogue/results.json records as caught by gradlab at the
  defaults is still caught (a regression fails here); the misses are listed in RESULTS.md;
- every entry's bug shows without gradlab: on the smallest failing input the entry names,
  under the report's condition, the broken Function disagrees with the reference (or
  raises) and the twin agrees (bug_catalogue/demo.py);
- the catalogue's own contract: unique ids, a real tracker URL whose number is the entry's
  issue or PR, and a recorded result for every entry (run_catalogue.py after adding one).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bug_catalogue import BY_ID, ENTRIES
from bug_catalogue.demo import demonstrate
from bug_catalogue.measure import run_gradlab

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "catalogue" / "results.json"
MEASURED = json.loads(RESULTS.read_text())
CAUGHT = sorted(i for i, r in MEASURED.items() if r["gradlab_buggy"]["red"] and i in BY_ID)
URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/(\d+)$")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_bug_shows_on_its_smallest_input(entry) -> None:
    assert demonstrate(entry, "buggy") is not None, "the broken Function behaves"
    assert demonstrate(entry, "twin") is None


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_twin_passes(entry) -> None:
    outcome = run_gradlab(entry, "twin")
    assert not outcome.red, outcome.detail


@pytest.mark.parametrize("entry_id", CAUGHT)
def test_recorded_catch_still_caught(entry_id: str) -> None:
    outcome = run_gradlab(BY_ID[entry_id], "buggy")
    assert outcome.red, f"{entry_id} is no longer caught at the defaults"


def test_every_entry_has_a_recorded_result() -> None:
    missing = [e.id for e in ENTRIES if e.id not in MEASURED]
    assert not missing, f"run benchmarks/catalogue/run_catalogue.py --only {' '.join(missing)}"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_entry_names_its_report(entry) -> None:
    m = URL.match(entry.url)
    assert m, entry.url
    kind, number = entry.ref.split()
    assert number == m.group(2)
    assert (kind == "issue") == (m.group(1) == "issues")
    assert entry.url.split("/")[3] + "/" + entry.url.split("/")[4] == entry.project

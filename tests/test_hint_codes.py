"""The hint vocabulary against its decisions (gradlab.checks.diagnosis.hintcodes.CODES,
words.HINTS).

- every code a decision gives has a sentence, and every sentence a decision (no exceptions);
- each code is written in the module CODES says decides it (a code moved or renamed there
  without CODES following fails here);
- the tests and hint-corpus entries hints.py names as what pins a threshold exist.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from functools import cache

import pytest
import torch
from conftest import DATA, ROOT, TESTS

from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import hintcodes, hints
from gradlab.model import INFO_CAPABILITIES, Tolerance
from gradlab.render.words import HINTS
from gradlab.results import ErrorStats

CHECKS = ROOT / "gradlab" / "checks"
HINTS_SOURCE = (CHECKS / "diagnosis" / "hints.py").read_text(encoding="utf-8")
DECIDED = {code for codes in hintcodes.CODES.values() for code in codes}


def test_every_decided_code_has_a_sentence() -> None:
    unworded = DECIDED - set(HINTS)
    assert not unworded, f"codes decided but not worded in words.HINTS: {sorted(unworded)}"


def test_every_sentence_has_a_decision() -> None:
    undecided = set(HINTS) - DECIDED
    assert not undecided, f"words.HINTS entries no module decides (CODES): {sorted(undecided)}"


def test_each_code_is_listed_once() -> None:
    listed = [code for codes in hintcodes.CODES.values() for code in codes]
    assert len(listed) == len(set(listed)), sorted(c for c in listed if listed.count(c) > 1)


@pytest.mark.parametrize("module", sorted(hintcodes.CODES))
def test_each_code_is_written_where_codes_says(module: str) -> None:
    (path,) = CHECKS.rglob(f"{module}.py")  # in whichever sub-package of checks/ it lives
    source = path.read_text(encoding="utf-8")
    for code in hintcodes.CODES[module]:
        # capabilities builds a missing capability's code as f"{cap}_missing"
        built = (module == "capabilities" and code.endswith("_missing")
                 and code.removesuffix("_missing") in INFO_CAPABILITIES
                 and 'f"{cap}_missing"' in source)
        assert f'"{code}"' in source or built, f"{code!r} is not decided in checks/{module}.py"


def test_the_decision_functions_give_listed_codes() -> None:
    """The codes the tables and the pure decisions hold are all in CODES."""
    made = {*hints.LEVEL_HINTS, *hints.PATTERN_HINTS.values(), *hints.ONLY_HINT.values(),
            *hints.RNG_INDEPENDENT_HINTS, *hints.RNG_CONTRACT_HINTS, *hints.KEPT_HINTS,
            hints.value_level_hint("", ""), hints.second_order_hint("", True),
            hints.autocast_hint(True, lambda: ""), hints.plain_hint(["", ""]),
            hints.rng_hint(Drew(), ""), hints.crash_hint(RuntimeError("boom"))}
    assert made - {""} <= DECIDED, sorted(made - DECIDED - {""})


class Drew:
    drew = True
    drew_backward = True


@cache
def corpus_ids() -> tuple[str, ...]:
    sys.path.insert(0, str(DATA / "corpus"))
    from corpus_functions import CORPUS

    return tuple(e.id for e in CORPUS)


def test_the_tests_named_as_pins_exist() -> None:
    defined = {m for p in TESTS.glob("test_*.py")
               for m in re.findall(r"^def (test_\w+)\(", p.read_text(encoding="utf-8"), re.M)}
    defined |= {p.stem for p in TESTS.glob("test_*.py")}  # a module named before its test
    named = set(re.findall(r"\b(test_\w+)\b", HINTS_SOURCE))
    assert named, "hints.py names no test as a pin"
    assert not named - defined, sorted(named - defined)


def test_the_corpus_entries_named_as_pins_exist() -> None:
    # an entry id (or a glob of them) is quoted in a comment: "exp-x2", "*-f32"
    named = set(re.findall(r'"([a-z0-9_.*@]+-[a-z0-9_.*@-]+)"', HINTS_SOURCE))
    assert named, "hints.py names no corpus entry as a pin"
    ids = corpus_ids()
    missing = {n for n in named if not fnmatch.filter(ids, n)}
    assert not missing, sorted(missing)


# --- thresholds at their edges: synthetic facts on either side of each value ---------------


@dataclass
class Facts:
    """What a comparison measured (hints.Compared), made up at a threshold's edge."""

    stats: ErrorStats
    scale: float = 1.0
    float32_share: float = 0.0

    @property
    def ok(self) -> bool:
        return self.stats.frac_wrong == 0.0


def shaped(ratio: float, lo: float | None, hi: float | None, cosine: float = 1.0) -> str:
    """factor_hint of an error with this best-fit ratio, ratio range and cosine."""
    return hints.factor_hint(Facts(ErrorStats(1.0, 1.0, 1.0, cosine, ratio, ratio_lo=lo,
                                              ratio_hi=hi)))


def test_ratio_spread_edges() -> None:
    """float32 rounding of a factor 2 (2e-7 of spread) is a factor; bfloat16's, or sin(x) * x
    with its cos term doubled at large magnitudes (1.99..2.01), is not."""
    assert shaped(2.0, 2 - 2e-7, 2 + 2e-7) == "constant_factor"
    assert shaped(2.0, 1.99, 2.01) == ""


def test_factor_clearance_edges() -> None:
    """A tight ratio must stand two spreads clear of 1."""
    assert shaped(1.0015, 1.0010, 1.0016) == "constant_factor"
    assert shaped(1.0012, 1.0005, 1.0012) == ""


def test_factor_cosine_and_zero_edges() -> None:
    assert shaped(2.0, 2.0, 2.0, cosine=0.99999) == "constant_factor"
    assert shaped(2.0, 2.0, 2.0, cosine=0.99) == ""  # not one direction
    assert shaped(1e-13, None, None, cosine=0.5) == "zero"
    assert shaped(1e-8, None, None, cosine=0.0) == "zero"  # orthogonal and tiny


def test_ratio_quantiles_drop_a_few_outliers() -> None:
    """Two elements of a hundred off (a kink, rounding) do not hide a factor 2 elsewhere."""
    want = torch.linspace(0.5, 2.0, 100, dtype=torch.float64)
    got = 2 * want
    got[[10, 60]] *= 1.05
    assert hints.factor_hint(dg.compare(got, want, Tolerance(1e-7, 1e-7))) == "constant_factor"

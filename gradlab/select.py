"""Which cases a run takes: `-k PATTERN` on "op/case" names, and `--shard I/N` to split a run's
cases across CI jobs so that the shards together run each case exactly once."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import replace

from gradlab.errors import GradlabError
from gradlab.model import Case, Target

_GLOB = set("*?[")


def case_key(target: Target, case: Case) -> str:
    """The name -k matches and shards are drawn by: 'op/case'."""
    return f"{target.op.name}/{case.name}"


def matches(key: str, pattern: str) -> bool:
    """A glob pattern (with * ? [) matches the whole 'op/case'; a plain one is a substring.
    Case-insensitive, like pytest's -k."""
    key, pattern = key.lower(), pattern.lower()
    if _GLOB & set(pattern):
        return fnmatch.fnmatchcase(key, pattern)
    return pattern in key


def keep_cases(targets: Sequence[Target],
               keep: Callable[[Target, Case], bool]) -> list[Target]:
    """The targets with only the cases `keep` says yes to (targets left without any dropped)."""
    picked = []
    for t in targets:
        cases = tuple(c for c in t.op.cases if keep(t, c))
        if cases:
            picked.append(replace(t, op=replace(t.op, cases=cases)))
    return picked


def select(targets: Sequence[Target], patterns: Sequence[str]) -> list[Target]:
    """The cases whose 'op/case' matches any of `patterns` (all cases when there are none)."""
    if not patterns:
        return list(targets)
    picked = keep_cases(targets, lambda t, c: any(matches(case_key(t, c), p) for p in patterns))
    if not picked:
        raise GradlabError(f"-k: no op/case matches {', '.join(map(repr, patterns))}")
    return picked


def parse_shard(text: str) -> tuple[int, int]:
    """'2/3' -> (2, 3); anything else is a GradlabError naming the option."""
    i, sep, n = text.partition("/")
    try:
        index, count = int(i), int(n)
    except ValueError:
        index = count = 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise GradlabError(f"--shard: expected I/N with 1 <= I <= N, got {text!r}")
    return index, count


def shard(targets: Sequence[Target], index: int, count: int) -> list[Target]:
    """Shard `index` of `count` (1-based): round-robin over the sorted 'op/case' keys.

    Sorting makes the split the same on every machine and in every job whatever order the
    spec files were listed in; round-robin keeps the shards within one case of each other.
    A shard may be empty (more shards than cases); that is not an error.
    """
    keys = sorted({case_key(t, c) for t in targets for c in t.op.cases})
    mine = {k for pos, k in enumerate(keys) if pos % count == index - 1}
    return keep_cases(targets, lambda t, c: case_key(t, c) in mine)

"""Which cases a run takes: `--op` and `--case` by name, `-k PATTERN` on "op/case" names,
`--shard I/N` to split a run's cases across CI jobs so that the shards together run each case
exactly once; and which rows it reports: `--variant` by family or by a variant's own name (the
repro command of a failing row names its op, case and variant, see gradlab.repro)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from gradlab.errors import GradlabError, unknown_name
from gradlab.model import VARIANT_FAMILIES, Case, Target

#: The variant of a case's own rows: its base run and its numerical checks (jacobian, ...).
BASE = "base"

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


def pick(targets: Sequence[Target], ops: Sequence[str], cases: Sequence[str]) -> list[Target]:
    """The ops named `ops` (all when none), then of them the cases named `cases` (all when
    none); a name no op (of those picked) has is a GradlabError naming the option."""
    picked = list(targets)
    if ops:
        known = [t.op.name for t in targets]
        for name in ops:
            if name not in known:
                raise GradlabError("--op: " + unknown_name("op", name, known, "loaded ops"))
        picked = [t for t in picked if t.op.name in ops]
    if cases:
        known = [c.name for t in picked for c in t.op.cases]
        for name in cases:
            if name not in known:
                raise GradlabError(f"--case: no case named {name!r} " + unknown_name(
                    "", name, known, "cases" + (" of the ops picked" if ops else "")))
        picked = keep_cases(picked, lambda t, c: c.name in cases)
    return picked


def variant_family(name: str) -> str:
    """The family of a variant as the report names it: 'noncontiguous[0]' -> 'noncontiguous',
    'grad_output:transposed' -> 'grad_output', 'requires_grad=[1]' -> 'requires_grad',
    'magnitude' -> 'magnitude', 'base' -> 'base'."""
    match = re.match(r"[A-Za-z0-9_]*", name)
    return match.group(0) if match else name


#: What follows a family in a variant's own name: 'noncontiguous[0]', 'grad_output:transposed',
#: 'requires_grad=[1]' (gradlab.checks.families.variants names them so).
_NAME_TAIL = re.compile(r"(\[.*\]|:\w+|=\[.*\])")


def check_variant_names(names: Sequence[str]) -> None:
    """GradlabError naming --variant for a value that is neither `base`, a family nor a
    variant of one by the report's name ('noncontiguous[0]')."""
    for name in names:
        family = variant_family(name)
        tail = name[len(family):]
        if (family == BASE and tail) or family not in (BASE, *VARIANT_FAMILIES) or (
                tail and not _NAME_TAIL.fullmatch(tail)):
            raise GradlabError("--variant: " + unknown_name(
                "variant family", name, (BASE, *VARIANT_FAMILIES)))


def variants_missing(names: Collection[str], ran: Collection[str]) -> list[str]:
    """The variants named by their own name (not a family, not base) of which no row ran."""
    return [n for n in names
            if n != variant_family(n) and n not in ran]


def variant_picked(variant: str, chosen: Collection[str]) -> bool:
    """Whether a row of `variant` is one --variant asked for: named itself or by its family."""
    return variant in chosen or variant_family(variant) in chosen

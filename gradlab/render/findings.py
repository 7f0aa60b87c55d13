"""Findings in words: one bug, one block, the same in the terminal, JUnit, the Markdown summary,
`gradlab.testing` and the pytest plugin.

A formula bug fails every variant in every dtype (and the numerical checks too) with the same
diagnosis; shown row by row it buries everything after it.  gradlab.results.summary groups the
rows of one op and case with the same likely cause on the same subject into one finding; here
it says where it occurs (checks, dtypes, devices, every variant by name) and shows the
localisation once, from its most telling row.
"""

from __future__ import annotations

from collections.abc import Sequence

from gradlab.render.words import HINTS, REASONS, message
from gradlab.results import CheckRow
from gradlab.results.summary import FindingGroup, subject, summarize

__all__ = ["FailureGroup", "failing_cases", "finding_parts", "finding_text", "group_failures",
           "subject", "where"]

#: A finding (the name the terminal renderer knew it by).
FailureGroup = FindingGroup
#: Variant names listed in a finding's 'where' (a case has about 15; the rest are counted).
VARIANTS_SHOWN = 40


def group_failures(rows: Sequence[CheckRow]) -> list[FindingGroup[CheckRow]]:
    """The failing rows as findings, in the order their first row appeared."""
    return summarize(rows).findings


def failing_cases(rows: Sequence[CheckRow]) -> list[str]:
    """Every failing 'op/case', in order (the summary names them all)."""
    return list(dict.fromkeys(f"{f.op}/{f.case}" for f in group_failures(rows)))


def where(f: FindingGroup[CheckRow], all_variants: int) -> str:
    """'gradient, jacobian · float64, float32 · cpu · 12 of 14 variants: base, ...': every
    variant that shows it, by name."""
    variants = f.variants
    shown = ", ".join(variants[:VARIANTS_SHOWN])
    if len(variants) > VARIANTS_SHOWN:
        shown += f" (+{len(variants) - VARIANTS_SHOWN})"
    count = (f"{len(variants)} of {all_variants} variants" if all_variants > 1
             else "variant")
    return " · ".join([", ".join(f.checks), ", ".join(f.dtypes), ", ".join(f.devices),
                       f"{count}: {shown}"])


def finding_parts(f: FindingGroup[CheckRow], number: int, total: int,
                  all_variants: int) -> list[tuple[str, str]]:
    """A finding as (kind, line) pairs, kind one of head, cause, where, message, worst, repro,
    command: the terminal styles each kind, plain text joins the lines."""
    head = f"{f.status.upper()} {f.op} / {f.case}" + (f" / {f.subject}" if f.subject else "")
    parts = [("head", f"{head} (finding {number} of {total})")]
    if f.hint:
        parts.append(("cause", f"  likely cause: {f.hint}: {HINTS.get(f.hint, f.hint)}"))
    elif f.reason:
        parts.append(("cause", f"  not checked (a skip nobody declared): {f.reason}: "
                               f"{REASONS.get(f.reason, f.reason)}"))
    parts.append(("where", f"  where: {where(f, all_variants)}"))
    ex = f.example
    parts.append(("message", f"  {ex.check} / {ex.variant} / {ex.dtype}: {message(ex)}"))
    worst = "; ".join(str(e) for e in ex.worst)
    if worst:
        parts.append(("worst", f"  worst elements: {worst}"))
    elif ex.crash_location:
        parts.append(("worst", f"  raised at: {ex.crash_location}"))
    rep = f.repro
    if rep is not None:
        parts.append(("repro", f"  repro inputs: {rep.repro}"))
        if rep.repro_command:
            parts.append(("command", f"  {rep.repro_command}"))
    return parts


def finding_text(f: FindingGroup[CheckRow], number: int, total: int, all_variants: int) -> str:
    """A finding as plain lines."""
    return "\n".join(line for _, line in finding_parts(f, number, total, all_variants))

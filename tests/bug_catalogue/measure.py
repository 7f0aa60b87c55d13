"""Run gradlab and torch's gradcheck + gradgradcheck on an entry's broken Function and twin.

gradlab: `gradlab.check(fn, inputs, reference=...)` at its defaults, as a user calls it.
A tool *catches* a bug when its verdict is red: gradlab's report has a fail or error row;
gradcheck or gradgradcheck (their defaults, raise_exception=True) raise, whatever the error
(a crash inside the Function surfaced by the tool counts, as the user sees it there first).
A red verdict on a twin is a false alarm.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

import gradlab
from gradlab.render.words import message

from .base import Entry


@dataclass
class Outcome:
    """One tool's verdict on one Function."""

    red: bool
    detail: str = ""               # the first failing rows (gradlab) or the error (gradcheck)
    hints: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)   # what gradlab ran (its rows' variants)


def run_gradlab(entry: Entry, which: str) -> Outcome:
    """gradlab.check at the defaults on the buggy Function or its twin."""
    fn = entry.buggy if which == "buggy" else entry.twin
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = gradlab.check(fn, entry.inputs(), reference=entry.reference,
                               name=entry.id, **entry.check_kwargs)
    bad = [r for r in report.rows if r.status in ("fail", "error")]
    warns = [f"{r.variant}/{r.check}: {r.hint or '-'}" for r in report.rows
             if r.status == "warn"]
    detail = "; ".join(f"{r.check}/{r.variant} {r.status} [{r.hint or '-'}]: "
                       f"{message(r)[:160]}" for r in bad[:3])
    ran = sorted({r.variant for r in report.rows})
    return Outcome(bool(bad), detail, sorted({r.hint for r in bad if r.hint}), warns, ran)


def run_gradcheck(entry: Entry, which: str) -> Outcome:
    """torch.autograd.gradcheck, then gradgradcheck, at their defaults."""
    fn = entry.fn(which)
    tool = torch.autograd.gradcheck
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tool(fn, tuple(entry.inputs()))
            tool = torch.autograd.gradgradcheck
            tool(fn, tuple(entry.inputs()))
    except Exception as exc:  # any error is the tool's red verdict
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Outcome(True, f"{tool.__name__}: {type(exc).__name__}: {first[:160]}")
    return Outcome(False)


def measure(entry: Entry) -> dict[str, Any]:
    """All four verdicts for one entry, as plain data."""
    torch.manual_seed(0)
    out: dict[str, Any] = {"id": entry.id}
    for tool, run in (("gradlab", run_gradlab), ("gradcheck", run_gradcheck)):
        for which in ("buggy", "twin"):
            try:
                o = run(entry, which)
            except Exception as exc:  # gradlab itself raising: recorded, never hidden
                o = Outcome(True, f"raised {type(exc).__name__}: {str(exc)[:160]}")
            out[f"{tool}_{which}"] = o
    return out

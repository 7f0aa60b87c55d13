"""What gradlab tells the user about a corpus entry, and whether it names the true cause.

"The hints of an entry" are the likely causes a user reads: one per finding block the CLI
prints (gradlab.render.findings.group_failures over the report's rows, in order).  An entry
is *hinted* when at least one finding has a hint, and *right* when every hint it shows is in
the entry's right set: one wrong likely cause among right ones still sends the user hunting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from corpus_ops import Entry

import gradlab
from gradlab.render.findings import group_failures
from gradlab.render.words import message


@dataclass(frozen=True)
class Verdict:
    """gradlab's answer on one Function: passed, and each finding's hint with its message."""

    passed: bool
    #: (hint, "check / variant: message" of the finding's example row), one per finding, in
    #: the order the CLI shows them
    findings: tuple[tuple[str, str], ...] = ()
    #: gradlab.check itself raised (a gradlab bug): the exception in one line
    crashed: str = ""
    #: (hint, (kind, dims, start, stop)) of every pattern the findings' example rows locate
    patterns: tuple[tuple[str, tuple[str, tuple[int, ...], int, int]], ...] = ()
    #: the hints of its warn rows (a float64 result only float32-accurate is one warning per
    #: case, not a failure: issue 28)
    warned: tuple[str, ...] = ()
    #: (hint, "check / variant: message") of each warn row, as `findings` has the failures'
    warnings: tuple[tuple[str, str], ...] = ()

    @property
    def hints(self) -> list[str]:
        return list(dict.fromkeys(h for h, _ in self.findings if h))


@dataclass(frozen=True)
class Judged:
    """An entry's broken Function judged against its right set."""

    entry: Entry
    verdict: Verdict
    wrong: tuple[tuple[str, str], ...] = field(default=())

    @property
    def flagged(self) -> bool:
        """Failed, or warned with a right cause (a precision observation is a warning)."""
        return not self.verdict.passed or bool(set(self.verdict.warned) & self.entry.right)

    @property
    def hinted(self) -> bool:
        return bool(self.verdict.hints)

    @property
    def right(self) -> bool:
        return self.hinted and not self.wrong


def verdict(fn: object, entry: Entry) -> Verdict:
    """Run gradlab.check on fn with the entry's inputs, reference and options."""
    try:
        report = gradlab.check(fn, entry.args(), reference=entry.reference,  # type: ignore[arg-type]
                               **entry.options)
    except Exception as e:  # a gradlab bug: recorded, not raised, so the corpus goes on
        return Verdict(False, crashed=f"{type(e).__name__}: {e}".splitlines()[0])
    groups = group_failures(report.rows)
    patterns = tuple((g.hint, (f.pattern.kind, f.pattern.dims, f.pattern.start, f.pattern.stop))
                     for g in groups for f in g.example.findings if f.pattern is not None)
    return Verdict(report.passed, tuple(
        (g.hint, f"{g.example.check} / {g.example.variant}: {message(g.example)}")
        for g in groups), patterns=patterns,
        warned=tuple(dict.fromkeys(r.hint for r in report.rows if r.status == "warn" and r.hint)),
        warnings=tuple((r.hint, f"{r.check} / {r.variant}: {message(r)}")
                       for r in report.rows if r.status == "warn" and r.hint))


def judge(entry: Entry) -> Judged:
    """The broken Function's verdict, and its hints that are not in the right set."""
    v = verdict(entry.broken, entry)
    wrong = tuple((h, m) for h, m in v.findings if h and h not in entry.right)
    return Judged(entry, v, tuple(dict.fromkeys(wrong)))


def twins(entries: list[Entry]) -> dict[str, Entry]:
    """One entry per distinct twin (same twin Function, same inputs)."""
    out: dict[str, Entry] = {}
    for e in entries:
        out.setdefault(twin_key(e), e)
    return out


def twin_key(e: Entry) -> str:
    return e.twin_id or f"{e.twin.__module__}.{e.twin.__name__}"

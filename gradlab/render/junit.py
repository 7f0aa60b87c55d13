"""JUnit XML of check and bench runs, for CI test-report views.

Check: one testsuite per op, one testcase per op, case and check with every dtype, device and
variant folded in: it fails when any of its rows fails, and the failure's text is the findings
it shows (likely cause, where, message: gradlab.render.findings), not a Jacobian.  Bench: one
testcase per op, case and phase.  Errors are <error>, a testcase whose rows were all skipped
is <skipped>.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

from gradlab.render.bench import speedup_words
from gradlab.render.diagnosis import CheckGroup, check_text, hint_words, skip_reason
from gradlab.render.words import message
from gradlab.results import ERROR, FAIL, PASS, SKIP, WARN, CheckRow, Report
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.summary import RunSummary, summarize

#: Characters XML 1.0 does not allow at all (escaping cannot save them): they are dropped.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: Longest message attribute: CI views show it on one line; the element text has the rest.
MESSAGE_CHARS = 500


def xml_text(text: object) -> str:
    """`text` as a string XML can hold (ElementTree escapes &, <, > and quotes itself)."""
    return _INVALID_XML.sub("", str(text))


def _element(parent: ET.Element, tag: str, text: str = "", **attrs: object) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items()})
    if text:
        el.text = xml_text(text)
    return el


def _suite(root: ET.Element, name: str, cases: Sequence[tuple[str, float]],
           statuses: Sequence[str]) -> ET.Element:
    """A testsuite element with its counts (testcases are added by the caller)."""
    return _element(root, "testsuite", name=name, tests=len(cases),
                    failures=sum(s == FAIL for s in statuses),
                    errors=sum(s == ERROR for s in statuses),
                    skipped=sum(s == SKIP for s in statuses),
                    time=f"{sum(t for _, t in cases):.3f}")


def _check_case(suite: ET.Element, g: CheckGroup[CheckRow],
                summary: RunSummary[CheckRow]) -> None:
    case = _element(suite, "testcase", classname=f"gradlab.{g.op}", name=f"{g.case}/{g.check}",
                    time=f"{g.seconds:.3f}")
    status = g.status
    if status in (FAIL, ERROR):
        first = g.failures[0]
        head = f"{first.hint}: {hint_words(first)}" if first.hint else message(first)
        said = f"{len(g.failures)} of {len(g.rows)} rows failed; {head}"
        _element(case, "failure" if status == FAIL else "error", check_text(summary, g),
                 message=said[:MESSAGE_CHARS], type=first.hint or g.check)
    elif status == SKIP:
        _element(case, "skipped", message=skip_reason(g.rows)[:MESSAGE_CHARS])
    warned = [f"WARN {r.dtype} / {r.device} / {r.variant}: {message(r)}"
              for r in g.rows if r.status == WARN]
    if warned:
        _element(case, "system-out", "\n".join(warned))


def check_junit(report: Report, name: str = "gradlab check") -> ET.ElementTree:
    """The check report as a JUnit XML tree: a testcase per check (gradlab.results.summary's
    unit), its failure text the findings it shows, numbered as every output numbers them; the
    root's tests, failures, errors and skipped are the run's checks by status."""
    summary = summarize(report.rows)
    statuses = summary.statuses
    root = ET.Element("testsuites", {"name": name, "tests": str(len(summary.checks)),
                                     "failures": str(statuses[FAIL]),
                                     "errors": str(statuses[ERROR]),
                                     "skipped": str(statuses[SKIP])})
    by_op: dict[str, list[CheckGroup[CheckRow]]] = {}
    for g in summary.checks:
        by_op.setdefault(g.op, []).append(g)
    for op, groups in by_op.items():
        suite = _suite(root, op, [(g.name, g.seconds) for g in groups], [g.status for g in groups])
        for g in groups:
            _check_case(suite, g, summary)
    if report.truncated or report.stopped:
        # the cases never run are in no suite: say so where CI shows it
        why = ("--budget ran out: the cases not started are missing (not passed)"
               if report.truncated else "--fail-fast stopped the run after the first failing "
                                        "case")
        suite = _suite(root, "gradlab", [("run", 0.0)], [ERROR if report.truncated else SKIP])
        case = _element(suite, "testcase", classname="gradlab", name="run", time="0")
        _element(case, "error" if report.truncated else "skipped", message=why)
    return ET.ElementTree(root)


def _bench_groups(rows: Iterable[BenchRow]) -> dict[tuple[str, str, str], list[BenchRow]]:
    groups: dict[tuple[str, str, str], list[BenchRow]] = {}
    for r in rows:
        groups.setdefault((r.op, r.case, r.phase), []).append(r)
    return groups


def _bench_status(rows: Sequence[BenchRow]) -> str:
    if any(r.status == ERROR for r in rows):
        return ERROR
    return SKIP if all(r.status == SKIP for r in rows) else PASS


def bench_junit(report: BenchReport, name: str = "gradlab bench") -> ET.ElementTree:
    """The bench report as JUnit XML: one testcase per op, case and phase (an error fails it)."""
    root = ET.Element("testsuites", {"name": name})
    by_op: dict[str, list[tuple[str, str, list[BenchRow]]]] = {}
    for (op, case, phase), rows in _bench_groups(report.rows).items():
        by_op.setdefault(op, []).append((case, phase, rows))
    for op, groups in by_op.items():
        times = [(f"{c}/{p}", sum(sum(r.samples_s) for r in rows)) for c, p, rows in groups]
        suite = _suite(root, op, times, [_bench_status(rows) for _, _, rows in groups])
        for (case, phase, rows), (_, seconds) in zip(groups, times, strict=True):
            tc = _element(suite, "testcase", classname=f"gradlab.bench.{op}",
                          name=f"{case}/{phase}", time=f"{seconds:.3f}")
            status = _bench_status(rows)
            lines = [f"{r.status.upper()} {r.dtype} / {r.device} / {r.impl}: {r.note}"
                     for r in rows if r.status != PASS]
            if status == ERROR:
                first = next(r for r in rows if r.status == ERROR)
                _element(tc, "error", "\n".join(lines), message=first.note[:MESSAGE_CHARS])
            elif status == SKIP:
                _element(tc, "skipped", message=rows[0].note[:MESSAGE_CHARS])
            speedups = [f"{r.dtype} / {r.device}: speedup {r.speedup:.3g}x {interval(r)} "
                        f"({speedup_words(r)})"
                        for r in rows if r.speedup is not None]
            if speedups:
                _element(tc, "system-out", "\n".join(speedups))
    return ET.ElementTree(root)


def interval(r: BenchRow) -> str:
    """A speedup's 95% interval, or the sample count when too few for one."""
    if r.speedup_low is None or r.speedup_high is None:
        return f"(n={r.n}: too few samples for an interval)"
    return f"[{r.speedup_low:.3g}, {r.speedup_high:.3g}]"


def write_junit(tree: ET.ElementTree, path: str | Path) -> Path:
    """Write a JUnit tree (UTF-8, with the XML declaration), making the folder if needed."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
    return p

"""The check report in the terminal: the summary table, one block per finding, the verdict.

Tables fit the console: when the columns do not, the least useful go first (seconds, then max
rel err, the variant count, the device when there is one), and no number is ever cut short.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradlab.errors import ExitCode
from gradlab.render.capabilities import capability_table
from gradlab.render.environment import tf32_line
from gradlab.render.explored import explored_summary
from gradlab.render.findings import FailureGroup, failing_cases, finding_parts
from gradlab.render.tables import Column, fit
from gradlab.render.words import message
from gradlab.results import ERROR, FAIL, PASS, SKIP, WARN, CheckRow, Report, exit_code
from gradlab.results.capabilities import capability_matrix
from gradlab.results.status import SEVERITY
from gradlab.results.summary import no_reference_words, summarize
from gradlab.select import variant_family

_STYLE = {PASS: "green", FAIL: "bold red", ERROR: "bold magenta", SKIP: "yellow",
          WARN: "yellow"}

#: Dropped in this order when the table does not fit (a column of one value is named in the
#: title instead).
DROP_ORDER = ("seconds", "max rel err", "device", "dtype", "variants")
#: Finding blocks shown in the terminal; the summary still names every failing case.
FINDINGS_SHOWN = 30


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2e}"


#: The variant families whose values are rescaled from the case's (gradlab.checks.families:
#: magnitude 1e3x and more, small toward 0): their absolute errors are at another scale (a
#: float32 exp's 5e16 at values near 3e38, relative 2e-22), so a line's `max abs err` is
#: taken over the other rows; `max rel err` over all.
RESCALED = frozenset({"magnitude", "small"})


def group_rows(rows: Sequence[CheckRow]) -> list[dict[str, Any]]:
    """One line per (op, case, dtype, device, check): the worst status of its variants that
    ran (a declared skip, such as a variant the reference refuses, is counted apart and does
    not decide the line: a line is `skip` only when nothing ran or a skip nobody declared is
    there), the reason of the row that decided it, and the largest errors measured by the rows
    that were compared (an errored line has none; the absolute one at the case's own scale,
    RESCALED left out)."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in rows:
        key = (r.op, r.case, r.dtype, r.device, r.check)
        g = groups.setdefault(key, {"op": r.op, "case": r.case, "dtype": r.dtype,
                                    "device": r.device, "check": r.check, "status": None,
                                    "reason": "", "declared": False, "max_abs_err": None,
                                    "max_rel_err": None, "seconds": 0.0, "variants": 0,
                                    "failed_variants": 0, "skipped_variants": 0,
                                    "skip_reasons": {}, "first_skip": None})
        g["seconds"] += r.seconds
        if r.status == SKIP:
            g["skipped_variants"] += 1
            reason = r.reason or "unspecified"
            g["skip_reasons"][reason] = g["skip_reasons"].get(reason, 0) + 1
            g["first_skip"] = g["first_skip"] or r
            if r.declared:
                continue  # counted apart: it decides the line only when nothing ran
        else:
            g["variants"] += 1
            g["failed_variants"] += r.failed
        if g["status"] is None or SEVERITY[r.status] > SEVERITY[g["status"]]:
            g["status"], g["reason"], g["declared"] = r.status, r.reason, r.declared
        for col in ("max_abs_err", "max_rel_err"):
            v = getattr(r, col)
            if col == "max_abs_err" and variant_family(r.variant) in RESCALED:
                continue  # an absolute error at values 1e3x the case's says nothing of it
            if v is not None and not math.isnan(v) and r.status != ERROR:
                g[col] = v if g[col] is None else max(g[col], v)
    for g in groups.values():
        first = g.pop("first_skip")
        if g["status"] is None:  # nothing ran: the line is the (declared) skip
            g["status"], g["reason"], g["declared"] = SKIP, first.reason, first.declared
        if g["status"] == ERROR:
            g["max_abs_err"] = g["max_rel_err"] = None
    return list(groups.values())


def _variants(g: dict[str, Any]) -> str:
    """'14', '1/14 bad', '13 +1 skipped', '1/13 bad +1 skipped', '1 skipped' (nothing ran)."""
    n, skipped = g["variants"], g["skipped_variants"]
    if not n:
        return f"{skipped} skipped"
    ran = f"{g['failed_variants']}/{n} bad" if g["failed_variants"] else str(n)
    return f"{ran} +{skipped} skipped" if skipped else ran


def _key(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda g: str(g[key])


#: One line per op, case, dtype, device and check.
TABLE = (Column("op", _key("op")), Column("case", _key("case")), Column("dtype", _key("dtype")),
         Column("device", _key("device")), Column("check", _key("check")),
         Column("status", lambda g: Text(g["status"], style=_STYLE[g["status"]])),
         Column("variants", _variants, right=True),
         Column("max abs err", lambda g: _num(g["max_abs_err"]), right=True),
         Column("max rel err", lambda g: _num(g["max_rel_err"]), right=True),
         Column("seconds", lambda g: f"{g['seconds']:.3f}", right=True))


def check_table(report: Report, width: int | None = None) -> Table:
    """The summary table, one line per op, case, dtype, device and check, with as many
    columns as fit in `width` (all of them when None)."""
    return fit(TABLE, group_rows(report.rows), width, "gradlab check", DROP_ORDER,
               identity=("dtype", "device"))


def _passed(g: dict[str, Any]) -> bool:
    """A line that needs no attention: passed, or skipped as declared."""
    return bool(g["status"] == PASS or (g["status"] == SKIP and g["declared"]))


def case_lines(report: Report) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one line per op and case whose every line passed, every line of the other cases).

    A passing case's line: the dtypes and devices it covered, its checks, the variants counted
    (every variant name that has a row; declared skips apart, as on a check's line), the
    largest errors measured and its seconds."""
    cases: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in group_rows(report.rows):
        cases.setdefault((g["op"], g["case"]), []).append(g)
    variants = summarize(report.rows).case_variants
    passing: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for (op, case), lines in cases.items():
        if not all(_passed(g) for g in lines):
            others += lines
            continue
        abs_errs = [g["max_abs_err"] for g in lines if g["max_abs_err"] is not None]
        rel_errs = [g["max_rel_err"] for g in lines if g["max_rel_err"] is not None]
        passing.append({
            "op": op, "case": case, "status": PASS,
            "dtypes": ", ".join(dict.fromkeys(g["dtype"] for g in lines)),
            "device": ", ".join(dict.fromkeys(g["device"] for g in lines)),
            "checks": len({g["check"] for g in lines}),
            "variants": len(variants[f"{op}/{case}"]), "failed_variants": 0,
            "skipped_variants": sum(g["skipped_variants"] for g in lines),
            "max_abs_err": max(abs_errs, default=None), "max_rel_err": max(rel_errs, default=None),
            "seconds": sum(g["seconds"] for g in lines)})
    return passing, others


#: One line per passing op and case (the default table: `--table full` prints TABLE); no
#: status column: the title says they passed.
CASE_TABLE = (Column("op", _key("op")), Column("case", _key("case")),
              Column("dtypes", _key("dtypes")), Column("device", _key("device")),
              Column("checks", _key("checks"), right=True), *TABLE[6:])
#: CASE_TABLE's columns, dropped in this order when it does not fit: the dtypes, the
#: variants counted and the worst error stay longest.
CASE_DROP_ORDER = ("seconds", "device", "checks", "max rel err", "variants")


def check_tables(report: Report, width: int | None = None, full: bool = False) -> list[Table]:
    """The check tables: a line per passing case, then every line of the cases that did not
    pass (as check_table); `full`: check_table alone, a line per check of every case."""
    if full:
        return [check_table(report, width)]
    passing, others = case_lines(report)
    tables = []
    if passing:
        tables.append(fit(CASE_TABLE, passing, width, "gradlab check: cases that passed",
                          CASE_DROP_ORDER, identity=("device",)))
    if others:
        tables.append(fit(TABLE, others, width, "gradlab check: cases that did not pass",
                          DROP_ORDER, identity=("dtype", "device")))
    return tables


#: The terminal style of each kind of line of a finding (gradlab.render.findings.finding_parts).
_PART_STYLE = {"cause": "cyan", "where": "dim", "worst": "dim", "repro": "dim"}


def finding_lines(f: FailureGroup[CheckRow], number: int, total: int,
                  variants_of_case: int) -> list[Text]:
    """One finding: what and where, the localisation once, the repro file and command."""
    lines = []
    for kind, line in finding_parts(f, number, total, variants_of_case):
        if kind == "head":
            text = Text(f"{f.status.upper()} ", style=_STYLE[f.status])
            text.append(line[len(f.status) + 1:], style="bold")
            lines.append(text)
        else:
            lines.append(Text(line, style=_PART_STYLE.get(kind, "")))
    return lines


def failure_lines(report: Report) -> list[Text]:
    """A block per finding (at most FINDINGS_SHOWN), then every failing case by name."""
    summary = summarize(report.rows)
    findings = summary.findings
    lines: list[Text] = []
    for i, f in enumerate(findings[:FINDINGS_SHOWN], 1):
        lines += finding_lines(f, i, len(findings),
                               len(summary.case_variants[f"{f.op}/{f.case}"]))
    hidden = len(findings) - FINDINGS_SHOWN
    if hidden > 0:
        lines.append(Text(f"... and {hidden} more findings (every row is in the reports)"))
    cases = failing_cases(report.rows)
    if cases:
        lines.append(Text(f"failing cases ({len(cases)}): {', '.join(cases)}", style="bold"))
    return lines


def warning_lines(report: Report) -> list[Text]:
    """One short block per missing capability (op, check and hint): which cases, and the
    message of the first (its hint says the fix)."""
    groups: dict[tuple[str, str, str], list[CheckRow]] = {}
    for r in report.rows:
        if r.status == WARN:
            groups.setdefault((r.op, r.check, r.hint), []).append(r)
    lines: list[Text] = []
    for (op, check, _), rows in groups.items():
        cases = list(dict.fromkeys(r.case for r in rows))
        more = f" (+{len(cases) - 3})" if len(cases) > 3 else ""
        head = Text("WARN ", style=_STYLE[WARN])
        head.append(f"{op} / {', '.join(cases[:3])}{more} / {check}", style="bold")
        lines += [head, Text(f"  {message(rows[0])}")]
    return lines


def render_check(report: Report, console: Console, *, verdict: bool = True,
                 wide: bool = False, quiet: bool = False, empty_ok: bool = False,
                 full: bool = False) -> None:
    """Print the check tables (a line per passing case, every line of the others; `full`: a
    line per check of every case), the capability matrix and the warnings (not when quiet),
    the findings and (unless the caller prints it later, once the report is on disk) the
    one-line verdict.

    empty_ok: a run without cases (an empty shard) passes."""
    if not quiet:
        width = None if wide else console.width
        for table in check_tables(report, width, full):
            console.print(table)
        matrix = capability_matrix(report.rows)
        if matrix:
            console.print(capability_table(matrix, width))
        for line in warning_lines(report):
            console.print(line)
    for line in failure_lines(report):
        # a command stays one copyable line; words wrap at the console's width
        console.print(line, soft_wrap=line.plain.startswith("  gradlab "))
    tf32 = tf32_line(report.rows, report.env)
    if tf32:  # a CUDA run: the settings float32 convolutions and matmuls ran with
        console.print(Text(tf32))
    if verdict:
        render_verdict(report, console, empty_ok=empty_ok)


def reference_line(report: Report) -> str:
    """What the ops checked without a reference were compared with, in one line ("" when every
    op had one): a PASSED there verified less than it says."""
    return no_reference_words(report.rows)


def explored_lines(report: Report) -> list[str]:
    """What `--explore` searched, one line per passing op and case (a failing one says it in
    its finding)."""
    return [f"{r.op}/{r.case}: {explored_summary(r.findings[0].got)}" for r in report.rows
            if r.check == "explore" and r.status == PASS and r.findings
            and isinstance(r.findings[0].got, dict)]


def render_verdict(report: Report, console: Console, *, empty_ok: bool = False) -> None:
    """What --explore searched (if asked), the line about a missing reference (if any), then
    the one-line verdict, PASSED in green or FAILED in red."""
    passed = exit_code(report, empty_ok=empty_ok) == ExitCode.OK
    for line in explored_lines(report):
        console.print(Text(line, style="dim"), soft_wrap=True)
    said = reference_line(report)
    # off a terminal (a log) never wrapped: a wrapped verdict ('0 \nerrors') greps badly
    whole = not console.is_terminal
    if said:
        console.print(Text(said, style="yellow"), soft_wrap=whole)
    console.print(Text(verdict_line(report, passed), style="bold green" if passed
                       else "bold red"), soft_wrap=whole)


def verdict_line(report: Report, passed: bool | None = None) -> str:
    """'PASSED: ...' or 'FAILED: ...' and the run's numbers in the words every output uses
    (gradlab.results.summary.count_words: ops, cases, checks by status, findings, variants,
    rows by status)."""
    return report.verdict(passed)  # str(report) begins with the same line

"""The check report in the terminal: the summary table, the failures and the verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradlab.render.words import location, message
from gradlab.results import ERROR, FAIL, PASS, SKIP, WARN, CheckRow, Report

_STYLE = {PASS: "green", FAIL: "bold red", ERROR: "bold magenta", SKIP: "yellow",
          WARN: "yellow"}
_RANK = {ERROR: 4, FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2e}"


def group_rows(rows: Sequence[CheckRow]) -> list[dict[str, Any]]:
    """One line per (op, case, dtype, device, check): worst status over its variants."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in rows:
        key = (r.op, r.case, r.dtype, r.device, r.check)
        g = groups.setdefault(key, {"op": r.op, "case": r.case, "dtype": r.dtype,
                                    "device": r.device, "check": r.check, "status": r.status,
                                    "max_abs_err": None, "max_rel_err": None, "seconds": 0.0,
                                    "variants": 0, "failed_variants": 0})
        g["variants"] += 1
        g["failed_variants"] += r.failed
        g["seconds"] += r.seconds
        if _RANK[r.status] > _RANK[g["status"]] or g["variants"] == 1:
            g["status"] = r.status if g["variants"] == 1 else max(
                g["status"], r.status, key=lambda s: _RANK[s])
        for col in ("max_abs_err", "max_rel_err"):
            v = getattr(r, col)
            if v is not None and math.isfinite(v):
                g[col] = v if g[col] is None else max(g[col], v)
    return list(groups.values())


def check_table(report: Report) -> Table:
    """The summary table: one line per op, case, dtype, device and check."""
    table = Table(title="gradlab check", show_lines=False, header_style="bold")
    groups = group_rows(report.rows)
    keys = ("op", "case", "dtype", "device", "check", "status")
    widths = {k: max([len(k), *(len(str(g[k])) for g in groups)]) for k in keys}
    for col in (*keys, "variants", "max abs err", "max rel err", "seconds"):
        # the columns that say which row is which are never cut short
        table.add_column(col, justify="right" if col in ("variants", "max abs err",
                                                         "max rel err", "seconds") else "left",
                         no_wrap=col in keys, min_width=widths.get(col))
    for g in groups:
        variants = str(g["variants"])
        if g["failed_variants"]:
            variants = f"{g['failed_variants']}/{g['variants']} bad"
        table.add_row(g["op"], g["case"], g["dtype"], g["device"], g["check"],
                      Text(g["status"], style=_STYLE[g["status"]]), variants,
                      _num(g["max_abs_err"]), _num(g["max_rel_err"]), f"{g['seconds']:.3f}")
    return table


#: Failing rows shown in the terminal (the report files have all of them).
FAILURES_SHOWN = 40


def failure_lines(report: Report) -> list[Text]:
    """A few lines per failing row: where, why (hint), what (message), worst elements, repro."""
    lines: list[Text] = []
    for r in report.failures[:FAILURES_SHOWN]:
        head = Text(f"{r.status.upper()} ", style=_STYLE[r.status])
        head.append(f"{r.op} / {r.case} / {r.dtype} / {r.device} / {r.variant} / {r.check}",
                    style="bold")
        lines.append(head)
        if r.hint:
            lines.append(Text(f"  likely cause: {r.hint}", style="cyan"))
        if message(r):
            lines.append(Text(f"  {message(r)}"))
        if location(r):
            lines.append(Text(f"  worst: {location(r)}", style="dim"))
        if r.repro:
            repro = f"{r.repro} ; {r.repro_command}" if r.repro_command else r.repro
            lines.append(Text(f"  repro: {repro}", style="dim"))
    hidden = len(report.failures) - FAILURES_SHOWN
    if hidden > 0:
        lines.append(Text(f"... and {hidden} more failing rows (see the CSV report)"))
    return lines


def render_check(report: Report, console: Console, *, quiet: bool = False,
                 empty_ok: bool = False) -> None:
    """Print the summary table (not when quiet), the failures and a one-line verdict.

    empty_ok: a run without cases (an empty shard) passes."""
    if not quiet:
        console.print(check_table(report))
    for line in failure_lines(report):
        # no wrapping: a repro command must stay one copyable line
        console.print(line, soft_wrap=True)
    counts = {s: sum(r.status == s for r in report.rows) for s in (PASS, FAIL, ERROR, SKIP)}
    passed = report.passed or (empty_ok and not report.rows and not report.truncated)
    verdict = "PASSED" if passed else "FAILED"
    style = "bold green" if passed else "bold red"
    extra = " (stopped early by --budget)" if report.truncated else ""
    if report.stopped:
        extra += " (stopped after the first failing case: --fail-fast)"
    if not report.rows and not report.truncated:
        extra += " (no case to run)"
    console.print(Text(f"{verdict}: {counts[PASS]} passed, {counts[FAIL]} failed, "
                       f"{counts[ERROR]} errors, {counts[SKIP]} skipped{extra}", style=style))

"""Progress while a run goes on: a bar in a terminal, lines in a log.

A progress bar shows nothing in a CI log, so there a line per finished op and a heartbeat while
one case runs long say where the run is (and where it hangs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from gradlab.results.status import ERROR, FAIL, PASS, SKIP, WARN
from gradlab.results.summary import RunSummary, count_words, summarize

#: Seconds between "still running" lines in a log.
HEARTBEAT_S = 30.0
#: The width of a log's lines when COLUMNS does not say: a terminal's usual width, so that a
#: log read in one (`2>&1 | less`, `tail -f`) does not fold them.
LOG_WIDTH = 80


def log_width(environ: Mapping[str, str] = os.environ) -> int:
    """The width progress lines in a log fit in: COLUMNS when set, else LOG_WIDTH."""
    columns = environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else LOG_WIDTH


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


#: How a short line says a number of checks of each status besides pass.
_SAID: dict[str, Callable[[int], str]] = {
    FAIL: lambda n: f"{n} failed", ERROR: lambda n: _plural(n, "error"),
    SKIP: lambda n: f"{n} skipped", WARN: lambda n: _plural(n, "warning")}


def op_line(op: str, summary: RunSummary[Any], seconds: float, width: int) -> str:
    """`checked OP: <the run's count sentence> (S s)` when it fits in `width`, else the
    counts that are not zero ('checked exp: 2 cases, 14 checks passed, 102 rows (0.5 s)';
    without the rows, then the seconds, where that is still too long), cut to the width as a
    last resort (a very long op name)."""
    took = f" ({seconds:.1f} s)"
    full = f"checked {op}: {count_words(summary)}{took}"
    if len(full) <= width:
        return full
    statuses = summary.statuses
    checks = _plural(len(summary.checks), "check")
    said = [_SAID[s](n) for s, n in statuses.items() if n and s != PASS]
    counted = (f"{checks} passed" if not said else
               f"{checks}: " + ", ".join([f"{statuses[PASS]} passed", *said]))
    findings = f"; {_plural(len(summary.findings), 'finding')}" if summary.findings else ""
    short = f"checked {op}: {_plural(len(summary.cases), 'case')}, {counted}{findings}"
    for line in (f"{short}, {_plural(summary.total_rows, 'row')}{took}", short + took):
        if len(line) <= width:
            return line
    return short[: max(width - 3, 0)] + "..."


@contextmanager
def progress(label: str, total: int, console: Console,
             show: bool = True) -> Iterator[Callable[[str], None]]:
    """A progress bar on `console` (gone when done; none outside a terminal or when not
    `show`); yields `step(description)`."""
    if not console.is_terminal or not show:
        yield lambda description: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda description: bar.update(task, advance=1, description=description)


class LogProgress:
    """Progress lines for a log: `checked OP: <its numbers> (S s)` per finished op, in the
    words every output counts a run with (gradlab.results.summary.count_words), and `still
    running LABEL (S s)` every HEARTBEAT_S while one case runs."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.perf_counter,
                 width: int | None = None) -> None:
        self.console, self.clock = console, clock
        #: what a line fits in (op_line): the console's width unless given
        self.width = width or console.width
        self.op: str | None = None
        self.rows: list[Any] = []
        self.seconds = 0.0
        self.mark = clock()
        self.last_beat = 0.0

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def rows_done(self, rows: list[Any]) -> None:
        """A batch of rows (one case) is finished."""
        now = self.clock()
        if rows and rows[0].op != self.op:
            self.flush()
            self.op = rows[0].op
        self.seconds += now - self.mark
        self.mark = now
        self.rows += rows
        self.last_beat = 0.0

    def flush(self) -> None:
        """Say the op in progress is done (at an op change and at the end of the run)."""
        if self.op is not None:
            self._say(op_line(self.op, summarize(self.rows), self.seconds, self.width))
        self.op, self.rows, self.seconds = None, [], 0.0

    def waiting(self, label: str, seconds: float) -> None:
        """Called while one case runs: a heartbeat every HEARTBEAT_S.  A case of the next op
        under way means the op before is done: say so now, not once that case ends (it may
        hang)."""
        if self.op is not None and label.split("/", 1)[0] != self.op:
            self.flush()
        if seconds - self.last_beat >= HEARTBEAT_S:
            self.last_beat = seconds
            self._say(f"still running {label} ({seconds:.0f} s)")

"""Progress while a run goes on: a bar in a terminal, lines in a log.

A progress bar shows nothing in a CI log, so there a line per finished op and a heartbeat while
one case runs long say where the run is (and where it hangs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from gradlab.results.summary import count_words, summarize

#: Seconds between "still running" lines in a log.
HEARTBEAT_S = 30.0


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

    def __init__(self, console: Console, clock: Callable[[], float] = time.perf_counter) -> None:
        self.console, self.clock = console, clock
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
            self._say(f"checked {self.op}: {count_words(summarize(self.rows))} "
                      f"({self.seconds:.1f} s)")
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

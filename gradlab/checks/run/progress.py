"""What a worker is doing, told to its parent as it goes: the rows an item has made so far and
the step it is in (check, variant, the Function's forward or backward).

A worker stopped at its case's deadline, or killed past its memory limit, cannot say anything
more: one long C call (a kernel, a backward re-entering itself inside torch's engine) holds it
until the parent kills it.  So a thread of the worker reads the checking thread's stack every
PROGRESS_S and sends what changed; the parent keeps the last word, and the item's rows are then
every row measured before, and a row naming the step that ran past the limit
(`lost_item_rows`).  torch-free: the parent imports it.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from types import FrameType
from typing import Any

from gradlab.frames import is_checked_code, is_gradlab, is_torch
from gradlab.results import ERROR, SKIP, CheckRow

#: How often a worker's reporter reads the checking thread's stack: a few sends a second at most
#: (only what changed is sent), and a limit loses at most this long of a step's name.
PROGRESS_S = 0.25
#: The checks the frames of gradlab.checks name (innermost wins): what a limit interrupted.
CHECK_OF_FRAME = {"jacobian_check": "jacobian", "second_order_row": "second_order",
                  "forward_ad_row": "forward_ad", "autocast_row": "autocast",
                  "capability_rows": "capabilities", "base_contract": "contract",
                  "opcheck_rows": "opcheck", "explore_row": "explore",
                  "edge_rows": "edges"}
#: torch's functions that run a backward (autograd.grad, Tensor.backward, the engine's entry).
BACKWARD_FRAMES = frozenset({"grad", "backward", "_engine_run_backward"})


@dataclass
class Where:
    """Where an item is: its rows so far, the check and variant, and "forward", "backward" or
    "" (gradlab's own work between them)."""

    rows: list[CheckRow] = field(default_factory=list)
    check: str = ""
    variant: str = "base"
    step: str = ""


def where(frames: list[FrameType]) -> tuple[Any, Where]:
    """(the innermost gradlab.checks CaseContext `ctx`, Where) read off `frames` (outermost
    first): the check named by the innermost frame of CHECK_OF_FRAME, the variant of
    `one_variant`'s `v`, backward when torch runs one (or the Function's backward runs)."""
    ctx, at = None, Where()
    for frame in frames:
        name, filename = frame.f_code.co_name, frame.f_code.co_filename
        if is_gradlab(filename):
            found = frame.f_locals.get("ctx")
            if found is not None and hasattr(found, "rows") and hasattr(found, "dtype"):
                ctx = found
            at.check = CHECK_OF_FRAME.get(name, at.check)
            if name == "one_variant" and hasattr(frame.f_locals.get("v"), "name"):
                at.variant, at.check = frame.f_locals["v"].name, "gradient"
        if name in BACKWARD_FRAMES and (is_torch(filename) or is_checked_code(filename)):
            at.step = "backward"
        elif not at.step and is_checked_code(filename):
            at.step = "forward"
    if ctx is not None:
        at.rows = list(ctx.rows)
    return ctx, at


def stack(frame: FrameType | None) -> list[FrameType]:
    """`frame` and its callers, outermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


class Reporter:
    """The worker's side: `send` for every message (one lock: the reporter thread sends too),
    `item(index)` around each item's run, while a daemon thread sends ("progress", index,
    Where) whenever the item's rows or step change."""

    def __init__(self, outbox: Connection) -> None:
        self.outbox = outbox
        self.lock = threading.Lock()
        self.index: int | None = None
        self.tid = threading.get_ident()
        self.last: tuple[Any, ...] = ()
        threading.Thread(target=self.loop, name="gradlab-progress", daemon=True).start()

    def send(self, msg: Any) -> None:
        with self.lock:
            self.outbox.send(msg)

    @contextmanager
    def item(self, index: int) -> Iterator[None]:
        with self.lock:
            self.index, self.last = index, ()
        try:
            yield
        finally:
            with self.lock:  # no progress of this item after its rows
                self.index = None

    def loop(self) -> None:
        while True:
            time.sleep(PROGRESS_S)
            with self.lock:
                if self.index is None:
                    continue
                frames = stack(sys._current_frames().get(self.tid))
                _, at = where(frames)
                key = (len(at.rows), at.check, at.variant, at.step)
                if key == self.last:
                    continue
                try:
                    self.outbox.send(("progress", self.index, at))
                except Exception:  # an unpicklable row: the next change may send
                    continue
                self.last = key


def lost_item_rows(item: tuple[str, Any, Any, str, str], hint: str, note: str,
                   at: Where | None, reason: str = "") -> list[CheckRow]:
    """The rows of an item whose worker died, ran past its case's timeout or was stopped for
    memory: every row it made before (`at`, its last progress), then an error row in the check,
    variant and step it was in (the Function's failure)."""
    kind, t, case, dtype, device = item
    at = at or Where()
    check = at.check or ("gradient" if kind == "case" and at.step == "backward"
                         else "forward" if kind == "case" else "jacobian")
    step = f" in the Function's {at.step}" if at.step else ""
    kept = f"; the {len(at.rows)} rows made before are kept" if at.rows else ""
    return [*at.rows, CheckRow(t.op.name, case.name, dtype, device, at.variant, check, ERROR,
                               hint=hint, reason=reason,
                               note=f"{note}{step} (check {check}, variant {at.variant}){kept}")]


def not_run_row(item: tuple[str, Any, Any, str, str], timeout: float) -> CheckRow:
    """The row of an item never started: its case's --timeout was spent by its other items."""
    kind, t, case, dtype, device = item
    return CheckRow(t.op.name, case.name, dtype, device, "base",
                    "forward" if kind == "case" else "jacobian", SKIP, reason="timeout_spent",
                    note=f"not run: the case's timeout of {timeout:g} s was spent by its "
                         "other items")


def describe_exit(code: int | None) -> str:
    """'exit code 5', 'killed by SIGSEGV' (a negative code is the signal)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"

"""Work items run in a worker process, so the code under check cannot take the run down.

A Function that segfaults, calls `os._exit`, is killed for memory or hangs in a C call can only
be stopped from another process.  The parent plans the items, sends their indices to one worker
(spawned once, reused while it is healthy) and waits for each item's rows with a timeout; when
the worker dies or runs past the timeout, that item gets an error row, the worker is killed and
the next item starts a fresh one.  Targets travel pickled: Functions named by `module:attr` (every
spec) pickle by reference; an unpicklable one (a lambda given to the Python API) cannot be
isolated, which `picklable` tells beforehand.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from gradlab.checks.run.child import RELOAD
from gradlab.checks.run.options import Options
from gradlab.checks.run.progress import Where, describe_exit
from gradlab.checks.run.warm import WARM, WorkerProcess, close_server, spawn
from gradlab.model import Target
from gradlab.results import CheckRow

#: Seconds a fresh worker may take to start (import torch, unpickle the targets).
START_TIMEOUT_S = 300.0
#: How often the parent wakes while waiting (to notice a dead worker and report progress).
POLL_S = 0.5
#: A crash note with any of these leaves the process's CUDA context unusable: fresh worker.
POISONED = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "cuDNN error")

#: on_wait(label, seconds): a heartbeat while one item runs.
OnWait = Callable[[str, float], None]
#: Healthy workers kept between runs (Options.keep_workers: the pytest plugin runs one
#: item per run), each taken by the next Worker.start; close_idle stops them.
IDLE: list[tuple[WorkerProcess, Connection, Connection]] = []


def picklable(targets: Sequence[Target], options: Options) -> str:
    """'' when the targets and options can travel to a worker, else why not."""
    try:
        pickle.dumps((list(targets), options))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return ""



@dataclass
class Outcome:
    """One item's rows, or why there are none (the worker died, or ran past the timeout)."""

    rows: list[CheckRow] | None = None
    hint: str = ""
    note: str = ""
    #: a starting worker's environment record (gradlab.envinfo).
    env: dict[str, Any] | None = None
    #: a lost item's last progress: its rows so far and the step it was in (progress.py).
    at: Where | None = None


class Worker:
    """One worker process at a time, started on demand and replaced after a death or timeout."""

    def __init__(self, targets: Sequence[Target], options: Options) -> None:
        self.payload = pickle.dumps((list(targets), options))
        self.keep = options.keep_workers
        #: an item was sent and its rows are not in yet (such a worker is never kept).
        self.busy = False
        #: the environment record the worker sent when it was ready ({} before).
        self.env: dict[str, Any] = {}
        self.proc: WorkerProcess | None = None
        #: the hint of a start that failed (worker_load: the targets would not load there)
        self.start_hint = ""
        self.inbox: Connection | None = None
        self.outbox: Connection | None = None
        #: the running item's last progress (progress.Reporter), None before any.
        self.at: Where | None = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start a worker and wait until it is ready; '' on success, else why it failed.

        Not multiprocessing: fork is unsafe once CUDA or OpenMP threads run in the parent, and
        spawn re-imports the parent's main module (a user's script without a __main__ guard
        would run again).  A worker is a fork of a fork server that only imported torch, or a
        fresh interpreter (gradlab.checks.run.warm.spawn).
        """
        kept = take_idle()
        self.proc, self.inbox, self.outbox = kept or (WARM.pop() if WARM else spawn())
        try:
            if kept:
                self.outbox.send(RELOAD)
            self.outbox.send(sys.path)
        except OSError:  # a warm or kept worker that died meanwhile: a fresh one instead
            self.discard()
            self.proc, self.inbox, self.outbox = spawn()
            self.outbox.send(sys.path)
        self.outbox.send_bytes(self.payload)
        reply = self.wait(START_TIMEOUT_S)
        if reply.rows is None:
            self.start_hint = reply.hint
            return f"the worker did not start: {reply.note}"
        self.env = reply.env or self.env
        return ""

    def stop(self) -> None:
        """Stop the worker: killed, since it holds nothing to save (its rows were sent as
        they were made) and a polite exit took 0.8 s of interpreter shutdown with torch
        loaded, at the end of every run.  With Options.keep_workers a healthy, idle worker is
        kept in IDLE for the next run instead (a fresh one costs a torch import)."""
        if self.proc is None:
            return
        if self.kept():
            assert self.inbox is not None and self.outbox is not None
            IDLE.append((self.proc, self.inbox, self.outbox))
            self.proc, self.inbox, self.outbox = None, None, None
            return
        self.discard()

    def kept(self) -> bool:
        """Whether stop() would keep this worker for the next run (see stop)."""
        return (self.keep and not self.busy and self.proc is not None
                and self.proc.poll() is None)

    def discard(self) -> None:
        """Kill the worker (it died, hung, or may hold a broken CUDA context)."""
        if self.proc is None:
            return
        self.busy = False
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5.0)
        for conn in (self.inbox, self.outbox):
            if conn is not None:
                conn.close()
        self.proc, self.inbox, self.outbox = None, None, None

    def exit_status(self) -> str:
        """How the worker ended (after a broken pipe, give it a moment to be reaped)."""
        assert self.proc is not None
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        return describe_exit(self.proc.poll())

    def submit(self, index: int, options: Options) -> str:
        """Send item `index` (starting a worker first when there is none); '' when sent,
        else why it could not be."""
        if self.proc is None:
            why = self.start()
            if why:
                return why
        assert self.outbox is not None
        try:
            self.outbox.send((index, options))
        except (OSError, BrokenPipeError):
            self.discard()
            return "the worker stopped listening"
        self.busy, self.at = True, None
        return ""

    def outcome(self, waited: float, timeout: float | None) -> Outcome | None:
        """The item's Outcome when it is in (or the worker died, or the item ran past
        `timeout` after `waited` seconds), else None; a worker that failed is stopped."""
        assert self.inbox is not None and self.proc is not None
        msg: Any = ("progress",)
        try:  # progress messages (progress.Reporter) first, then at most one other
            while msg[0] == "progress" and self.inbox.poll(0):
                msg = self.inbox.recv()
                self.at = msg[2] if msg[0] == "progress" else self.at
        except (EOFError, OSError):
            msg = ("died",)
        if msg[0] == "died":
            done = Outcome(hint="worker_died", note=self.exit_status(), at=self.at)
        elif msg[0] == "unloadable":
            done = Outcome(hint="worker_load", note=msg[1])
        elif msg[0] != "progress":
            done = (Outcome(rows=[], env=msg[2]) if msg[0] == "ready"
                    else Outcome(rows=msg[2]))
        elif self.proc.poll() is not None:
            done = Outcome(hint="worker_died", note=self.exit_status(), at=self.at)
        elif timeout is not None and waited > timeout:
            done = Outcome(hint="timeout", note=f"stopped at the case's timeout of {timeout:g} s",
                           at=self.at)
        else:
            return None
        poisoned = done.rows is not None and any(
            p in r.note for r in done.rows for p in POISONED)
        self.busy = False if done.rows is not None else self.busy
        if done.rows is None or poisoned:
            self.discard()  # the next item gets a fresh worker
        return done

    def wait(self, timeout: float | None) -> Outcome:
        """The next message's Outcome (or that the worker died or ran past `timeout`)."""
        assert self.inbox is not None
        start = time.perf_counter()
        while (done := self.outcome(time.perf_counter() - start, timeout)) is None:
            self.inbox.poll(POLL_S)
        return done


def take_idle() -> tuple[WorkerProcess, Connection, Connection] | None:
    """A kept worker still alive (IDLE), or None."""
    while IDLE:
        proc, inbox, outbox = IDLE.pop()
        if proc.poll() is None:
            return proc, inbox, outbox
        inbox.close(), outbox.close()
    return None


def close_idle() -> None:
    """Stop the workers kept for another run, and their fork server (the end of a pytest
    session)."""
    while IDLE:
        proc, inbox, outbox = IDLE.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5.0)
        inbox.close(), outbox.close()
    close_server()


#: (index, item, options) of one work item to run, and (index, item, outcome) of one run.
Job = tuple[int, Any, Options]
Done = tuple[int, Any, Outcome]


def stop_all(workers: Sequence[Worker]) -> None:
    """Stop every worker (Worker.stop), the kills all sent first: a killed worker takes 0.1-0.15
    s to exit (torch torn down), one after another 0.3 s per two-worker run, together one's."""
    for w in workers:
        if w.proc is not None and not w.kept() and w.proc.poll() is None:
            w.proc.kill()
    for w in workers:
        w.stop()
    if not any(w.keep for w in workers):
        close_server()  # a kept worker needs its server (close_idle stops both)


def fits(held: Sequence[int], weight: int, budget: int | None) -> bool:
    """Whether an item of `weight` bytes may start within the budget beside items holding
    `held`, or alone (an item larger than the budget still runs, by itself)."""
    return budget is None or not held or sum(held) + weight <= budget


def run_parallel(workers: Sequence[Worker], jobs: Iterator[Job], timeout: float | None,
                 on_wait: OnWait | None, label: Callable[[Any], str],
                 weight: Callable[[Any], int] = lambda item: 0,
                 budget: int | None = None,
                 case_of: Callable[[Any], Any] = lambda item: object()) -> Iterator[Done]:
    """Run `jobs` on `workers`, one item each at a time, yielding each as it finishes (so not
    in order).  The next job is taken only when a worker is free: what `jobs` decides as it
    yields (a budget, fail-fast) sees every result before it.

    weight(item): the bytes an item's tensors need; items run side by side only while their
    weights add up to `budget` (one big case at a time, as a case is refused past it alone).
    `timeout` bounds a case: its items (case_of(item) alike) together, from the first one's
    start; an item whose case has no time left is not run (hint "timeout_spent")."""
    busy: dict[int, tuple[int, Any, float]] = {}  # worker position -> index, item, case start
    case_start: dict[Any, float] = {}
    held: Job | None = None  # the next job, waiting for memory to free up
    more = True
    while True:
        for k, w in enumerate(workers):
            if k in busy or not (more or held):
                continue
            job = held or next(jobs, None)
            held = None
            if job is None:
                more = False
                break
            index, item, options = job
            if not fits([weight(b[1]) for b in busy.values()], weight(item), budget):
                held = job
                break
            case = case_of(item)
            if timeout is not None and time.perf_counter() - case_start.get(case, 1e300) > timeout:
                yield index, item, Outcome(hint="timeout_spent")
                continue
            why = w.submit(index, options)  # (a worker's start-up is not the case's time)
            if why:
                yield index, item, Outcome(hint=w.start_hint or "worker_died", note=why)
                continue
            busy[k] = (index, item, case_start.setdefault(case, time.perf_counter()))
        if not busy:
            if more or held:  # every job taken this round was answered without a worker
                continue
            return
        wait([c for c in (workers[k].inbox for k in busy) if c is not None], timeout=POLL_S)
        now = time.perf_counter()
        for k, (index, item, started) in list(busy.items()):
            done = workers[k].outcome(now - started, timeout)
            if done is not None:
                del busy[k]
                yield index, item, done
        if busy and on_wait is not None:
            # the heartbeat names the first item in plan order still running: the one whose
            # rows the caller waits for (it hears them in that order)
            index, item, started = min(busy.values(), key=lambda b: b[0])
            on_wait(label(item), now - started)

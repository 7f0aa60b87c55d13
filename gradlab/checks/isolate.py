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

import ctypes
import gc
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from gradlab.checks.context import Options
from gradlab.model import Target
from gradlab.results import ERROR, CheckRow
from gradlab.torchstate import intra_op_threads

#: Seconds a fresh worker may take to start (import torch, unpickle the targets).
START_TIMEOUT_S = 300.0
#: How often the parent wakes while waiting (to notice a dead worker and report progress).
POLL_S = 0.5
#: prctl option: the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1
#: A crash note with any of these leaves the process's CUDA context unusable: fresh worker.
POISONED = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "cuDNN error")

#: on_wait(label, seconds): a heartbeat while one item runs.
OnWait = Callable[[str, float], None]


def picklable(targets: Sequence[Target], options: Options) -> str:
    """'' when the targets and options can travel to a worker, else why not."""
    try:
        pickle.dumps((list(targets), options))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return ""


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this worker when its parent dies (Linux's PR_SET_PDEATHSIG): a
    parent killed outright must not leave a worker hung in a Function running for ever."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe's end still stops a worker that is not hung
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def child_main(read_fd: int, write_fd: int, parent: int = 0) -> None:
    """Entry point of a worker process (see Worker.start): serve until stopped."""
    if parent:
        die_with_parent(parent)
    # Ctrl-C reaches the whole process group: the parent decides, the worker just goes on
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    import torch  # noqa: F401  (the slow part of a start: done while the parent sets up)

    try:
        sys.path[:] = inbox.recv()  # the parent's, so `module:attr` resolves alike
        serve(inbox, outbox, inbox.recv_bytes())
    except (EOFError, BrokenPipeError):
        pass  # the parent is gone (or never needed this warm worker): nothing left to do


def serve(inbox: Connection, outbox: Connection, payload: bytes) -> None:
    """The worker: rebuild the plan, then run the items it is sent until its pipe closes (the
    parent is gone) or it is killed (Worker.stop: it holds nothing to save).

    The runner's `plan` and `item_rows` travel in the payload (pickled by reference), so that
    this module does not import the runner that imports it.
    """
    targets, options, plan, item_rows = pickle.loads(payload)
    items = list(plan(targets, options))
    gc.freeze()  # torch and the targets live as long as the worker: no full passes over them
    outbox.send(("ready", len(items)))
    with intra_op_threads(options.threads):
        while True:
            index, item_options = inbox.recv()
            outbox.send(("rows", index, item_rows(items[index], item_options)))


def spawn() -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """A fresh worker interpreter (it imports torch, then waits for its work) and the two ends
    of its pipes: (process, from the worker, to the worker)."""
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    code = ("import sys; from gradlab.checks.isolate import child_main; "
            "child_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(to_child), str(from_child),
                             str(os.getpid())],
                            pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL)
    os.close(to_child)
    os.close(from_child)
    return proc, Connection(to_parent, writable=False), Connection(from_parent, readable=False)


#: Workers spawned ahead of need (see warm_up), taken by the next Worker.start.
WARM: list[tuple[subprocess.Popen[bytes], Connection, Connection]] = []


def warm_up() -> None:
    """Spawn a worker now, so that its interpreter start and torch import (about a second)
    overlap with the caller's own set-up (loading specs) instead of following it."""
    if not WARM:
        WARM.append(spawn())


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


@dataclass
class Outcome:
    """One item's rows, or why there are none (the worker died, or ran past the timeout)."""

    rows: list[CheckRow] | None = None
    hint: str = ""
    note: str = ""


class Worker:
    """One worker process at a time, started on demand and replaced after a death or timeout."""

    def __init__(self, targets: Sequence[Target], options: Options, plan: Callable[..., Any],
                 item_rows: Callable[..., list[CheckRow]]) -> None:
        self.payload = pickle.dumps((list(targets), options, plan, item_rows))
        self.proc: subprocess.Popen[bytes] | None = None
        self.inbox: Connection | None = None
        self.outbox: Connection | None = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start a worker and wait until it is ready; '' on success, else why it failed.

        A fresh interpreter rather than multiprocessing: fork is unsafe once CUDA or OpenMP
        threads run in the parent, and spawn re-imports the parent's main module (a user's
        script without a __main__ guard would run again).
        """
        self.proc, self.inbox, self.outbox = WARM.pop() if WARM else spawn()
        self.outbox.send(sys.path)
        self.outbox.send_bytes(self.payload)
        reply = self.receive(START_TIMEOUT_S, None, "")
        if reply.rows is None and reply.hint:
            self.stop()
            return f"the worker did not start: {reply.note}"
        return ""

    def stop(self) -> None:
        """Stop the worker: killed, since it holds nothing to save (its rows were sent as
        they were made) and a polite exit took 0.8 s of interpreter shutdown with torch
        loaded, at the end of every run."""
        if self.proc is None:
            return
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

    def receive(self, timeout: float | None, on_wait: OnWait | None, label: str) -> Outcome:
        """Wait for the next message: rows, or an Outcome saying the worker died or hung."""
        assert self.inbox is not None and self.proc is not None
        start = time.perf_counter()
        while True:
            waited = time.perf_counter() - start
            if self.inbox.poll(POLL_S):
                try:
                    msg = self.inbox.recv()
                except (EOFError, OSError):
                    return Outcome(hint="worker_died", note=self.exit_status())
                return Outcome(rows=msg[2] if msg[0] == "rows" else [])
            if self.proc.poll() is not None:
                return Outcome(hint="worker_died", note=self.exit_status())
            if timeout is not None and waited > timeout:
                return Outcome(hint="timeout", note=f"no result after {timeout:g} s: stopped")
            if on_wait is not None:
                on_wait(label, waited)

    def run_item(self, index: int, options: Options, timeout: float | None,
                 on_wait: OnWait | None, label: str) -> Outcome:
        """Run one item in the worker (starting one first when there is none)."""
        if self.proc is None:
            why = self.start()
            if why:
                return Outcome(hint="worker_died", note=why)
        assert self.outbox is not None
        try:
            self.outbox.send((index, options))
        except (OSError, BrokenPipeError):
            self.stop()
            return Outcome(hint="worker_died", note="the worker stopped listening")
        outcome = self.receive(timeout, on_wait, label)
        poisoned = outcome.rows is not None and any(
            p in r.note for r in outcome.rows for p in POISONED)
        if outcome.rows is None or poisoned:
            self.stop()  # the next item gets a fresh worker
        return outcome


def lost_item_row(item: tuple[str, Target, Any, str, str], outcome: Outcome) -> CheckRow:
    """The row of an item whose worker died or ran past the timeout: the Function's failure."""
    kind, t, case, dtype, device = item
    check = "forward" if kind == "case" else "jacobian"
    return CheckRow(t.op.name, case.name, dtype, device, "base", check, ERROR,
                    hint=outcome.hint, note=outcome.note)

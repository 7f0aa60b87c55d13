"""Limits on checks that run in this process: a time and a memory limit on a whole run (the Python
API's `gradlab.check(timeout=, max_memory=)`, see gradlab.apiguard), and the cost envelope of one
variant (every run: a variant far slower than its base case is stopped and skipped).

How a runaway is stopped without a process of its own: one watchdog thread, started on first
use, sleeps until the nearest deadline (waking every MEMORY_POLL_S to read the resident memory
while a memory limit is on) and raises `LimitExceeded` in the checking thread through CPython's
`PyThreadState_SetAsyncExc`.  The exception lands at the next bytecode that thread runs: a loop
in Python (an adaptive solver's steps, a growing list of tensors) stops within a poll, one long
C call (a kernel, one long sleep) only once it returns.  Only another process can stop those:
`gradlab check` runs each case in a worker for that (gradlab.checks.run.isolate).

A run's deadline in the main thread is kept by a signal instead (`alarm`: SIGALRM from
setitimer, the previous handler and timer saved and put back): a signal interrupts a blocking
wait there (time.sleep, a lock's or a queue's wait, a socket read) as well as Python code.  A
signal handler can only be installed from the main thread and only runs there, and Windows has
no setitimer: elsewhere the deadline is the watchdog's, which cannot interrupt a blocking call
(`ALARM_UNAVAILABLE` says so in the error).  Neither stops one long computation in C (a
kernel), nor a backward torch runs on a device thread of its own (CUDA tensors) while the main
thread waits in torch's engine.  RLIMIT_AS is no memory limit either: it would cap the user's
whole process (CUDA reserves terabytes of address space) and fail allocations in code that
cannot take it.  The cost, measured on a small check: under a millisecond per call.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

#: How often the watchdog reads the resident memory while a memory limit is on: at a few GB/s
#: of allocation a runaway overshoots its limit by a few hundred MB at most, and one read of
#: /proc/self/statm costs microseconds.
MEMORY_POLL_S = 0.05
#: A variant is never stopped before this many seconds, whatever its base case took: a base
#: case of a few milliseconds times the envelope's factor is well within a loaded machine's
#: scheduling noise (a 2-core machine shared by several test runs stalls a process for seconds),
#: and the variants' own judging (a rerun, a plain copy) is part of their cost.  The runaways
#: the envelope is for run for minutes.
ENVELOPE_FLOOR_S = 10.0


#: What a deadline without `alarm` cannot stop, for the error that reports it late.
ALARM_UNAVAILABLE = ("outside the main thread (or without setitimer: Windows) a timeout cannot "
                     "interrupt a blocking call (time.sleep, a lock, a queue or socket wait): "
                     "it stops once the call returns")


class LimitExceeded(BaseException):
    """Raised into the checking thread when a limit passed.  A BaseException: the checks'
    `except Exception` (a Function's crash) must not take it for the Function's own error.
    The watchdog raises the bare class; `alarm` an instance with an argument (`by_alarm`)."""


def by_alarm(exc: LimitExceeded) -> bool:
    """Whether `exc` came from `alarm` (a run's deadline) rather than the watchdog thread."""
    return bool(exc.args)


@dataclass(eq=False)
class Scope:
    """One watched stretch of a thread's work: a deadline, a memory limit, or both."""

    #: "run" (a whole check run, gradlab.apiguard) or "envelope" (one variant).
    kind: str
    deadline: float | None = None
    #: the resident bytes past which the scope is stopped (None: no memory limit).
    max_rss: int | None = None
    tid: int = field(default_factory=threading.get_ident)
    #: which limit stopped it: "" (none), "timeout" or "memory".
    fired: str = ""
    #: the resident memory when the memory limit fired.
    rss: int = 0
    #: the exception was sent and has not reached this scope's exit yet.
    pending: bool = False


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's /proc/self/statm), None where unknown."""
    try:
        statm = Path("/proc/self/statm").read_bytes()
        return int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _set_async_exc(tid: int, exc: type[BaseException] | None) -> None:
    """Have thread `tid` raise `exc` at its next bytecode (None: take back one not raised)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(tid), ctypes.py_object(exc) if exc is not None else None)


class Watchdog:
    """The one watchdog thread and the scopes it watches (WATCH)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.scopes: list[Scope] = []
        self.thread: threading.Thread | None = None
        #: when the thread wakes next (monotonic; inf: when notified).
        self.wake_at = math.inf

    def enter(self, scope: Scope) -> None:
        with self.cond:
            self.scopes.append(scope)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self.loop, name="gradlab-watchdog",
                                               daemon=True)
                self.thread.start()
            soon = time.monotonic() + MEMORY_POLL_S if scope.max_rss is not None else math.inf
            if min(soon, scope.deadline or math.inf) < self.wake_at:
                # wake it only when it would sleep past this scope's limit: a variant's scope
                # (one per variant, seconds away) would otherwise cost a thread switch each
                self.cond.notify()

    def leave(self, scope: Scope) -> None:
        """The scope's thread left it: an exception sent and not yet raised is taken back."""
        with self.cond:
            if scope in self.scopes:
                self.scopes.remove(scope)
            if scope.pending:
                scope.pending = False
                _set_async_exc(scope.tid, None)

    def loop(self) -> None:
        with self.cond:
            while True:
                now = time.monotonic()
                for s in self.scopes:
                    self.judge(s, now)
                # a thread with an exception on its way is looked at again a poll later (not
                # every millisecond while a long C call holds it)
                blocked = {s.tid for s in self.scopes if s.pending}
                waits = [MEMORY_POLL_S if s.tid in blocked or s.deadline <= now
                         else s.deadline - now
                         for s in self.scopes if s.deadline is not None and not s.fired]
                if any(s.max_rss is not None and not s.fired for s in self.scopes):
                    waits.append(MEMORY_POLL_S)
                wait = max(0.001, min(waits)) if waits else None
                self.wake_at = now + wait if wait is not None else math.inf
                self.cond.wait(wait)

    def judge(self, s: Scope, now: float) -> None:
        """Fire `s` when it passed a limit (one exception in flight per thread at a time)."""
        if s.fired or any(o.pending and o.tid == s.tid for o in self.scopes):
            return
        if s.deadline is not None and now >= s.deadline:
            if importing(sys._current_frames().get(s.tid)):
                return  # a module half imported would break every later check: a poll later
            s.fired = "timeout"
        elif s.max_rss is not None and (rss := resident_bytes() or 0) > s.max_rss:
            s.fired, s.rss = "memory", rss
        else:
            return
        s.pending = True
        _set_async_exc(s.tid, LimitExceeded)


WATCH = Watchdog()


@contextmanager
def watched(scope: Scope) -> Iterator[Scope]:
    """Watch `scope` while the block runs; its LimitExceeded propagates (`own` tells whose
    a caught one was)."""
    WATCH.enter(scope)
    try:
        yield scope
    except LimitExceeded as exc:
        if not by_alarm(exc):
            scope.pending = False  # raised: nothing left to take back
        raise
    finally:
        try:
            WATCH.leave(scope)
        except LimitExceeded:
            # raised as the block ended, before leave took it back: the block is done, so
            # this scope's own is moot; an outer scope's goes on up
            scope.pending = False
            WATCH.leave(scope)
            if not own(scope):
                raise


def own(scope: Scope) -> bool:
    """Whether a LimitExceeded just caught was `scope`'s (else an outer scope's)."""
    return bool(scope.fired)


@contextmanager
def envelope(factor: float | None, base_s: float,
             on_stop: Callable[[str], object]) -> Iterator[None]:
    """Run one variant within its cost envelope: stopped once it runs past `factor` times its
    base case's `base_s` seconds (and ENVELOPE_FLOOR_S); `on_stop(note)` then records it and
    the run goes on.  factor None or 0: not watched."""
    if not factor:
        yield
        return
    allowed = max(factor * base_s, ENVELOPE_FLOOR_S)
    scope = Scope("envelope", deadline=time.monotonic() + allowed)
    try:
        with watched(scope):
            yield
    except LimitExceeded as exc:
        if not own(scope) or by_alarm(exc):
            raise  # the run's own limit, passing through this variant
        on_stop(f"stopped after {allowed:.3g} s: more than {factor:g}x the base case's "
                f"{base_s:.3g} s")


def alarm_available() -> bool:
    """Whether `alarm` can keep a deadline here: the main thread, setitimer (not Windows), and
    a SIGALRM handler that can be put back (one installed from C reads as None)."""
    return (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) is not None)


def importing(frame: FrameType | None) -> bool:
    """Whether `frame` or a caller of it is importing a module."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


@contextmanager
def alarm(scope: Scope, seconds: float) -> Iterator[None]:
    """Raise LimitExceeded in the main thread `seconds` from now, even in a blocking wait
    (`scope.fired` becomes "timeout"), though not inside an import (tried again a poll later:
    a module left half imported would break every later check).  The previous SIGALRM handler
    and ITIMER_REAL timer are put back afterwards, the timer with what was left of it (at
    least a microsecond, so one that came due meanwhile fires then; it cannot fire during
    the block).  Only where alarm_available()."""
    armed = [True]

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if not armed[0]:
            return  # the block is over
        if importing(frame):  # a module half imported would break every later check
            signal.setitimer(signal.ITIMER_REAL, MEMORY_POLL_S)
            return
        with WATCH.cond:
            if scope.pending:  # the memory limit's exception, stuck behind a blocking call
                scope.pending = False
                _set_async_exc(scope.tid, None)
            scope.fired = scope.fired or "timeout"
        raise LimitExceeded("timeout")

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)
            if old_delay > 0:
                left = max(old_delay - (time.monotonic() - started), 1e-6)
                signal.setitimer(signal.ITIMER_REAL, left, old_interval)

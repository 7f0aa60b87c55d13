"""Worker processes spawned ahead of need, so that their start (an interpreter, then torch: a
second and a half) overlaps with the parent's own (parsing options, importing torch, loading
specs) instead of following it.  On Linux the workers are forks of one fork server that
imported torch once (gradlab.checks.run.forkserver); elsewhere each is a fresh interpreter.

torch-free on purpose: the CLI spawns the warm worker before it imports anything heavy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Protocol

from gradlab.checks.run import forkserver


class WorkerProcess(Protocol):
    """What isolate.Worker uses of a worker's process (subprocess.Popen, ForkedProc)."""

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


#: The fork server of this process's runs (started by the first spawn; see close_server).
SERVER: list[forkserver.ForkServer] = []


def spawn() -> tuple[WorkerProcess, Connection, Connection]:
    """A new worker and the two ends of its pipes: (process, from the worker, to the worker).
    The process is a subprocess.Popen, or a forkserver.ForkedProc with the same poll, wait
    and kill."""
    if forkserver.enabled():
        if not SERVER:
            SERVER.append(forkserver.ForkServer())
        try:
            return SERVER[0].fork()
        except OSError:
            close_server()  # gone or unusable: the next run starts another
    return spawn_interpreter()


def spawn_interpreter() -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """A fresh worker interpreter (it imports torch, then waits for its work) and the two ends
    of its pipes: (process, from the worker, to the worker)."""
    ends, inbox, outbox = forkserver.worker_pipes()
    code = ("import sys; from gradlab.checks.run.child import child_main; "
            "child_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, ends), str(os.getpid())],
                            pass_fds=ends, stdin=subprocess.DEVNULL)
    for fd in ends:
        os.close(fd)
    return proc, inbox, outbox


#: Workers spawned ahead of need (see warm_up), taken by the next Worker.start.
WARM: list[tuple[WorkerProcess, Connection, Connection]] = []


def warm_up(n: int = 1) -> None:
    """Have `n` workers spawned now, each taken by a gradlab.checks.run.isolate.Worker.start."""
    while len(WARM) < n:
        WARM.append(spawn())


def cool_down() -> None:
    """Stop the warm workers no run took (the run ended before it began: a spec's module
    failed to import), so they do not go on importing torch for nothing."""
    close_server()  # first: a forked worker's pid waits for a server that imports torch
    while WARM:
        proc, inbox, outbox = WARM.pop()
        proc.kill()
        proc.wait(5.0)
        inbox.close()
        outbox.close()


def close_server() -> None:
    """Stop the fork server, and with it every worker forked from it (a run's end; the next
    run starts another)."""
    while SERVER:
        SERVER.pop().close()

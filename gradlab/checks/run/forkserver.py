"""Worker processes forked from one process that has already imported torch (Linux).

A fresh worker interpreter spends 1.3 s importing torch before its first item; a run with
`--jobs 4` paid that four times over, and each worker replaced after a crash or a timeout once
more.  Here one fresh interpreter (the fork server) imports torch and gradlab's checks, and
every worker is a fork of it, ready in about 15 ms.

Fork is safe here because the server does nothing but import: no CUDA, no OpenMP pool, no
autograd run (a forked child of a process that ran a backward on CUDA cannot use autograd).  Its
only other thread is OpenBLAS's server (numpy, imported by torch), which handles fork itself.
The parent keeps no process object of a worker (the server is its parent): `ForkedProc` asks
the server for its exit status and kills it by pid.  Elsewhere, with GRADLAB_FORKSERVER=0, or
when a fork request cannot be sent, each worker is a fresh interpreter (gradlab.checks.run.warm).

torch-free on the parent's side: the CLI starts the server before it imports anything heavy.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gradlab.checks.run.options import switched_off

#: Set to 0 (or off/false/no) for a fresh interpreter per worker.
FORKSERVER_ENV = "GRADLAB_FORKSERVER"
#: The largest request: the parent's environment travels with each fork.
MAX_MESSAGE = 1 << 20
#: Modules a worker needs, imported by the server once (each fork then has them): torch, the
#: worker's loop and the checks, and what torch imports on the first autograd.grad given
#: grad_outputs (0.3 s; a name that an older torch lacks is skipped).
PRELOAD = ("torch", "gradlab.checks.run.child", "gradlab.checks.run.plan",
           "gradlab.checks.run.runner", "gradlab.envinfo",
           "torch.fx.experimental.symbolic_shapes")


def enabled() -> bool:
    """Whether workers are forked from a fork server here (Linux, not switched off)."""
    return (not switched_off(FORKSERVER_ENV) and sys.platform.startswith("linux")
            and hasattr(socket, "send_fds"))


def worker_pipes() -> tuple[tuple[int, int], Connection, Connection]:
    """The pipes between a parent and a new worker: the worker's two ends (read, write), to
    hand over and then close here, and the parent's (from the worker, to the worker)."""
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    return ((to_child, from_child), Connection(to_parent, writable=False),
            Connection(from_parent, readable=False))


class ForkServer:
    """The parent's handle on one fork server: fork() a worker, ask how one ended."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Ctrl-C is the parent's to handle, from the first line on (the imports take a second)
        code = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "from gradlab.checks.run.forked import server_main; "
                "server_main(int(sys.argv[1]), int(sys.argv[2]))")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()),
                                      str(os.getpid())],
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = mine
        # replies come in request order: each request gets a ticket, and a reply read while
        # waiting for a later one is kept until its ticket is asked for
        self.sent = 0
        self.read = 0
        self.replies: dict[int, Any] = {}

    def ask(self, msg: tuple[Any, ...], fds: tuple[int, ...] = ()) -> int:
        """Send one request; its ticket (OSError when the server is gone)."""
        socket.send_fds(self.sock, [pickle.dumps(msg)], list(fds))
        self.sent += 1
        return self.sent - 1

    def answer(self, ticket: int) -> Any:
        """The reply to request `ticket` (EOFError when the server is gone)."""
        while ticket not in self.replies:
            data = self.sock.recv(MAX_MESSAGE)
            if not data:
                raise EOFError("the fork server is gone")
            self.replies[self.read] = pickle.loads(data)
            self.read += 1
        return self.replies.pop(ticket)

    def fork(self) -> tuple[ForkedProc, Connection, Connection]:
        """A worker forked from the server and the two ends of its pipes, as warm.spawn gives
        them: (process, from the worker, to the worker).  The request is sent now and its pid
        read when first needed, so a worker asked for while the server still imports torch
        costs the caller nothing."""
        ends, inbox, outbox = worker_pipes()
        try:
            ticket = self.ask(("fork", str(Path.cwd()), dict(os.environ)), ends)
        except OSError:
            # the server is gone, or the environment is past a message's size: the caller
            # starts a fresh interpreter instead (warm.spawn)
            inbox.close()
            outbox.close()
            raise
        finally:
            for fd in ends:
                os.close(fd)  # the server holds its own copies until it has forked
        return ForkedProc(self, ticket), inbox, outbox

    def close(self) -> None:
        """Stop the server; its workers die with it (PR_SET_PDEATHSIG)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5.0)
        self.sock.close()


class ForkedProc:
    """A forked worker, with the part of subprocess.Popen that isolate.Worker uses."""

    def __init__(self, server: ForkServer, ticket: int) -> None:
        self.server = server
        self.ticket: int | None = ticket
        self._pid: int | None = None
        #: the exit code once known: negative for a signal, as Popen has it.
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        """The worker's pid (None when the server could not fork it)."""
        if self._pid is None and self.ticket is not None:
            try:
                self._pid = self.server.answer(self.ticket)
            except (OSError, EOFError):
                self.returncode = 1
            self.ticket = None
        return self._pid

    def poll(self) -> int | None:
        """The exit code, or None while the worker runs."""
        if self.returncode is not None:
            return self.returncode
        pid = self.pid
        if pid is None:
            return self.returncode
        try:
            self.returncode = self.server.answer(self.server.ask(("poll", pid)))
        except (OSError, EOFError):
            # the server is gone, and its workers with it (PR_SET_PDEATHSIG)
            self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit code once the worker has ended (subprocess.TimeoutExpired past `timeout`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self._pid}", timeout or 0.0)
            time.sleep(0.005)
        return code

    def kill(self) -> None:
        """SIGKILL the worker (nothing when it has ended)."""
        if self.poll() is None and self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)

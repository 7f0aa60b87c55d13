"""The fork server's side of gradlab.checks.run.forkserver: import once, then fork workers.

Runs in its own interpreter (started by forkserver.ForkServer); a forked child becomes a worker
(child.child_main) and never returns into the server's loop.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import signal
import socket
import sys
import warnings

from gradlab.checks.run.child import child_main, die_with_parent
from gradlab.checks.run.forkserver import MAX_MESSAGE, PRELOAD


def server_main(sock_fd: int, parent: int) -> None:
    """Entry point of the fork server: import, then fork workers until the parent is gone."""
    die_with_parent(parent)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()  # what every worker shares: no collector pass copies its pages in each one
    sock = socket.socket(fileno=sock_fd)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        except OSError:
            return
        if not data:
            return  # the parent closed its end
        msg = pickle.loads(data)
        reply = fork_worker(sock, fds, *msg[1:]) if msg[0] == "fork" else exit_code(msg[1])
        try:
            sock.send(pickle.dumps(reply))
        except OSError:
            return


def fork_worker(sock: socket.socket, fds: list[int], cwd: str, env: dict[str, str]) -> int:
    """Fork one worker on the pipe ends `fds`; its pid (in the server)."""
    with warnings.catch_warnings():
        # Python 3.12+ warns on fork with threads: the only one here is OpenBLAS's (see top)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        sock.close()
        code = 1
        try:
            with contextlib.suppress(OSError):
                os.chdir(cwd)  # (a folder removed since: the worker stays in the server's)
            os.environ.clear()
            os.environ.update(env)  # the parent's now: it may differ from the server's start
            child_main(fds[0], fds[1], os.getppid())
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()  # as a fresh worker interpreter would show it
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)  # never back into the server's loop
    for fd in fds:
        os.close(fd)  # the worker's alone now: its death closes the parent's ends
    return pid


def exit_code(pid: int) -> int | None:
    """Worker `pid`'s exit code (reaped), None while it runs; negative for a signal."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -signal.SIGKILL  # not a child of this server (already reaped)
    return None if done == 0 else os.waitstatus_to_exitcode(status)

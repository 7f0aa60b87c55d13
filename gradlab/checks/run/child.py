"""The worker's side of gradlab.checks.run.isolate: a process that rebuilds the parent's plan
and runs the items it is sent, reporting rows and progress back (progress.Reporter).  Started
by a fork of the fork server (forked.py) or as a fresh interpreter (warm.spawn).
"""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from gradlab.checks.run.progress import Reporter
from gradlab.exitnoise import quiet_triton_exit

#: prctl option: the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1
#: The message that gives a kept worker the targets of another run (see Worker.stop).
RELOAD = "reload"


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
    quiet_triton_exit()  # a worker left to exit (not killed) prints no nanobind leak report
    import torch  # (the slow part of a start: done while the parent sets up)

    prime_autograd(torch)

    try:
        sys.path[:] = inbox.recv()  # the parent's, so `module:attr` resolves alike
        serve(inbox, outbox, inbox.recv_bytes())
    except (EOFError, BrokenPipeError):
        pass  # the parent is gone (or never needed this warm worker): nothing left to do


def prime_autograd(torch: Any) -> None:
    """Run one tiny backward given a grad_output, at the worker's start: torch's first
    autograd.grad with grad_outputs imports torch.fx's symbolic shapes (0.3 s here), which
    would otherwise count against the first item's timeout and seconds."""
    x = torch.zeros(1, requires_grad=True)
    torch.autograd.grad(x * 2, x, torch.ones(1))


def serve(inbox: Connection, outbox: Connection, payload: bytes) -> None:
    """The worker: rebuild the plan, then run the items it is sent until its pipe closes (the
    parent is gone) or it is killed (Worker.stop: it holds nothing to save).

    The worker, not its parent, imports torch and the checks: the parent sends targets and
    options, and gets the run's environment record back with "ready".
    """
    from gradlab.checks.run.runner import item_rows
    from gradlab.envinfo import environment
    from gradlab.torchstate import intra_op_threads

    loaded = _loaded(outbox, payload)
    if loaded is None:
        return
    items, options = loaded
    gc.freeze()  # torch and the targets live as long as the worker: no full passes over them
    # plain strings: torch.__version__ is torch's own str type, which the parent could only
    # unpickle by importing torch
    env = {k: str(v) if isinstance(v, str) else v for k, v in
           environment(seed=options.seed).items()}
    reporter = Reporter(outbox)  # the rows so far and the step, as they change (progress.py)
    reporter.send(("ready", len(items), env))
    with intra_op_threads(options.threads):
        while True:
            msg = inbox.recv()
            if msg == RELOAD:  # a kept worker, given the next run's targets (Worker.start)
                sys.path[:] = inbox.recv()
                loaded = _loaded(outbox, inbox.recv_bytes())
                if loaded is None:
                    return
                items, options = loaded
                reporter.send(("ready", len(items), env))
                continue
            index, item_options = msg
            with reporter.item(index):
                rows = item_rows(items[index], item_options)
            reporter.send(("rows", index, rows))


def _loaded(outbox: Connection, payload: bytes) -> tuple[list[Any], Any] | None:
    """The work items the parent's targets and options make here, and the options; None when
    they cannot be rebuilt in this process (said to the parent as "unloadable", with the
    error): a module the parent made at import time (stub packages in sys.modules) is not
    importable here."""
    from gradlab.checks.run.plan import plan

    try:
        targets, options = pickle.loads(payload)
        return list(plan(targets, options)), options
    except Exception as exc:
        outbox.send(("unloadable", f"{type(exc).__name__}: {exc}".splitlines()[0]))
        return None

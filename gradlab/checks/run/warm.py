"""Worker processes spawned ahead of need, so that their start (an interpreter, then torch: a
second and a half) overlaps with the parent's own (parsing options, importing torch, loading
specs) instead of following it.

torch-free on purpose: the CLI spawns the warm worker before it imports anything heavy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection


def spawn() -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """A fresh worker interpreter (it imports torch, then waits for its work) and the two ends
    of its pipes: (process, from the worker, to the worker)."""
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    code = ("import sys; from gradlab.checks.run.isolate import child_main; "
            "child_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(to_child), str(from_child),
                             str(os.getpid())],
                            pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL)
    os.close(to_child)
    os.close(from_child)
    return proc, Connection(to_parent, writable=False), Connection(from_parent, readable=False)


#: Workers spawned ahead of need (see warm_up), taken by the next Worker.start.
WARM: list[tuple[subprocess.Popen[bytes], Connection, Connection]] = []


def warm_up(n: int = 1) -> None:
    """Have `n` workers spawned now, each taken by a gradlab.checks.run.isolate.Worker.start."""
    while len(WARM) < n:
        WARM.append(spawn())


def cool_down() -> None:
    """Stop the warm workers no run took (the run ended before it began: a spec's module
    failed to import), so they do not go on importing torch for nothing."""
    while WARM:
        proc, inbox, outbox = WARM.pop()
        proc.kill()
        proc.wait(5.0)
        inbox.close()
        outbox.close()

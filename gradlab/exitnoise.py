"""Quiet interpreter exits after Triton: libtriton's nanobind bindings print a leak report
("nanobind: leaked 513 functions!", some 60 lines) to stderr as the interpreter finalizes,
in every process that imported Triton (torch.compile's capability check, the Triton kernels),
whatever the process did.  nanobind's switch for it, `nb::set_leak_warnings(false)`, is C++
only, and Triton neither exposes it to Python nor exports the symbol; Triton's own compile
workers silence it by pointing stderr at /dev/null at exit (triton/_compile_warmup_pool.py),
and so does this, only in processes that loaded libtriton and only once the atexit handlers
registered after `quiet_triton_exit` have run (atexit runs the last registered first): every
traceback and message of the run itself is printed before.

Registered by gradlab's own processes only (the CLI, its workers, the test suite's conftest),
and by gradlab.kernels.involution_triton, which imports Triton; never by `import gradlab`, so
the API does not touch a user's stderr at exit.
"""

from __future__ import annotations

import atexit
import os
import sys

#: The extension module whose nanobind teardown prints the leak report.
LIBTRITON = "triton._C.libtriton"

_registered = False


def quiet_triton_exit() -> None:
    """At this process's exit, send stderr to /dev/null if libtriton was loaded (once)."""
    global _registered
    if not _registered:
        _registered = True
        atexit.register(_silence_if_triton)


def _silence_if_triton() -> None:
    if LIBTRITON not in sys.modules:
        return
    try:
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except (OSError, ValueError):
        pass  # stderr already closed: nothing will be printed anyway

"""Functions gradlab must stop or survive without taking the caller down: one that segfaults in
backward (an extension's crash), ones that run away only at a large magnitude (a solver whose
step count follows the values: the magnitude variant), one that allocates without bound, ones
blocked in a wait, and a correct one beside them (tests/test_guard.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import queue
import signal
import threading
import time
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

#: Bytes one step of Hoards' backward keeps (it never stops by itself).
HOARD_STEP = 16 << 20
#: The longest a blocking backward waits: far past any test's timeout, so only a timeout that
#: fails to interrupt it lets it end (and the test then fails, in a minute, not in an hour).
BLOCK_S = 60.0


class Double(Function):
    """Correct: y = 2x."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


def double_reference(x: Tensor) -> Tensor:
    return x * 2


class ScaledByEnv(Function):
    """y = x * float($GUARD_SCALE): correct against double_reference where the process that
    runs it has GUARD_SCALE=2 (a worker must get its parent's environment of now)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        import os

        ctx.scale = float(os.environ["GUARD_SCALE"])
        return x * ctx.scale

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad * ctx.scale


class SegfaultsInBackward(Function):
    """y = 2x, with a backward that reads address 0 (SIGSEGV), as a broken extension would."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        ctypes.string_at(0)
        return g * 2


class Hoards(Function):
    """y = 2x, with a backward that allocates without bound (it would take the machine)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        kept = []
        while True:
            kept.append(torch.ones(HOARD_STEP // 8, dtype=torch.float64))


class InterruptedInFloat32(Function):
    """y = 2x, correct, whose float32 backward is interrupted as Ctrl-C would (KeyboardInterrupt
    where the user's code runs): the float64 rows are made before it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        if g.dtype == torch.float32:
            raise KeyboardInterrupt
        return g * 2


class Spins(Function):
    """y = 2x, with a backward that never returns (short sleeps in a Python loop)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        while True:
            time.sleep(0.01)


def _sleep() -> None:
    time.sleep(BLOCK_S)


def _lock() -> None:
    lock = threading.Lock()
    lock.acquire()
    lock.acquire(timeout=BLOCK_S)  # held: by this very thread


def _queue() -> None:
    with contextlib.suppress(queue.Empty):
        queue.Queue().get(timeout=BLOCK_S)  # nothing is ever put


#: The blocking waits a backward may sit in (issue 30, item 6): C calls the watchdog's
#: asynchronous exception cannot interrupt.
WAITS = {"sleep": _sleep, "lock": _lock, "queue": _queue}


def blocks_in_float32(wait: str) -> type[Function]:
    """y = 2x, correct, whose float32 backward blocks in `wait` (WAITS) for BLOCK_S seconds:
    the float64 rows are made before it."""

    class BlocksInFloat32(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            if g.dtype == torch.float32:
                WAITS[wait]()
            return g * 2

    BlocksInFloat32.__name__ = BlocksInFloat32.__qualname__ = f"BlocksIn_{wait}"
    return BlocksInFloat32


def time_is_up() -> None:
    """Bring gradlab.check's timeout forward to now: its deadline in the main thread is a
    SIGALRM timer (gradlab.watchdog.alarm), so the test's stop lands exactly where the Function
    calls this, however slow the machine, with the test's timeout only a safety net."""
    signal.setitimer(signal.ITIMER_REAL, 1e-3)


class RunsOutOfTimeWithMagnitude(Function):
    """y = 2x, correct, whose backward runs out of gradlab.check's time (time_is_up) and then
    spins when max |x| passes 100: in the magnitude variant (1000), after the base case and the
    variants before it."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.scale = float(x.detach().abs().max())
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        if ctx.scale > 100:
            time_is_up()
            while True:
                time.sleep(0.01)
        return g * 2


class RunsOutOfTime(Function):
    """y = 2x whose backward runs out of gradlab.check's time (time_is_up), then spins."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        time_is_up()
        while True:
            time.sleep(0.01)


def envelope_is_up() -> None:
    """End this thread's variant's cost envelope now (gradlab.watchdog's envelope scope), so
    the test's stop lands where the Function calls this, however slow the machine; the
    envelope's floor (ENVELOPE_FLOOR_S) stays at its default, far above a normal variant."""
    from gradlab import watchdog

    with watchdog.WATCH.cond:
        for scope in watchdog.WATCH.scopes:
            if scope.kind == "envelope" and scope.tid == threading.get_ident():
                scope.deadline = 0.0
        watchdog.WATCH.cond.notify()


class RunsAwayWithMagnitude(Function):
    """y = 2x, correct, whose backward never ends when max |x| passes 100 (the magnitude
    variant: 1000), and ends its cost envelope there (envelope_is_up)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.scale = float(x.detach().abs().max())
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        if ctx.scale > 100:
            envelope_is_up()
            while True:
                time.sleep(0.01)
        return g * 2

"""The Python API's guard: `gradlab.check(..., timeout=, max_memory=)` stops a runaway check
(an ODE solver's adjoint growing to gigabytes, a loop that never ends) with an error naming the
check and variant it reached, and keeps the rows measured before it (`CheckLimitError.report`).

The defaults are the CLI's: gradlab.guard.DEFAULT_TIMEOUT_S, and a quarter of the available
memory (gradlab.guard.default_limit, as `--max-memory`).  The API runs in the caller's process,
so the limits are kept in it: the timeout by a signal (SIGALRM) when gradlab.check runs in the
main thread, which stops a backward blocked in time.sleep, a lock's or a queue's wait too, and
otherwise (another thread, Windows) by gradlab.watchdog's thread, which stops Python code but
not a blocking call until it returns (see gradlab.watchdog for what each can and cannot stop);
the memory limit by the watchdog.  The timeout covers the whole call, the memory limit what the
resident memory grows by (read from Linux's /proc: elsewhere only the timeout is kept).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from types import TracebackType
from typing import Any

from gradlab.checks.run.driver import run
from gradlab.checks.run.isolate import picklable
from gradlab.checks.run.options import Options
from gradlab.checks.run.progress import where
from gradlab.errors import ExitCode, GradlabError
from gradlab.guard import default_limit, parse_size
from gradlab.model import Target
from gradlab.results import ERROR, CheckRow, Report
from gradlab.watchdog import (
    ALARM_UNAVAILABLE,
    LimitExceeded,
    Scope,
    alarm,
    alarm_available,
    resident_bytes,
    watched,
)

#: max_memory's default: gradlab.guard.default_limit() when the call starts.
AUTO = "auto"

class CheckLimitError(GradlabError):
    """gradlab.check ran past its time or memory limit and was stopped; `report` holds the rows
    measured before, and an error row (reason time_limit or memory_limit) where it stopped."""

    exit_code = ExitCode.CHECK_FAILED

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def time_limit(timeout: float | None) -> float | None:
    """Seconds the call may run (None or 0: no limit); ValueError for a negative or NaN one."""
    if timeout is None or timeout == 0:
        return None
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout: expected seconds > 0 (None or 0: no limit), got {timeout!r}")
    return float(timeout)


def memory_limit(max_memory: int | str | None) -> int | None:
    """Bytes the call may add to the process's resident memory: "auto" (the CLI's default), a
    size ("300MB", 2**30), None or 0 (no limit); ValueError naming the argument."""
    if max_memory is None or max_memory == 0:
        return None
    if max_memory == AUTO:
        return default_limit()
    if isinstance(max_memory, str):
        try:
            return parse_size(max_memory)
        except ValueError as exc:
            raise ValueError(f"max_memory: {exc}") from None
    if isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory < 0:
        raise ValueError(f"max_memory: expected bytes >= 0, a size such as '8GiB', None or "
                         f"{AUTO!r}, got {max_memory!r}")
    return max_memory


def envelope_factor(cost_envelope: float | None) -> float | None:
    """Options.cost_envelope for gradlab.check(cost_envelope=): None or 0 never stops a
    variant; ValueError for a factor below 1 (a variant would be stopped for being a variant)."""
    if not cost_envelope:
        return None
    if not (math.isfinite(cost_envelope) and cost_envelope >= 1):
        raise ValueError(f"cost_envelope: expected a factor >= 1 (None or 0: never stop a "
                         f"variant), got {cost_envelope!r}")
    return float(cost_envelope)


def isolated_run(targets: Sequence[Target], options: Options, timeout: float | None,
                 max_memory: int | None) -> Report:
    """driver.run in a worker process (gradlab.check(isolate=True)): past `timeout` the parent
    kills the worker, whatever it runs (one long C call, a backward re-entering torch's engine),
    and CheckLimitError carries every row made before and the row naming the step it stopped."""
    why = picklable(targets, options)
    if why:
        raise ValueError(f"isolate=True: the Function, its reference and args must pickle "
                         f"(module-level callables): {why}")
    options = replace(options, isolate=True, jobs=1, timeout=timeout, max_memory=max_memory)
    report = run(targets, options)
    stopped = [r for r in report.rows if r.reason == "time_limit"]
    if not stopped:
        return report
    r = stopped[0]  # the rows measured before it: not it, nor the items it left unrun
    kept = sum(1 for x in report.rows if x is not r and x.reason != "timeout_spent")
    raise CheckLimitError(
        f"gradlab.check({r.op}): stopped by timeout={timeout:g} s in check {r.check}, variant "
        f"{r.variant} ({r.op}/{r.case} {r.dtype} {r.device}); the {kept} row"
        f"{'s' * (kept != 1)} measured before are on this error's .report", report)


def guarded_run(targets: Sequence[Target], options: Options, timeout: float | None = None,
                max_memory: int | str | None = None,
                cost_envelope: float | None = None, isolate: bool = False) -> Report:
    """driver.run within gradlab.check's limits (each checked first: ValueError naming it):
    `timeout` seconds for the whole call, `max_memory` ("auto", a size, bytes) more resident
    memory than the call started with (None or 0: no limit); past one, CheckLimitError naming
    the check and variant, with the partial report.  A variant running `cost_envelope` times
    longer than its base case is stopped (a declared skip, gradlab.watchdog.envelope).  Ctrl-C
    returns the partial report (`interrupted`), as driver.run does."""
    timeout, max_memory = time_limit(timeout), memory_limit(max_memory)
    options = replace(options, cost_envelope=envelope_factor(cost_envelope))
    if isolate:
        return isolated_run(targets, options, timeout, max_memory)
    rows: list[CheckRow] = []
    env: dict[str, Any] = {}
    where = [""]  # the item running: 'op/case dtype device' (driver's heartbeat)
    rss = resident_bytes()
    # the deadline is the signal's where one can be sent (it interrupts blocking waits too),
    # else the watchdog's
    signalled = timeout is not None and alarm_available()
    scope = Scope("run", deadline=time.monotonic() + timeout if timeout and not signalled
                  else None, max_rss=rss + max_memory if max_memory and rss is not None else None)
    try:
        with watched(scope), alarm(scope, timeout) if signalled and timeout else nullcontext():
            return run(targets, options, on_rows=rows.extend, on_env=env.update,
                       on_wait=lambda label, _s: where.__setitem__(0, label))
    except LimitExceeded as exc:
        error = limit_error(exc, scope, rows, env, where[0], timeout, rss)
        if scope.fired == "timeout" and not signalled:
            error.args = (f"{error}; {ALARM_UNAVAILABLE}",)
        raise error from None


def interrupted_at(tb: TracebackType | None) -> tuple[Any, str, str]:
    """(the case context, check, variant) a limit interrupted, read off its traceback
    (gradlab.checks.run.progress.where: the innermost CaseContext `ctx` holds the rows so far)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    ctx, at = where(frames)
    return ctx, at.check, at.variant


def limit_error(exc: LimitExceeded, scope: Scope, rows: list[CheckRow], env: dict[str, Any],
                where: str, timeout: float | None, rss: int | None) -> CheckLimitError:
    """The error for a limit that stopped the run: its message names the op, case, check and
    variant; its report keeps every row made before, the interrupted item's too."""
    ctx, check, variant = interrupted_at(exc.__traceback__)
    op_case, kind, device = [*where.split(" "), "", "", ""][:3]
    op, _, case = op_case.partition("/")
    dtype = kind if kind != "numerical" else ""
    if ctx is not None:
        op, case, dtype, device = ctx.op.name, ctx.case.name, ctx.dtype, ctx.device
        rows = rows + list(ctx.rows)
    check = check or ("jacobian" if kind == "numerical" else "gradient")
    if scope.fired == "memory" and scope.max_rss is not None:
        limit, reason = (f"max_memory={size_words(scope.max_rss - (rss or 0))} (resident "
                         f"memory {size_words(scope.rss)})"), "memory_limit"
    else:
        limit, reason = f"timeout={timeout:g} s", "time_limit"
    report = Report(rows=[*rows, CheckRow(op, case, dtype, device, variant, check, ERROR,
                                          reason=reason, note=f"stopped by {limit}")], env=env)
    kept = (f"the {len(rows)} row{'s' * (len(rows) != 1)} measured before are on this "
            "error's .report" if rows else "no row was measured before")
    message = (f"gradlab.check({op}): stopped by {limit} in check {check}, variant {variant} "
               f"({op}/{case} {dtype} {device}); {kept}")
    return CheckLimitError(message, report)


def size_words(n: int) -> str:
    """Bytes as '300 MiB' / '1.5 GiB'."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} B"

"""Gradient checks inside a test suite: `assert_gradients` raises an AssertionError that reads as
a diagnosis (likely cause, message and worst elements per failing row, grouped by check).

>>> import torch
>>> from gradlab.testing import assert_gradients
>>> x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
>>> report = assert_gradients(torch.exp, [x], reference=torch.exp)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradlab.errors import ExitCode
from gradlab.render.diagnosis import counts, diagnosis
from gradlab.results import FAIL, Report, exit_code


def failure_text(report: Report, what: str) -> str:
    """Why `report` (of `what`) did not pass: totals, then each failing check's rows."""
    n = counts(report.rows)
    head = (f"gradlab: {what}: {n[FAIL]} failed and {n['error']} errored of "
            f"{len(report.rows)} rows")
    parts = [head]
    if report.truncated:
        parts.append("the budget ran out before every case ran (missing is not passed)")
    if not report.rows:
        parts.append("nothing was checked (no case ran)")
    if exit_code(report) == ExitCode.INTERNAL:
        parts += [r.traceback for r in report.internal_errors[:1]]
    body = diagnosis(report.rows)
    return "\n".join(parts) + (f"\n\n{body}" if body else "")


def assert_gradients(fn: Callable[..., Any], args: Sequence[Any], *,
                     reference: Callable[..., Any] | None = None, **options: Any) -> Report:
    """`gradlab.check(fn, args, reference=..., **options)`, raising AssertionError unless it
    passed; returns the Report when it did.  The options are gradlab.check's (second_order,
    dtypes, checks, variants, mode, seed, ...)."""
    from gradlab import check

    report = check(fn, args, reference=reference, **options)
    if exit_code(report) != ExitCode.OK:
        name = options.get("name") or getattr(fn, "__name__", type(fn).__name__)
        raise AssertionError(failure_text(report, str(name)))
    return report

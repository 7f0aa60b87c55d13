"""Gradient checks inside a test suite: `assert_gradients` raises an AssertionError that reads as
a diagnosis: the run's numbers, then each finding once (likely cause, where it shows: checks,
dtypes and every variant by name, the localisation of its most telling row), short whatever
the number of variants a bug fails.

>>> import torch
>>> from gradlab.testing import assert_gradients
>>> x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
>>> report = assert_gradients(torch.exp, [x], reference=torch.exp)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradlab.errors import ExitCode
from gradlab.render.diagnosis import diagnosis
from gradlab.results import Report, exit_code
from gradlab.results.summary import count_words, summarize
from gradlab.spec.imports import function_name


def failure_text(report: Report, what: str) -> str:
    """Why `report` (of `what`) did not pass: the run's numbers, then each finding once."""
    summary = summarize(report.rows)
    verdict = "INTERRUPTED" if report.interrupted else "FAILED"
    parts = [f"gradlab: {what}: {verdict}: {count_words(summary)}"]
    if report.truncated:
        parts.append("the budget ran out before every case ran (missing is not passed)")
    if not report.rows:
        parts.append("nothing was checked (no case ran)")
    elif not any(r.ran for r in report.rows):
        parts.append("nothing was checked (every check was skipped)")
    if exit_code(report) == ExitCode.INTERNAL:
        parts += [r.traceback for r in report.internal_errors[:1]]
    body = diagnosis(summary)
    return "\n".join(parts) + (f"\n\n{body}" if body else "")


def assert_gradients(fn: Callable[..., Any], args: Sequence[Any], *,
                     reference: Callable[..., Any] | None = None, **options: Any) -> Report:
    """`gradlab.check(fn, args, reference=..., **options)`, raising AssertionError unless it
    passed; returns the Report when it did.  The options are gradlab.check's (second_order,
    dtypes, checks, variants, mode, seed, ...); the op is named after the Function's class
    unless `name` says otherwise."""
    __tracebackhide__ = True  # pytest shows the test's line, not this frame
    from gradlab import check

    name = options.pop("name", None) or function_name(fn)
    report = check(fn, args, reference=reference, name=name, **options)
    if exit_code(report) != ExitCode.OK:
        case = ", ".join(dict.fromkeys(r.case for r in report.rows)) or "example"
        raise AssertionError(failure_text(report, f"{name} (case {case})"))
    return report

"""`str(report)` is the terminal's summary in words (issue 23 item 9): the verdict line the
terminal prints, with the run's numbers as every output counts them, then a line per finding;
not a dataclass dump of every row."""

from __future__ import annotations

import io
import subprocess
import sys

import torch
from rich.console import Console

import gradlab
from gradlab.render.check import render_check


class TripleSquare(torch.autograd.Function):
    """x**2 whose backward is 3x too large: one finding, in the gradient and the jacobian."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)  # type: ignore[attr-defined]
        return x * x

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return 3 * grad * x  # type: ignore[no-any-return]


def test_str_of_a_report_is_the_terminal_summary_in_words() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(TripleSquare, [x], reference=lambda t: t * t, variants=False)
    text = str(report)
    lines = text.splitlines()
    console = Console(file=io.StringIO(), width=1000, color_system=None)
    render_check(report, console)
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    # the first line is the terminal's own verdict line, word for word
    assert lines[0].startswith("FAILED: 1 op, 1 case, ") and lines[0] in terminal
    # then one line per finding: the status, where, the likely cause, its checks and variants
    assert lines[1:] == [
        "  FAIL TripleSquare/example input 0: constant_factor (finding 1 of 1; gradient, "
        "jacobian; variants: base)"]
    assert repr(report) == text
    assert "CheckRow(" not in text and "rows=[" not in text and len(text) < 600


def test_a_passing_report_says_passed_in_one_line() -> None:
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(lambda t: t.sin(), [x], reference=torch.sin, variants=False)
    (line,) = str(report).splitlines()
    assert line.startswith("PASSED: 1 op, 1 case, ") and "0 findings" in line


def test_print_report_in_a_user_script() -> None:
    """What a user sees who prints the report a script got back."""
    code = ("import torch, gradlab\n"
            "x = torch.rand(3, dtype=torch.float64, requires_grad=True)\n"
            "print(gradlab.check(lambda t: t.exp(), [x], reference=torch.exp, variants=False))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("PASSED: 1 op, 1 case")


def test_a_report_without_a_reference_says_so_in_words() -> None:
    """Issue 30, item 7: not only the reason code no_reference_base (the terminal's sentence)."""
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(lambda t: t.sin(), [x], variants=False)
    lines = str(report).splitlines()
    assert lines[0].startswith("PASSED: 1 op, 1 case, ")
    assert lines[-1].startswith("no reference for ") and "forward values not verified" in lines[-1]
    console = Console(file=io.StringIO(), width=1000, color_system=None)
    render_check(report, console)
    assert lines[-1] in console.file.getvalue()  # type: ignore[attr-defined]

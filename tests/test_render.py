"""Captured screens at 80, 100 and 160 columns: every line fits (a command aside), every number
is printed whole, and one bug is one block however many variants and dtypes it fails in."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.bench.compare import CompareRow
from gradlab.render.bench import fmt_time, render_bench, render_compare
from gradlab.render.check import group_rows, render_check
from gradlab.results import CheckRow, Report
from gradlab.results.bench import BenchReport, BenchRow

WIDTHS = (80, 100, 160)


def screen(render: Any, width: int) -> list[str]:
    console = gradlab_console(width)
    render(console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def gradlab_console(width: int) -> Any:
    from rich.console import Console

    # a terminal's screen (off one, the verdict and summary lines are never wrapped)
    return Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False,
                   force_terminal=True)


def too_long(lines: list[str], width: int) -> list[str]:
    """Lines wider than the screen; a command line is allowed to be (it must stay whole)."""
    return [ln for ln in lines if len(ln) > width and not ln.startswith("  gradlab ")]


class ScaleWrong(Function):
    """BROKEN: y = 3 x w + b, backward returns 2 g w for x (a constant factor, in every variant
    and dtype) and the right gradients for w and b."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return 3 * x * w + b

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return 2 * g * w, 3 * g * x, g


@pytest.fixture(scope="module")
def broken_report() -> Report:
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    return gradlab.check(ScaleWrong, [x, w, b], reference=lambda x, w, b: 3 * x * w + b,
                         dtypes=["float64", "float32"])


@pytest.mark.parametrize("width", WIDTHS)
def test_check_screen_fits_and_keeps_numbers_whole(broken_report: Report, width: int) -> None:
    lines = screen(lambda c: render_check(broken_report, c), width)
    assert not too_long(lines, width), too_long(lines, width)
    text = "\n".join(lines)
    for g in group_rows(broken_report.rows):
        if g["max_abs_err"] is not None:
            assert f"{g['max_abs_err']:.2e}" in text  # the exponent is never cut
    assert "…" not in text


def test_one_bug_in_many_variants_and_dtypes_is_one_block(broken_report: Report) -> None:
    failing = [r for r in broken_report.rows if r.failed]
    variants = {r.variant for r in failing}
    assert len(variants) >= 12 and {r.dtype for r in failing} == {"float64", "float32"}
    lines = screen(lambda c: render_check(broken_report, c), 100)
    blocks = [ln for ln in lines if re.match(r"(FAIL|ERROR) ", ln)]
    # the gradient and jacobian rows share one cause on one input: one block
    assert len(blocks) == 1, blocks
    assert sum("worst elements:" in ln for ln in lines) == 1
    (where,) = [ln for ln in lines if ln.startswith("  where: ")]
    assert "gradient, jacobian" in where and "float64, float32" in where
    assert f"{len(variants)} of " in where and "variants" in where
    assert any(ln.startswith("failing cases (1): ScaleWrong/example") for ln in lines)


def bench_rows() -> list[BenchRow]:
    rows = []
    for case in ("rednet_k7_g4", "stride2_layer_long_name"):
        for phase, t in (("forward", 1.234e-3), ("backward", 2.5e-1), ("forward_backward", 7.5)):
            rows.append(BenchRow("involution", case, "float32", "cpu", "custom", phase,
                                 median_s=t, iqr_s=t / 50, min_s=t * 0.9, n=12, speedup=7.33,
                                 speedup_low=7.01, speedup_high=7.52, significant=True,
                                 saved_bytes=26_083_000, first_call_s=t * 3))
            rows.append(BenchRow("involution", case, "float32", "cpu", "reference", phase,
                                 median_s=t * 7.33, iqr_s=t / 40, min_s=t * 7, n=12,
                                 saved_bytes=334_000_000, first_call_s=t * 9))
    return rows


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_screen_fits_and_keeps_numbers_whole(width: int) -> None:
    report = BenchReport(rows=bench_rows(), env={"torch_version": "2.13.0"})
    lines = screen(lambda c: render_bench(report, c), width)
    assert not too_long(lines, width), too_long(lines, width)
    text = "\n".join(lines)
    for r in report.rows:
        assert fmt_time(r.median_s) in text
    assert "7.33" in text and "…" not in text
    assert "peak mem" not in text  # measured on CUDA only: no column of dashes on a CPU run


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_screen_fits_and_keeps_numbers_whole(width: int) -> None:
    rows = [CompareRow(op, "stride2_layer_long_name", "float32", "cpu", phase,
                       old_custom_s=0.0412, new_custom_s=0.0493, old_reference_s=0.302,
                       new_reference_s=0.3011, old_ratio=0.1364, new_ratio=0.1637,
                       change_pct=19.66, ratio_low=1.153, ratio_high=1.241, significant=True,
                       regression=True, note="REGRESSION; resampled in new run")
            for op in ("involution", "modconv") for phase in ("forward", "forward_backward")]
    lines = screen(lambda c: render_compare(rows, 10.0, c), width)
    assert not too_long(lines, width), too_long(lines, width)
    text = "\n".join(lines)
    assert "+19.7%" in text and "49.3 ms" in text and "…" not in text
    assert "REGRESSION: 4 of 4 phases" in text and "custom medians moved +19.7%" in text


def test_log_progress_says_an_op_is_done_when_the_next_one_starts() -> None:
    from gradlab.render.progress import LogProgress

    console = gradlab_console(100)
    log = LogProgress(console, clock=iter(range(100)).__next__)
    log.rows_done([CheckRow("quick", "c", "float64", "cpu", v, "forward", "pass")
                   for v in ("base", "noncontiguous[0]", "transposed[0]")])
    log.waiting("quick/other float64 cpu", 1.0)  # the same op goes on: nothing yet
    assert console.file.getvalue() == ""  # type: ignore[attr-defined]
    log.waiting("hangs/base float64 cpu", 1.0)  # the next op runs (and may never end)
    # (the whole count sentence does not fit 100 columns: the counts that are not zero)
    assert console.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "checked quick: 1 case, 1 check passed, 3 rows (1.0 s)"]


def test_a_line_says_its_absolute_error_at_the_case_own_scale() -> None:
    # a float32 exp's magnitude variant runs near 3e38: an absolute error of 5e16 there is
    # relative 2e-22, and said as "max abs err 5e16" it reads as a huge error of the case
    rows = [CheckRow("exp", "matrix", "float32", "cpu", "base", "forward", "pass",
                     max_abs_err=3e-7, max_rel_err=8e-8),
            CheckRow("exp", "matrix", "float32", "cpu", "magnitude", "forward", "pass",
                     max_abs_err=5.07e16, max_rel_err=1.6e-22),
            CheckRow("exp", "matrix", "float32", "cpu", "noncontiguous[0]", "forward", "pass",
                     max_abs_err=4e-7, max_rel_err=9e-8)]
    (g,) = group_rows(rows)
    assert (g["max_abs_err"], g["max_rel_err"]) == (4e-7, 9e-8)
    text = "\n".join(screen(lambda c: render_check(Report(rows=rows), c), 100))
    assert "5.07e+16" not in text and "4.00e-07" in text, text


def test_off_a_terminal_the_verdict_and_summary_lines_are_never_wrapped(
        broken_report: Report) -> None:
    from rich.console import Console

    from gradlab.render.check import render_verdict, verdict_line

    log = Console(width=40, file=io.StringIO(), color_system=None, force_terminal=False)
    render_verdict(broken_report, log)
    render_bench(BenchReport(rows=bench_rows()), log)
    lines = log.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert verdict_line(broken_report, False) in lines, lines
    assert any(ln.startswith("12 rows, 0 errors; custom vs reference: ") and
               ln.endswith("no significant difference") for ln in lines), lines

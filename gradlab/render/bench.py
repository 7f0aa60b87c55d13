"""Bench results in the terminal: the run's table and summary, the compare table and verdict.

The only bench module that imports rich; gradlab.bench hands it plain data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradlab.bench.compare import CompareRow
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.status import ERROR, PASS, SKIP

_STATUS_STYLE = {PASS: "green", ERROR: "bold magenta", SKIP: "yellow"}


def fmt_time(seconds: float | None) -> str:
    """'12.3 ms', '45.6 µs', '1.23 s'; '-' for None."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_bytes(n: int | None) -> str:
    """'16.0 MiB'; '-' for None."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def fmt_speedup(r: BenchRow) -> Text:
    """'1.23× [1.10, 1.35]', dim when the interval spans 1."""
    if r.speedup is None:
        return Text("-")
    text = f"{r.speedup:.2f}× [{r.speedup_low:.2f}, {r.speedup_high:.2f}]"
    return Text(text, style="bold" if r.significant else "dim")


def env_line(env: Mapping[str, Any]) -> str:
    """One line naming what the numbers depend on most."""
    parts = [f"torch {env.get('torch_version')}"]
    if env.get("cuda_version"):
        parts.append(f"CUDA {env['cuda_version']} cuDNN {env.get('cudnn_version')}")
    parts += [str(env.get("device_name")), f"{env.get('num_threads')} threads",
              f"gradlab {env.get('gradlab_version')}"
              + (f" ({env['git_commit']})" if env.get("git_commit") else "")]
    return " · ".join(parts)


def bench_table(report: BenchReport, title: str = "gradlab bench") -> Table:
    """One line per op, case, dtype, device, implementation and phase."""
    table = Table(title=title, caption=env_line(report.env), header_style="bold")
    right = {"median", "IQR", "min", "n", "saved", "peak mem", "first call"}
    keys = ("op", "case", "dtype", "device", "impl", "phase")
    widths = {k: max([len(k), *(len(str(getattr(r, k))) for r in report.rows)]) for k in keys}
    for col in (*keys, "median", "IQR", "min", "n", "noisy", "speedup [95% CI]", "saved",
                "peak mem", "first call"):
        # the columns that say which row is which are never cut short
        table.add_column(col, justify="right" if col in right else "left",
                         no_wrap=col.startswith("speedup") or col in keys,
                         min_width=widths.get(col))
    for r in report.rows:
        if r.status != PASS:
            table.add_row(r.op, r.case, r.dtype, r.device, r.impl, r.phase,
                          Text(r.status, style=_STATUS_STYLE.get(r.status, "")), "", "", "", "",
                          "", "", fmt_bytes(r.saved_bytes), fmt_bytes(r.peak_mem_bytes),
                          fmt_time(r.first_call_s))
            continue
        table.add_row(r.op, r.case, r.dtype, r.device, r.impl, r.phase, fmt_time(r.median_s),
                      fmt_time(r.iqr_s), fmt_time(r.min_s), str(r.n),
                      Text("noisy", style="yellow") if r.noisy else Text(""),
                      fmt_speedup(r), fmt_bytes(r.saved_bytes), fmt_bytes(r.peak_mem_bytes),
                      fmt_time(r.first_call_s))
    return table


def render_bench(report: BenchReport, console: Console) -> None:
    """Print the table, the error notes and a one-line summary."""
    console.print(bench_table(report))
    for r in report.rows:
        if r.status == ERROR:
            line = Text("ERROR ", style=_STATUS_STYLE[ERROR])
            line.append(f"{r.op} / {r.case} / {r.dtype} / {r.device} / {r.impl} / {r.phase}: ",
                        style="bold")
            line.append(r.note)
            console.print(line)
    custom = [r for r in report.rows if r.speedup is not None]
    faster = sum(1 for r in custom if r.significant and r.speedup and r.speedup > 1)
    slower = sum(1 for r in custom if r.significant and r.speedup and r.speedup < 1)
    summary = (f"{len(report.rows)} rows, {len(report.errors)} errors; custom vs reference: "
               f"{faster} faster, {slower} slower, {len(custom) - faster - slower} "
               "no significant difference")
    if report.interrupted:
        summary += " (interrupted: partial results)"
    console.print(Text(summary, style="bold red" if report.errors else "bold"))


def compare_table(rows: Sequence[CompareRow], threshold: float,
                  title: str = "gradlab compare") -> Table:
    """Side by side: old median, new median, change %, its interval and the verdict."""
    table = Table(title=title, caption=f"regression: slower by more than {threshold:g}% and the "
                                       "95% interval of new/old excludes 1",
                  header_style="bold")
    for col in ("op", "case", "dtype", "device", "impl", "phase", "old median", "new median",
                "change", "new/old [95% CI]", "significant", "note"):
        table.add_column(col, justify="right" if col in ("old median", "new median", "change")
                         else "left")
    for c in rows:
        change = "-" if c.change_pct is None else f"{c.change_pct:+.1f}%"
        ci = ("-" if c.ratio_low is None or c.ratio_high is None
              else f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]")
        style = "bold red" if c.regression else ("green" if c.note == "faster" else "")
        table.add_row(c.op, c.case, c.dtype, c.device, c.impl, c.phase, fmt_time(c.old_median_s),
                      fmt_time(c.new_median_s), Text(change, style=style), ci,
                      "yes" if c.significant else "no", Text(c.note, style=style))
    return table


def render_compare(rows: Sequence[CompareRow], threshold: float, console: Console,
                   env_diff: Sequence[tuple[str, Any, Any]] = ()) -> None:
    """Print the compare table, environment differences and the verdict."""
    console.print(compare_table(rows, threshold))
    for key, old, new in env_diff:
        console.print(Text(f"note: environment differs: {key}: {old!r} -> {new!r}",
                           style="yellow"), soft_wrap=True)
    bad = [c for c in rows if c.regression]
    if bad:
        console.print(Text(f"REGRESSION: {len(bad)} of {len(rows)} rows slower by more than "
                           f"{threshold:g}% (significant)", style="bold red"))
    else:
        console.print(Text(f"OK: no significant regression beyond {threshold:g}% "
                           f"({len(rows)} rows)", style="bold green"))

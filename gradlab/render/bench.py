"""Bench results in the terminal: the run's table and summary, the compare table and verdict.

The only bench module that imports rich; gradlab.bench hands it plain data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradlab.bench.compare import CompareRow
from gradlab.bench.stats import MIN_INTERVAL_SAMPLES
from gradlab.render.tables import Column, fit
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


def ratio_number(v: float) -> str:
    """A ratio >= 1 in three significant digits, thousands grouped: '1.25', '12.3', '3,600'."""
    if v >= 100:
        return f"{round(v):,}"
    return f"{v:.3g}" if v >= 10 else f"{v:.2f}"


def ratio_words(speedup: float) -> str:
    """A speedup (reference time / custom time) in words: '2.10x faster', '3,600x slower';
    never '0.00x', whatever the gap."""
    if not math.isfinite(speedup) or speedup <= 0:
        return f"{speedup:g}x"
    if speedup >= 1:
        return f"{ratio_number(speedup)}x faster"
    return f"{ratio_number(1 / speedup)}x slower"


def ratio_interval(speedup: float, low: float, high: float) -> str:
    """The 95% interval in the direction the speedup is said: '[1.10, 1.40]' for a faster
    one, a slower one's as slowdowns ('[3,500, 3,700]')."""
    if speedup >= 1 or low <= 0 or high <= 0:
        return f"[{ratio_number(low) if low >= 1 else f'{low:.3g}'}, " \
               f"{ratio_number(high) if high >= 1 else f'{high:.3g}'}]"
    return f"[{ratio_number(1 / high) if high <= 1 else f'{1 / high:.3g}'}, " \
           f"{ratio_number(1 / low) if low <= 1 else f'{1 / low:.3g}'}]"


def plain_ratio(v: float) -> str:
    """A ratio without a direction word, never '0.00': '1.25', '0.95', '1/3,600'."""
    if not math.isfinite(v) or v <= 0:
        return f"{v:g}"
    return f"{v:.3g}" if v >= 0.1 else f"1/{ratio_number(1 / v)}"


def speedup_words(r: BenchRow) -> str:
    """'1.25x faster [1.10, 1.40]' where the interval excludes 1; 'no difference [0.95,
    1.1]' where it spans 1; 'ratio 1.25, n=3: too few to tell' when too few samples were taken
    for an interval (gradlab.bench.stats.MIN_INTERVAL_SAMPLES); '-' without a speedup.  Only a
    significant difference says faster or slower, as the summary counts them."""
    if r.speedup is None:
        return "-"
    if r.speedup_low is None or r.speedup_high is None:
        return f"ratio {plain_ratio(r.speedup)}, n={r.n}: too few to tell"
    if not r.significant:
        return (f"no difference [{plain_ratio(r.speedup_low)}, "
                f"{plain_ratio(r.speedup_high)}]")
    return f"{ratio_words(r.speedup)} {ratio_interval(r.speedup, r.speedup_low, r.speedup_high)}"


#: Under the table: what the columns a reader cannot guess mean, each said when it is shown.
BENCH_LEGEND = {
    "speedup [95% CI]": "speedup: the reference's median time over the custom's, faster or "
                        "slower only where its 95% interval excludes 1",
    "saved": "saved: bytes autograd keeps for backward after one forward (saved tensors, each "
             "storage once; a plain ctx attribute is not seen)"}


def distortion_line(env: Mapping[str, Any]) -> str:
    """'' or the warning that a debug mode distorted this run's timings (envinfo)."""
    said = env.get("timing_distortions")
    if not said:
        return ""
    return f"warning: timings distorted by {said}: not what a real run takes"


def conclusive_words(rows: Sequence[BenchRow]) -> str:
    """For rows with too few samples for an interval: how many were taken in how long, and
    about how long a run that concludes would sample ('' when none is short): the slowest
    task decides when --max-time stops a case."""
    short = [r for r in rows if r.status == PASS and r.median_s and r.n < MIN_INTERVAL_SAMPLES]
    if not short:
        return ""
    slowest = max(short, key=lambda r: r.median_s * r.number)  # type: ignore[operator]
    per = slowest.median_s * slowest.number  # type: ignore[operator]
    spent = sum(slowest.samples_s) * slowest.number if slowest.samples_s else per * slowest.n
    need = math.ceil(per * MIN_INTERVAL_SAMPLES * 1.2)  # a fifth more: warm-up, noise
    return (f"too few samples to tell: {slowest.n} in {fmt_time(spent)}; about {need} s of "
            f"sampling per case for a conclusion (--max-time {need})")


def fmt_speedup(r: BenchRow) -> Text:
    """speedup_words, dim when the interval spans 1 (or there is none)."""
    return Text(speedup_words(r), style="bold" if r.significant else "dim")


def env_line(env: Mapping[str, Any]) -> str:
    """One line naming what the numbers depend on most."""
    parts = [f"torch {env.get('torch_version')}"]
    if env.get("cuda_version"):
        parts.append(f"CUDA {env['cuda_version']} cuDNN {env.get('cudnn_version')}")
    parts += [str(env.get("device_name")), f"{env.get('num_threads')} threads",
              f"gradlab {env.get('gradlab_version')}"
              + (f" ({env['git_commit']})" if env.get("git_commit") else "")]
    return " · ".join(parts)


def _speedup_cell(r: BenchRow) -> Text:
    return fmt_speedup(r) if r.status == PASS else Text("")


def _timed(fn: Callable[[BenchRow], str]) -> Callable[[BenchRow], str]:
    """A timing cell: blank on a row that did not run."""
    return lambda r: fn(r) if r.status == PASS else ""


#: One line per op, case, dtype, device, implementation and phase.
BENCH_TABLE = (
    Column("op", lambda r: r.op), Column("case", lambda r: r.case),
    Column("dtype", lambda r: r.dtype), Column("device", lambda r: r.device),
    Column("impl", lambda r: r.impl), Column("phase", lambda r: r.phase),
    Column("status", lambda r: Text(r.status, style=_STATUS_STYLE.get(r.status, ""))),
    Column("median", _timed(lambda r: fmt_time(r.median_s)), right=True),
    Column("IQR", _timed(lambda r: fmt_time(r.iqr_s)), right=True),
    Column("min", _timed(lambda r: fmt_time(r.min_s)), right=True),
    Column("n", _timed(lambda r: str(r.n)), right=True),
    Column("noisy", lambda r: Text("noisy", style="yellow") if r.noisy else Text("")),
    Column("speedup [95% CI]", _speedup_cell),
    Column("saved", lambda r: fmt_bytes(r.saved_bytes), right=True),
    Column("peak mem", lambda r: fmt_bytes(r.peak_mem_bytes), right=True),
    Column("first call", lambda r: fmt_time(r.first_call_s), right=True))
#: Dropped in this order when the table does not fit.
BENCH_DROP = ("first call", "min", "IQR", "n", "status", "noisy", "device", "dtype", "saved")


def bench_table(report: BenchReport, title: str = "gradlab bench",
                width: int | None = None) -> Table:
    """One line per op, case, dtype, device, implementation and phase, fitted to `width`.

    Peak memory is measured on CUDA only: on a CPU-only run the column is left out.
    """
    cols = [c for c in BENCH_TABLE
            if c.header != "peak mem" or any(r.peak_mem_bytes is not None for r in report.rows)]
    return fit(cols, report.rows, width, title, BENCH_DROP, caption=env_line(report.env),
               identity=("device", "dtype"))


def render_bench(report: BenchReport, console: Console, wide: bool = False) -> None:
    """Print the table, the errors and notes, and a one-line summary (after a warning when a
    debug mode distorted the timings, and how long a conclusive run would take when samples
    were too few)."""
    table = bench_table(report, width=None if wide else console.width)
    console.print(table)
    shown = {str(c.header) for c in table.columns}
    legend = "; ".join(said for header, said in BENCH_LEGEND.items() if header in shown)
    if legend:
        console.print(Text(legend, style="dim"))
    for r in report.rows:
        # the row's own words already say a lack of interval ("n=3: too few to tell")
        said = r.note in ("no significant difference",) or r.note.startswith(f"n={r.n}: too few")
        if r.status == ERROR or (r.note and not said):
            line = Text("ERROR " if r.status == ERROR else "note: ",
                        style=_STATUS_STYLE[ERROR] if r.status == ERROR else "yellow")
            line.append(f"{r.op} / {r.case} / {r.dtype} / {r.device} / {r.impl} / {r.phase}: ",
                        style="bold")
            line.append(r.note)
            console.print(line)
    custom = [r for r in report.rows if r.speedup is not None]
    faster = sum(1 for r in custom if r.significant and r.speedup and r.speedup > 1)
    slower = sum(1 for r in custom if r.significant and r.speedup and r.speedup < 1)
    few = sum(1 for r in custom if r.speedup_low is None)  # no interval: n said instead
    summary = (f"{len(report.rows)} rows, {len(report.errors)} errors; custom vs reference: "
               f"{faster} faster, {slower} slower, {len(custom) - faster - slower - few} "
               "no significant difference")
    if few:
        summary += f", {few} with too few samples to tell"
    if report.interrupted:
        summary += " (interrupted: partial results)"
    for said in (distortion_line(report.env), conclusive_words(report.rows)):
        if said:
            console.print(Text(said, style="yellow"))
    # off a terminal (a log) the summary is never wrapped: a log reader greps it whole
    console.print(Text(summary, style="bold red" if report.errors else "bold"),
                  soft_wrap=not console.is_terminal)


def _change(c: CompareRow) -> Text:
    faster = c.significant and c.change_pct is not None and c.change_pct < 0
    style = "bold red" if c.regression else ("green" if faster else "")
    return Text("-" if c.change_pct is None else f"{c.change_pct:+.1f}%", style=style)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


#: Per phase: the absolute medians of both runs (shown), the custom/reference ratios, the change
#: of the ratio (the gate), its interval and the verdict.
COMPARE_TABLE = (
    Column("op", lambda c: c.op), Column("case", lambda c: c.case),
    Column("dtype", lambda c: c.dtype), Column("device", lambda c: c.device),
    Column("phase", lambda c: c.phase),
    Column("custom old", lambda c: fmt_time(c.old_custom_s), right=True),
    Column("custom new", lambda c: fmt_time(c.new_custom_s), right=True),
    Column("ref old", lambda c: fmt_time(c.old_reference_s), right=True),
    Column("ref new", lambda c: fmt_time(c.new_reference_s), right=True),
    Column("c/r old", lambda c: _ratio(c.old_ratio), right=True),
    Column("c/r new", lambda c: _ratio(c.new_ratio), right=True),
    Column("change", _change, right=True),
    Column("95% CI", lambda c: "-" if c.ratio_low is None or c.ratio_high is None
           else f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]"),
    Column("note", lambda c: Text(c.note, style="bold red" if c.regression else "")))
COMPARE_DROP = ("device", "dtype", "ref old", "ref new", "95% CI", "c/r old", "custom old",
                "c/r new")


def compare_table(rows: Sequence[CompareRow], threshold: float,
                  title: str = "gradlab compare", width: int | None = None) -> Table:
    """The compare table fitted to `width`."""
    caption = (f"change: of the custom/reference ratio (c/r, of 10th percentiles of samples "
               f"taken in alternation), new/old; regression: above +{threshold:g}% with a 95% "
               "interval excluding 1. Absolute medians are shown, not gated on: other jobs' "
               "load moves them.")
    return fit(COMPARE_TABLE, rows, width, title, COMPARE_DROP, caption=caption,
               identity=("device", "dtype"))


def render_compare(rows: Sequence[CompareRow], threshold: float, console: Console,
                   env_diff: Sequence[tuple[str, Any, Any]] = ()) -> None:
    """Print the compare table, environment differences and the verdict."""
    console.print(compare_table(rows, threshold, width=console.width))
    for key, old, new in env_diff:
        console.print(Text(f"note: environment differs: {key}: {old!r} -> {new!r}",
                           style="yellow"), soft_wrap=True)
    moved = [m for m in (c.absolute_change_pct for c in rows) if m is not None]
    if moved:
        console.print(Text(f"custom medians moved {min(moved):+.1f}% to {max(moved):+.1f}% "
                           "(absolute, not gated)"))
    bad = [c for c in rows if c.regression]
    if bad:
        console.print(Text(f"REGRESSION: {len(bad)} of {len(rows)} phases slower by more than "
                           f"{threshold:g}% (significant)", style="bold red"))
    else:
        console.print(Text(f"OK: no significant regression beyond {threshold:g}% "
                           f"({len(rows)} phases)", style="bold green"))

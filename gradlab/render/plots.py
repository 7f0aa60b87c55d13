"""PNG plots (matplotlib, the optional `plots` extra, imported only when asked for).

check: a heatmap of |got - want| per wrong input gradient, so the pattern of the error (a
border band, a tail tile, one row) shows at a glance; a 1-D error is a step line over its
indices.  The plot budget goes to distinct findings first.  bench: speedups with their
confidence intervals per op, case and phase (log axis, ticks at powers of 2), and the memory
autograd saves for backward per op and case.  Legends sit outside the axes, clear of the data.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gradlab.errors import GradlabError
from gradlab.render.diagnosis import hint_words
from gradlab.results import CheckRow, Finding, Report
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.summary import finding_key, summarize

#: Heatmaps per check run at most: one per distinct finding first (the variants of one bug
#: look alike), then further rows of each finding in turn.
MAX_HEATMAPS = 12
#: The speedup axis spans at least 1/2x to 2x, so speedups all near 1x still get ticks either
#: side of 1x (a log axis over 0.9x-1.1x otherwise shows a lone `1x`).
MIN_SPEEDUP_SPAN = 2.0
#: Minor ticks, labelled, of the narrowest speedup axis (1/2x to 2x).
NEAR_1X_TICKS = (0.75, 1.5)
#: Labelled ticks on the speedup axis at most: past it the step grows from 2x to 4x, 16x, ...
MAX_SPEEDUP_TICKS = 9
#: Characters per line of a plot's title (a long likely-cause sentence would widen the PNG).
TITLE_WIDTH = 90
#: Where legends go: outside the axes, to the right of their top corner, never over the data.
LEGEND_OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
#: The phase whose saved bytes the memory plot shows (forward with grad records the graph).
SAVED_PHASE = "forward_grad"
DPI = 110
INSTALL_HINT = 'pip install matplotlib (or the plots extra: README, "Install")'


class PlotsUnavailable(GradlabError):
    """--plots was asked for but matplotlib is not installed."""


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; PlotsUnavailable when not installed."""
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(f"--plots needs matplotlib, which is not installed: "
                               f"{INSTALL_HINT}") from None
    matplotlib.use("Agg")  # files only: no display, no GUI toolkit needed on CI
    import matplotlib.pyplot as plt

    return plt


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _save(plt: Any, fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _is_strip(f: Finding) -> bool:
    """Whether a finding's map is one row or one column: a 1-D error (its gradient is 1-D, or
    only one of its last two dims is longer than 1)."""
    return 1 in tuple(f.error_map.shape)


def _map_notes(f: Finding, shape: tuple[int, ...]) -> str:
    """How the map relates to the gradient: reduced leading dims, pooling."""
    notes = []
    if len(shape) > 2:
        notes.append("max over dim 0" if len(shape) == 3 else
                     f"max over dims 0-{len(shape) - 3}")
    h, w = f.error_map.shape
    if _is_strip(f) and max(h, w) < max(_hw(f)):
        notes.append(f"max-pooled to {max(h, w)} bins")
    elif not _is_strip(f) and len(shape) >= 2 and (h, w) != shape[-2:]:
        notes.append(f"max-pooled to {h}x{w}")
    return ", ".join(notes)


def _hw(f: Finding) -> tuple[int, int]:
    """Height and width of the gradient a map stands for (before pooling)."""
    shape = tuple(f.shape or f.error_map.shape)
    return (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1] if shape else 1)


def _panel_title(ax: Any, f: Finding, shape: tuple[int, ...], nonfinite: int) -> None:
    stats = f"max abs err {f.stats.max_abs:.3g}, {100 * f.stats.frac_wrong:.3g}% wrong" \
        if f.stats else ""
    lines = [f"input {f.index} {list(shape)}", stats, _map_notes(f, shape),
             f"{nonfinite} non-finite (cyan)" if nonfinite else ""]
    ax.set_title("\n".join(s for s in lines if s), fontsize=9)


def _heatmap(plt: Any, ax: Any, fig: Any, f: Finding) -> None:
    import numpy as np
    from matplotlib.ticker import MaxNLocator
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    shape = tuple(f.shape or f.error_map.shape)
    data = np.ma.masked_invalid(np.where(np.isinf(f.error_map), np.nan, f.error_map))
    # cyan marks NaN/inf where a finite value was expected
    cmap = plt.get_cmap("magma").with_extremes(bad="cyan")
    # axes in the gradient's own indices, also when the map was pooled down
    h, w = _hw(f)
    ratio = w / max(1, h)
    im = ax.imshow(data, cmap=cmap, interpolation="nearest", vmin=0,
                   extent=(-0.5, w - 0.5, h - 0.5, -0.5),
                   aspect="equal" if 0.25 <= ratio <= 4 else "auto")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    # a colour bar as tall as the image, whatever its aspect
    cax = make_axes_locatable(ax).append_axes("right", size="4%", pad=0.08)
    fig.colorbar(im, cax=cax).set_label("|got - want| (abs error)")
    _panel_title(ax, f, shape, int(np.isinf(f.error_map).sum()))
    nd = len(shape)
    ax.set_xlabel(f"dim {nd - 1} (index)" if nd else "index")
    ax.set_ylabel(f"dim {nd - 2} (index)" if nd >= 2 else "")


def _strip(ax: Any, f: Finding) -> None:
    """A 1-D error as a step line over the gradient's own indices: a heatmap one row high
    would add a y-axis that means nothing and hide the size of the error in a colour."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    shape = tuple(f.shape or f.error_map.shape)
    along_rows = f.error_map.shape[1] == 1 and f.error_map.shape[0] > 1
    values = np.asarray(f.error_map, dtype=float).reshape(-1)
    bad = np.isinf(values)
    n = _hw(f)[0] if along_rows else _hw(f)[1]
    # one step per element, or per pooled bin of elements, in the gradient's indices
    edges = np.linspace(-0.5, n - 0.5, len(values) + 1)
    shown = np.where(bad, 0.0, values)
    ax.stairs(shown, edges, fill=True, color="tab:purple", alpha=0.3)
    ax.stairs(shown, edges, color="tab:purple", linewidth=1.2)
    for i in np.flatnonzero(bad):  # cyan marks NaN/inf where a finite value was expected
        ax.axvspan(edges[i], edges[i + 1], color="cyan", alpha=0.7, linewidth=0)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(0, 1.08 * float(shown.max()) if shown.max() > 0 else 1.0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    _panel_title(ax, f, shape, int(bad.sum()))
    nd = len(shape)
    dim = nd - 2 if along_rows else nd - 1
    ax.set_xlabel(f"dim {dim} (index)" if nd else "index")
    ax.set_ylabel("|got - want| (abs error)")


def plot_order(rows: Sequence[CheckRow]) -> list[CheckRow]:
    """The failing gradient rows that carry error maps, in the order their plots are made: one
    row per distinct finding first (its base row when it has one), then the further rows of
    each finding in turn, so the cap is not spent on one bug's variants while another has no
    plot."""
    plottable = [r for r in rows if r.failed and r.check == "gradient"
                 and any(f.error_map is not None for f in r.findings)]
    # stable: within a finding, base rows first, then its variants in the order they ran
    groups = [sorted(g.rows, key=lambda r: r.variant != "base")
              for g in summarize(plottable).findings]
    longest = max((len(g) for g in groups), default=0)
    return [g[i] for i in range(longest) for g in groups if i < len(g)]


def check_heatmaps(report: Report, folder: str | Path, stem: str) -> list[Path]:
    """One PNG per failing gradient row that carries error maps (at most MAX_HEATMAPS, spread
    over distinct findings first), titled with its finding's number as the terminal gives it."""
    rows = plot_order(report.failures)[:MAX_HEATMAPS]
    if not rows:
        return []
    plt = pyplot()
    findings = summarize(report.rows).findings
    number = {finding_key(f.rows[0]): i for i, f in enumerate(findings, 1)}

    def which(r: CheckRow) -> str:
        return f"finding {number[finding_key(r)]} of {len(findings)}" \
            if finding_key(r) in number else ""

    return [_save(plt, heatmap_figure(plt, r, which(r)), Path(folder) / (
        f"{stem}_{_slug(r.op)}_{_slug(r.case)}_{r.dtype}_{r.device}_{_slug(r.variant)}"
        "_gradient.png")) for r in rows]


def heatmap_figure(plt: Any, row: CheckRow, finding: str = "") -> Any:
    """A figure with one panel per wrong input of a failing gradient row: a heatmap for a 2-D
    error, a step line for a 1-D one.  `finding`: 'finding 2 of 5', said in the title."""
    found = [f for f in row.findings if f.error_map is not None]
    # figure height follows the tallest map's aspect, so wide maps get no empty band
    tall = max(0.5 if _is_strip(f) else min(1.2, max(0.3, _hw(f)[0] / _hw(f)[1]))
               for f in found)
    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found), 1.7 + 3.6 * tall),
                             squeeze=False)
    for ax, f in zip(axes[0], found, strict=True):
        if _is_strip(f):
            _strip(ax, f)
        else:
            _heatmap(plt, ax, fig, f)
    cause = f"likely cause: {hint_words(row)}" if row.hint else ""
    title = [f"Gradient error: {row.op} / {row.case} / {row.dtype} / {row.device} / "
             f"{row.variant}" + (f" ({finding})" if finding else ""),
             *textwrap.wrap(cause, TITLE_WIDTH)]
    fig.suptitle("\n".join(title), fontsize=10)
    fig.tight_layout()
    return fig


def _unit(n: float) -> tuple[str, float]:
    for unit, scale in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if n >= scale:
            return unit, scale
    return "B", 1.0


def _labels(rows: Sequence[BenchRow]) -> list[str]:
    """'op/case' per row, with dtype and device when the run had more than one of them."""
    combos = {(r.dtype, r.device) for r in rows}
    return list(dict.fromkeys(f"{r.op}/{r.case}" + (f" ({r.dtype}, {r.device})"
                                                      if len(combos) > 1 else "")
                              for r in rows))


def speedup_ticks(low: float, high: float) -> list[float]:
    """Ticks for a log speedup axis from `low` to `high`: powers of 2 (0.5x, 1x, 2x, 4x, ...)
    always including 1x and at least 1/2x to 2x, every 4x, 16x, ... when the range is wide.
    The axis spans the first to the last tick."""
    lo = math.floor(math.log2(min(max(low, 1e-9), 1 / MIN_SPEEDUP_SPAN)))
    hi = math.ceil(math.log2(max(high, MIN_SPEEDUP_SPAN)))
    step = 1
    while (hi - lo) / step + 1 > MAX_SPEEDUP_TICKS:
        step *= 2
    # exponents on multiples of the step, so 1x (2**0) is always one of them
    first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
    return [2.0**e for e in range(first, last + 1, step)]


def speedup_label(v: float, fractions: bool = False) -> str:
    """'4x', '1x', '0.5x', '0.25x'; '1/4x', '1/16x' with `fractions` (an axis that reaches
    below 1/8x, where decimals grow long: one style on one axis)."""
    return f"1/{round(1 / v)}x" if fractions and v < 1 else f"{v:g}x"


def _speedup_axis(ax: Any, rows: Sequence[BenchRow]) -> None:
    """A log x axis with readable ticks over every speedup and interval end (with a margin)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ends = [v for r in rows for v in (r.speedup, r.speedup_low, r.speedup_high)
            if v is not None and v > 0]
    ticks = speedup_ticks(min(ends, default=1.0) / 1.1, max(ends, default=1.0) * 1.1)
    ax.set_xscale("log")
    ax.set_xlim(ticks[0], ticks[-1])
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    fractions = ticks[0] < 1 / 8
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: speedup_label(v, fractions)))
    if len(ticks) == 3:  # 1/2x to 2x: speedups near 1x also read off labelled 0.75x, 1.5x
        ax.xaxis.set_minor_locator(FixedLocator(NEAR_1X_TICKS))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: speedup_label(v)))
        ax.tick_params(axis="x", which="minor", labelsize=8)
    else:
        ax.xaxis.set_minor_locator(NullLocator())


def speedup_figure(plt: Any, rows: Sequence[BenchRow], phases: Sequence[str]) -> Any:
    """Speedup (reference / custom median) with its 95% interval: one line per op and case,
    one marker per phase; hollow markers when the interval spans 1."""
    from matplotlib.lines import Line2D

    labels = _labels(rows)
    fig, ax = plt.subplots(figsize=(9, 1.3 + 0.55 * len(labels) * max(1, len(phases)) / 2))
    colours = plt.get_cmap("tab10")
    step = 0.7 / max(1, len(phases))
    for k, phase in enumerate(phases):
        for r in (r for r in rows if r.phase == phase):
            y = _row_y(r, labels, rows) + (k - (len(phases) - 1) / 2) * step
            speedup = r.speedup or 1.0
            low, high = r.speedup_low or speedup, r.speedup_high or speedup
            ax.errorbar([speedup], [y], xerr=[[speedup - low], [high - speedup]],
                        fmt="o", color=colours(k), capsize=3,
                        mfc=colours(k) if r.significant else "white")
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    _speedup_axis(ax, rows)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first row on top
    ax.set_xlabel("speedup = reference median / custom median (log scale; > 1x: custom "
                  "faster)")
    ax.set_title("Custom Function vs plain-autograd reference: speedup with 95% bootstrap CI\n"
                 "(hollow marker: no significant difference)", fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.3)
    # legend entries drawn apart: a row's own marker is hollow or filled by its significance
    handles = [Line2D([], [], color=colours(k), marker="o", linestyle="", label=phase)
               for k, phase in enumerate(phases)]
    handles += [Line2D([], [], color="grey", marker="o", mfc="white", linestyle="",
                       label="interval spans 1x"),
                Line2D([], [], color="grey", linestyle="--", label="no difference (1x)")]
    ax.legend(handles=handles, title="phase", fontsize=8, **LEGEND_OUTSIDE)
    fig.tight_layout()
    return fig


def _row_y(r: BenchRow, labels: list[str], rows: Sequence[BenchRow]) -> float:
    combos = {(x.dtype, x.device) for x in rows}
    label = f"{r.op}/{r.case}" + (f" ({r.dtype}, {r.device})" if len(combos) > 1 else "")
    return float(labels.index(label))


def saved_figure(plt: Any, rows: Sequence[BenchRow]) -> Any:
    """Bytes saved for backward per op and case: custom next to reference."""
    labels = _labels(rows)
    unit, scale = _unit(max(r.saved_bytes or 0 for r in rows))
    fig, ax = plt.subplots(figsize=(9, 1.3 + 0.5 * len(labels)))
    for k, impl in enumerate(("custom", "reference")):
        ys, xs = [], []
        for r in (r for r in rows if r.impl == impl):
            ys.append(_row_y(r, labels, rows) + (k - 0.5) * 0.38)
            xs.append((r.saved_bytes or 0) / scale)
        bars = ax.barh(ys, xs, height=0.36, label=impl, color=("tab:blue", "tab:orange")[k])
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.margins(x=0.1)  # room for the value printed past the longest bar
    ax.set_xlabel(f"saved for backward per call ({unit})")
    ax.set_title(f"Memory autograd keeps for backward ({SAVED_PHASE} phase; less is better)",
                 fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, **LEGEND_OUTSIDE)
    fig.tight_layout()
    return fig


def bench_plots(report: BenchReport, folder: str | Path, stem: str) -> list[Path]:
    """'<stem>-speedup.png' and '<stem>-saved.png' in `folder` (each when it has data)."""
    plt = pyplot()
    out, paths = Path(folder), []
    timed = [r for r in report.rows if r.speedup is not None]
    if timed:
        phases = list(dict.fromkeys(r.phase for r in timed))
        paths.append(_save(plt, speedup_figure(plt, timed, phases), out / f"{stem}-speedup.png"))
    saved = [r for r in report.rows if r.phase == SAVED_PHASE and r.saved_bytes is not None]
    if saved:
        paths.append(_save(plt, saved_figure(plt, saved), out / f"{stem}-saved.png"))
    return paths

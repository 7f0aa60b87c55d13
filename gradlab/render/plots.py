"""PNG plots (matplotlib, the optional `plots` extra, imported only when asked for).

check: a heatmap of |got - want| per wrong input gradient, so the pattern of the error (a
border band, a tail tile, one row) shows at a glance.  bench: speedups with their confidence
intervals per op, case and phase, and the memory autograd saves for backward per op and case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gradlab.errors import GradlabError
from gradlab.render.diagnosis import hint_words
from gradlab.results import CheckRow, Finding, Report
from gradlab.results.bench import BenchReport, BenchRow

#: Heatmaps per check run at most (base rows first): the variants of one bug look alike.
MAX_HEATMAPS = 12
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


def _map_notes(f: Finding, shape: tuple[int, ...]) -> str:
    """How the map relates to the gradient: reduced leading dims, pooling."""
    notes = []
    if len(shape) > 2:
        notes.append(f"max over dims 0-{len(shape) - 3}")
    if len(shape) >= 2 and tuple(f.error_map.shape) != shape[-2:]:
        notes.append(f"max-pooled to {f.error_map.shape[0]}x{f.error_map.shape[1]}")
    return ", ".join(notes)


def _hw(f: Finding) -> tuple[int, int]:
    """Height and width of the gradient a map stands for (before pooling)."""
    shape = tuple(f.shape or f.error_map.shape)
    return (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1] if shape else 1)


def _heatmap(plt: Any, ax: Any, fig: Any, f: Finding) -> None:
    import numpy as np

    shape = tuple(f.shape or f.error_map.shape)
    data = np.ma.masked_invalid(np.where(np.isinf(f.error_map), np.nan, f.error_map))
    # cyan marks NaN/inf where a finite value was expected
    cmap = plt.get_cmap("magma").with_extremes(bad="cyan")
    from matplotlib.ticker import MaxNLocator
    from mpl_toolkits.axes_grid1 import make_axes_locatable

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
    stats = f"max abs err {f.stats.max_abs:.3g}, {100 * f.stats.frac_wrong:.3g}% wrong" \
        if f.stats else ""
    nonfinite = int(np.isinf(f.error_map).sum())
    lines = [f"input {f.index} {list(shape)}", stats, _map_notes(f, shape),
             f"{nonfinite} non-finite (cyan)" if nonfinite else ""]
    ax.set_title("\n".join(s for s in lines if s), fontsize=9)
    nd = len(shape)
    ax.set_xlabel(f"dim {nd - 1} (index)" if nd else "index")
    ax.set_ylabel(f"dim {nd - 2} (index)" if nd >= 2 else "")


def check_heatmaps(report: Report, folder: str | Path, stem: str) -> list[Path]:
    """One PNG per failing gradient row that carries error maps (at most MAX_HEATMAPS)."""
    rows = [r for r in report.failures if r.check == "gradient"
            and any(f.error_map is not None for f in r.findings)]
    if not rows:
        return []
    plt = pyplot()
    rows.sort(key=lambda r: r.variant != "base")  # stable: base rows first, then variants
    return [_save(plt, heatmap_figure(plt, r), Path(folder) / (
        f"{stem}_{_slug(r.op)}_{_slug(r.case)}_{r.dtype}_{r.device}_{_slug(r.variant)}"
        "_gradient.png")) for r in rows[:MAX_HEATMAPS]]


def heatmap_figure(plt: Any, row: CheckRow) -> Any:
    """A figure with one heatmap per wrong input of a failing gradient row."""
    found = [f for f in row.findings if f.error_map is not None]
    # figure height follows the tallest map's aspect, so wide maps get no empty band
    tall = max(min(1.2, max(0.3, _hw(f)[0] / _hw(f)[1])) for f in found)
    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found), 1.7 + 3.6 * tall),
                             squeeze=False)
    for ax, f in zip(axes[0], found, strict=True):
        _heatmap(plt, ax, fig, f)
    cause = f"\nlikely cause: {hint_words(row)}" if row.hint else ""
    fig.suptitle(f"Gradient error: {row.op} / {row.case} / {row.dtype} / {row.device} / "
                 f"{row.variant}{cause}", fontsize=10)
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


def speedup_figure(plt: Any, rows: Sequence[BenchRow], phases: Sequence[str]) -> Any:
    """Speedup (reference / custom median) with its 95% interval: one line per op and case,
    one marker per phase; hollow markers when the interval spans 1."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

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
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("speedup = reference median / custom median (x, log scale; > 1: custom "
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
    ax.legend(handles=handles, title="phase", loc="best", fontsize=8)
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
    ax.set_xlabel(f"saved for backward per call ({unit})")
    ax.set_title(f"Memory autograd keeps for backward ({SAVED_PHASE} phase; less is better)",
                 fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
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

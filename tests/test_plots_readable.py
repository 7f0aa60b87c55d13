"""Plots a user would open (issue 23 item 8): the speedup axis has readable log ticks, legends
sit clear of the data, a 1-D error is a step line (no imshow), and the plot budget goes to
distinct findings before a second row of one finding.  Figures are read back before saving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradlab.render import plots
from gradlab.render.plots import (
    heatmap_figure,
    plot_order,
    pyplot,
    saved_figure,
    speedup_figure,
    speedup_ticks,
)
from gradlab.results import CheckRow, ErrorStats, Finding, Report
from gradlab.results.bench import BenchRow


@pytest.fixture
def plt() -> Iterator[Any]:
    p = pyplot()  # the Agg backend: files only
    yield p
    p.close("all")


def _bench_rows(speedups: list[float], spread: float = 1.1,
                same_memory: bool = False) -> list[BenchRow]:
    """Custom and reference rows of one op per speedup; intervals speedup / spread to
    speedup * spread; saved bytes growing per op, or all equal (bars of one length)."""
    return [BenchRow(f"op{k}", "c", "float32", "cpu", impl, phase, median_s=1e-3, n=12,
                     speedup=s if impl == "custom" else None,
                     speedup_low=s / spread, speedup_high=s * spread,
                     significant=abs(s - 1) > 0.2,
                     saved_bytes=(1 if same_memory else k + 1) * 2**20)
            for k, s in enumerate(speedups)
            for impl in ("custom", "reference") for phase in ("forward_grad", "backward")]


def _xtick_labels(fig: Any) -> list[str]:
    """The labels of the major ticks the axis shows (a locator may place some outside)."""
    fig.canvas.draw()  # the formatter fills the labels at draw time
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    return [t.get_text() for t in ax.get_xticklabels()
            if lo * 0.999 <= t.get_position()[0] <= hi * 1.001]


def test_speedup_ticks_are_powers_of_two_around_1x() -> None:
    assert speedup_ticks(0.9, 1.1) == [0.5, 1.0, 2.0]
    assert speedup_ticks(0.3, 3.5) == [0.25, 0.5, 1.0, 2.0, 4.0]
    wide = speedup_ticks(1e-3, 1e3)  # the step grows, 1x stays, the range is covered
    assert 1.0 in wide and wide[0] <= 1e-3 and wide[-1] >= 1e3
    assert len(wide) <= plots.MAX_SPEEDUP_TICKS


@pytest.mark.parametrize(("speedups", "labels", "minor"), [
    ([0.95, 1.02, 1.05], ["0.5x", "1x", "2x"], ["0.75x", "1.5x"]),  # not a lone `1x`
    ([0.35, 1.0, 3.2], ["0.25x", "0.5x", "1x", "2x", "4x"], []),
])
def test_speedup_axis_tick_labels_read_back_from_the_figure(plt: Any, speedups: list[float],
                                                             labels: list[str],
                                                             minor: list[str]) -> None:
    rows = [r for r in _bench_rows(speedups) if r.speedup is not None]
    fig = speedup_figure(plt, rows, ["forward_grad", "backward"])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert _xtick_labels(fig) == labels
    assert [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()] == minor


def test_speedup_axis_far_below_1x_uses_fractions(plt: Any) -> None:
    rows = [r for r in _bench_rows([0.01, 2.0]) if r.speedup is not None]
    labels = _xtick_labels(speedup_figure(plt, rows, ["forward_grad", "backward"]))
    assert labels == ["1/256x", "1/64x", "1/16x", "1/4x", "1x", "4x"]  # one style, step 4x


def _data_boxes(fig: Any) -> list[Any]:
    """Display-space boxes of every drawn datum: bars, bar labels, markers and error bars."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [p.get_window_extent(renderer) for p in ax.patches]
    boxes += [t.get_window_extent(renderer) for t in ax.texts]
    boxes += [line.get_window_extent(renderer) for line in ax.lines]  # markers, 1x line
    for coll in ax.collections:  # error bars: one segment each
        for seg in coll.get_segments():
            (x0, y0), (x1, y1) = coll.get_transform().transform(np.asarray(seg, dtype=float))
            boxes.append(Bbox.from_extents(min(x0, x1), min(y0, y1) - 1, max(x0, x1),
                                           max(y0, y1) + 1))
    return boxes


@pytest.mark.parametrize("which", ["speedup", "saved"])
def test_legend_does_not_cover_the_data(plt: Any, which: str) -> None:
    # wide intervals and bars of one length: no free corner inside the axes
    rows = _bench_rows([0.6, 1.0, 2.5], spread=4.0, same_memory=True)
    fig = (speedup_figure(plt, [r for r in rows if r.speedup is not None],
                          ["forward_grad", "backward"]) if which == "speedup"
           else saved_figure(plt, [r for r in rows if r.phase == "forward_grad"]))
    fig.canvas.draw()
    legend = fig.axes[0].get_legend().get_window_extent(fig.canvas.get_renderer())
    boxes = _data_boxes(fig)
    assert len(boxes) >= 6  # the test sees the data it guards
    assert not [b for b in boxes if legend.overlaps(b)]


def _finding(m: Any, shape: tuple[int, ...]) -> Finding:
    return Finding("input", 0, hint="ragged", shape=shape,
                   stats=ErrorStats(max_abs=3.0, max_rel=1.0, frac_wrong=0.2, cosine=0.9,
                                    ratio=0.8), error_map=np.asarray(m, dtype=np.float32))


def _row(finding: Finding, op: str = "T", variant: str = "base", hint: str = "ragged",
         dtype: str = "float64") -> CheckRow:
    return CheckRow(op, "c", dtype, "cpu", variant, "gradient", "fail", hint=hint,
                    findings=[finding])


@pytest.mark.parametrize("shape", [(30,), (2, 1, 30), (30, 1)])
def test_a_1d_error_is_a_step_line_not_an_imshow(plt: Any, shape: tuple[int, ...]) -> None:
    line = np.zeros(30, dtype=np.float32)
    line[24:] = 2.0
    line[27] = np.inf  # non-finite: marked, not drawn as a height
    m = line.reshape(30, 1) if shape[-1] == 1 else line.reshape(1, 30)
    fig = heatmap_figure(plt, _row(_finding(m, shape)))
    (ax,) = fig.axes  # no colour bar either
    assert not ax.get_images()
    assert ax.get_xlim() == (-0.5, 29.5)  # the gradient's own indices
    assert "dim" in ax.get_xlabel() and "error" in ax.get_ylabel()
    assert ax.get_ylim()[1] == pytest.approx(2.0 * 1.08)
    assert "1 non-finite" in ax.get_title()


def test_a_pooled_1d_error_keeps_the_gradients_indices(plt: Any) -> None:
    fig = heatmap_figure(plt, _row(_finding(np.ones((1, 256)), (1000,))))
    ax = fig.axes[0]
    assert not ax.get_images() and ax.get_xlim() == (-0.5, 999.5)
    assert "max-pooled to 256 bins" in ax.get_title()


def test_a_2d_error_is_still_a_heatmap(plt: Any) -> None:
    fig = heatmap_figure(plt, _row(_finding(np.ones((5, 17)), (5, 17))))
    assert len(fig.axes[0].get_images()) == 1


def test_plot_budget_goes_to_distinct_findings_first(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    one = np.ones((4, 4))
    flood = [_row(_finding(one, (4, 4)), op="A", hint="no_chain_rule", variant=v)
             for v in ["base", *(f"v{i}" for i in range(20))]]
    rows = [*flood,
            _row(_finding(one, (4, 4)), op="B", variant="ragged_1"),
            _row(_finding(one, (4, 4)), op="B", variant="base", dtype="float32"),
            _row(_finding(one, (4, 4)), op="A", hint="constant_factor", variant="v3"),
            CheckRow("C", "c", "float64", "cpu", "base", "gradient", "fail")]  # no map
    order = plot_order(rows)
    assert [(r.op, r.hint, r.variant) for r in order[:3]] == [
        ("A", "no_chain_rule", "base"), ("B", "ragged", "base"), ("A", "constant_factor", "v3")]
    assert [(r.op, r.variant) for r in order[3:5]] == [("A", "v0"), ("B", "ragged_1")]
    assert len(order) == 24  # every plottable row, the one without a map left out
    monkeypatch.setattr(plots, "MAX_HEATMAPS", 3)
    titles: list[str] = []

    def spy(plt: Any, row: CheckRow, finding: str = "") -> Any:
        fig = heatmap_figure(plt, row, finding)
        titles.append(fig.get_suptitle())
        return fig

    monkeypatch.setattr(plots, "heatmap_figure", spy)
    paths = plots.check_heatmaps(Report(rows=rows), tmp_path, "r")
    assert [p.name.split("_")[1] for p in paths] == ["A", "B", "A"]
    # numbered as the terminal numbers findings (C's row, without a map, is one of them)
    assert ["finding 1 of 4" in titles[0], "finding 2 of 4" in titles[1],
            "finding 3 of 4" in titles[2]] == [True, True, True]

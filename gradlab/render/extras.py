"""The files a run writes on request besides its CSV and JSON: JUnit XML, the Markdown summary,
PNG plots.  Each writer is imported only when its option was given (matplotlib is optional)."""

from __future__ import annotations

from pathlib import Path

from gradlab.results import Report
from gradlab.results.bench import BenchReport

#: Where plots go: this folder beside the report files, named after the report.
PLOT_FOLDER = "plots"


def check_extras(report: Report, report_path: Path, *, junit: Path | None = None,
                 summary_md: Path | None = None, plots: bool = False) -> list[Path]:
    """Write what was asked for of the check report at `report_path`; the paths written."""
    written: list[Path] = []
    if junit is not None:
        from gradlab.render.junit import check_junit, write_junit

        written.append(write_junit(check_junit(report), junit))
    if summary_md is not None:
        from gradlab.render.markdown import write_summary_md

        written.append(write_summary_md(report, summary_md))
    if plots:
        from gradlab.render.plots import check_heatmaps

        written += check_heatmaps(report, report_path.parent / PLOT_FOLDER, report_path.stem)
    return written


def bench_extras(report: BenchReport, report_path: Path, *, junit: Path | None = None,
                 plots: bool = False) -> list[Path]:
    """Write what was asked for of the bench report at `report_path`; the paths written."""
    written: list[Path] = []
    if junit is not None:
        from gradlab.render.junit import bench_junit, write_junit

        written.append(write_junit(bench_junit(report), junit))
    if plots:
        from gradlab.render.plots import bench_plots

        written += bench_plots(report, report_path.parent / PLOT_FOLDER, report_path.stem)
    return written


def require_plots(wanted: bool) -> None:
    """When plots are wanted, fail now (PlotsUnavailable, exit 2) if matplotlib is missing."""
    if wanted:
        from gradlab.render.plots import pyplot

        pyplot()

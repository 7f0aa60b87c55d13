"""What the CLI does for CI: picking cases (-k, --shard), the files besides the CSV/JSON a run
asks for (JUnit, Markdown summary, plots), and `gradlab merge` of sharded reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gradlab.cli.app import (
    DEFAULT_REPORT_DIR,
    Junit,
    Quiet,
    ReportDir,
    SummaryMd,
    app,
    fail,
    out,
)
from gradlab.errors import GradlabError


def pick_targets(targets: list[Any], match: list[str] | None, shard: str | None,
                 plots: bool) -> list[Any]:
    """-k and --shard applied to the targets' cases; --plots checked up front (exit 2)."""
    from gradlab.render.extras import require_plots
    from gradlab.select import parse_shard, select
    from gradlab.select import shard as take_shard

    try:
        require_plots(plots)
        targets = select(targets, match or ())
        return take_shard(targets, *parse_shard(shard)) if shard else targets
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None


def write_extras(report: Any, paths: list[Path], junit: Path | None, summary_md: Path | None,
                 plots: bool, quiet: bool) -> None:
    """The files besides the CSV/JSON a check or merge was asked for, and where they went."""
    from gradlab.render.extras import check_extras

    written = [paths[0], *check_extras(report, paths[0], junit=junit, summary_md=summary_md,
                                       plots=plots)]
    if not quiet:
        out.print("\n".join(f"{'report' if k == 0 else 'wrote'}: {p}"
                            for k, p in enumerate(written)), markup=False, highlight=False)


@app.command()
def merge(
    reports: Annotated[list[Path], typer.Argument(help="check-*.json reports (one per shard)")],
    report_dir: ReportDir = Path(DEFAULT_REPORT_DIR),
    junit: Junit = None, summary_md: SummaryMd = None, quiet: Quiet = False,
) -> None:
    """Merge check JSON reports (the shards of a run): one table, report, JUnit and summary;
    exit as the unsharded run would (0 all passed, 1 a check failed)."""
    from gradlab.render.check import render_check
    from gradlab.render.files import read_check_json, write_check_reports
    from gradlab.results import exit_code, merge_reports

    try:
        report = merge_reports([read_check_json(p) for p in reports])
        paths = write_check_reports(report, report_dir)
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None
    render_check(report, out, quiet=quiet)
    write_extras(report, paths, junit, summary_md, False, quiet)
    raise typer.Exit(int(exit_code(report)))

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
    err,
    fail,
    out,
)
from gradlab.errors import ExitCode, GradlabError


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


def check_outputs(report_dir: Path, *, junit: Path | None = None,
                  summary_md: Path | None = None, plots: bool = False) -> None:
    """Exit 2 with one line naming the option and the path when an output of the run cannot be
    written, before any work is done (not a traceback once every check has run)."""
    from gradlab.fileio import ensure_writable, ensure_writable_file
    from gradlab.render.extras import PLOT_FOLDER

    wanted: list[tuple[str, Any]] = [
        ("--report-dir", lambda: ensure_writable(report_dir)),
        # repro inputs go in REPORT_DIR/repro (made when a case fails): only a non-folder in
        # its way, or a read-only one, can stop them now
        ("--report-dir", lambda: (report_dir / "repro").exists()
         and ensure_writable(report_dir / "repro", "the repro folder"))]
    if plots:
        wanted.append(("--plots", lambda: ensure_writable(report_dir / PLOT_FOLDER,
                                                          "the plots folder")))
    for option, path in (("--junit", junit), ("--summary-md", summary_md)):
        if path is not None:
            wanted.append((option, lambda p=path: ensure_writable_file(p)))
    option = ""
    try:
        for name, probe in wanted:
            option = name  # the one to blame should the probe fail
            probe()
    except GradlabError as exc:
        raise fail(f"{option}: {exc}", exc.exit_code) from None


def output_failed(option: str, exc: Exception) -> str:
    """The one line saying which output could not be written at the end of a run (the others
    were): printed at once, the exit code then says 2."""
    why = str(exc) if isinstance(exc, GradlabError) else \
        f"{getattr(exc, 'filename', None) or ''}: {getattr(exc, 'strerror', None) or exc}"
    line = f"gradlab: error: {option}: {why.strip(': ')} (not written; the other outputs were)"
    err.print(line, markup=False, highlight=False, soft_wrap=True)
    return option


#: What a failed write of one output may raise (the others are still written).
WRITE_ERRORS = (OSError, GradlabError)


def write_extras(report: Any, paths: list[Path], junit: Path | None, summary_md: Path | None,
                 plots: bool, quiet: bool, folder: Path = Path(DEFAULT_REPORT_DIR)
                 ) -> list[str]:
    """The files besides the CSV/JSON a check or merge was asked for, each on its own (one
    that cannot be written does not stop the others); where they went; the options whose file
    failed.  `paths`: the report's CSV and JSON, none when they could not be written (plots
    are named after them, else go in `folder` as check-*)."""
    from gradlab.render.extras import check_extras

    written, failed = list(paths[:1]), []
    where = paths[0] if paths else folder / "check"
    asked: list[tuple[str, dict[str, Any]]] = [
        ("--junit", {"junit": junit}), ("--summary-md", {"summary_md": summary_md}),
        ("--plots", {"plots": plots})]
    for option, kwargs in asked:
        if not any(kwargs.values()):
            continue
        try:
            written += check_extras(report, where, **kwargs)
        except WRITE_ERRORS as exc:
            failed.append(output_failed(option, exc))
    if written and not quiet:
        lines = [f"{'report' if k == 0 and paths else 'wrote'}: {p}"
                 for k, p in enumerate(written)]
        if paths:  # every file of the report, on its line: CSV, JSON, the environment
            lines[0] += "".join(f", {p.name}" for p in paths[1:])
        out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    return failed


def exit_after_writes(code: int, failed: list[str]) -> typer.Exit:
    """The run's exit: its own code, but 2 when an output could not be written (130, an
    interrupted run, stays)."""
    if failed and code != ExitCode.INTERRUPTED:
        code = ExitCode.BAD_INPUT
    return typer.Exit(int(code))


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

    check_outputs(report_dir, junit=junit, summary_md=summary_md)
    try:
        report = merge_reports([read_check_json(p) for p in reports])
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None
    failed: list[str] = []
    try:
        paths = write_check_reports(report, report_dir)
    except WRITE_ERRORS as exc:
        paths, failed = [], [output_failed("--report-dir", exc)]
    render_check(report, out, quiet=quiet)
    failed += write_extras(report, paths, junit, summary_md, False, quiet, report_dir)
    raise exit_after_writes(int(exit_code(report)), failed)

"""`gradlab bench` and `gradlab compare`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from gradlab.cli.app import (
    DEFAULT_REPORT_DIR,
    ImportPaths,
    Junit,
    MaxMemory,
    Plots,
    Wide,
    app,
    err,
    fail,
    load_targets,
    out,
    parse_devices,
    parse_dtypes,
    parse_max_memory,
    require_cases,
    sigterm_as_interrupt,
)
from gradlab.cli.ci import WRITE_ERRORS, check_outputs, exit_after_writes, output_failed
from gradlab.errors import ExitCode, GradlabError


def _check_numbers(min_time: float, max_time: float, min_samples: int,
                   threads: int | None) -> None:
    """Exit 2 naming the option for a bench setting out of range."""
    if not (math.isfinite(min_time) and min_time > 0):
        raise fail(f"--min-time: expected a positive number of seconds, got {min_time:g}")
    if not (math.isfinite(max_time) and max_time >= 0):
        raise fail(f"--max-time: expected seconds >= 0 (0: no cap), got {max_time:g}")
    if min_samples < 1:
        raise fail(f"--min-samples: expected at least 1, got {min_samples}")
    if threads is not None and threads < 1:
        raise fail(f"--threads: expected at least 1, got {threads}")


@app.command()
def bench(
    what: Annotated[list[str], typer.Argument(help="bundled op name(s), SPEC.yaml or folder")],
    device: Annotated[list[str] | None, typer.Option("--device", help="cpu or cuda (default: "
                                                     "the spec's devices, else cpu)")] = None,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="dtype(s) (default: the "
                                                    "spec's dtypes without float64; float32 "
                                                    "for the bundled ops)")] = None,
    report_dir: Annotated[Path, typer.Option("--report-dir", help="where bench-*.csv/json "
                                             "go")] = Path(DEFAULT_REPORT_DIR),
    min_time: Annotated[float, typer.Option("--min-time", help="seconds to measure per phase "
                                            "and implementation, on average over a case's")
                        ] = 0.2,
    min_samples: Annotated[int, typer.Option("--min-samples", help="samples per phase and "
                                             "implementation, at least")] = 10,
    max_time: Annotated[float, typer.Option("--max-time", help="stop a case at 3 samples once "
                                            "one phase spent this long (0: never)")
                        ] = 1.0,
    case: Annotated[list[str] | None, typer.Option("--case", help="only these bench cases")
                    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the random inputs")] = 0,
    threads: Annotated[int | None, typer.Option("--threads", help="torch intra-op threads "
                                                "(default: the current count)")] = None,
    max_memory: MaxMemory = None, junit: Junit = None, plots: Plots = False,
    wide: Wide = False, path: ImportPaths = None,
) -> None:
    """Time forward / backward phases and memory of each Function against its reference."""
    # The option defaults repeat gradlab.bench's DEFAULT_* constants (importing it here would
    # load torch for `gradlab --help`); a test keeps them equal.
    from gradlab import bench as core
    from gradlab.render.extras import require_plots
    from gradlab.render.progress import progress

    _check_numbers(min_time, max_time, min_samples, threads)
    check_outputs(report_dir, junit=junit, plots=plots)  # before the run, not after it
    options = core.BenchOptions(
        dtypes=parse_dtypes(dtype), devices=parse_devices(device),
        cases=tuple(case) if case else None, min_time=min_time, min_samples=min_samples,
        max_time=max_time, seed=seed, threads=threads)
    try:
        require_plots(plots)  # before the run: a missing matplotlib is exit 2, not lost time
        # bench cases (--case included) are picked by the core
        targets = load_targets(what, None, parse_max_memory(max_memory), path)
        require_cases(case or [], [c.name for t in targets for c in core.bench_cases(t.op)],
                      "bench case")
        for t in targets:
            if not t.op.bench_cases:  # timed anyway, and said: tiny shapes time the overhead
                err.print(f"gradlab: {t.op.name}: no bench: cases in {t.source}; timing its "
                          "check cases (small shapes: mostly call overhead). Add bench: cases "
                          "at real sizes", markup=False, highlight=False, soft_wrap=True)
        total = core.total_steps(targets, options)
        with sigterm_as_interrupt(), progress("benchmarking", total, err) as step:
            report = core.run(targets, options, on_step=step)
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None
    _finish_bench(report, report_dir, junit, plots, wide)


def _finish_bench(report: Any, report_dir: Path, junit: Path | None, plots: bool,
                  wide: bool) -> None:
    """Render, write the report and the files asked for, exit with the run's code."""
    from gradlab.render.bench import render_bench
    from gradlab.render.benchfile import write_bench_reports
    from gradlab.render.extras import bench_extras

    render_bench(report, out, wide=wide)
    failed: list[str] = []
    try:
        paths = write_bench_reports(report, report_dir)
        lines = [f"report: {paths[0]}", f"raw samples: {paths[1]}"]
    except WRITE_ERRORS as exc:  # the JUnit file and plots are still written
        paths, lines = [report_dir / "bench"], []
        failed.append(output_failed("--report-dir", exc))
    for option, kwargs in (("--junit", {"junit": junit}), ("--plots", {"plots": plots})):
        if any(kwargs.values()):
            try:
                lines += [f"wrote: {p}" for p in bench_extras(report, paths[0], **kwargs)]
            except WRITE_ERRORS as exc:
                failed.append(output_failed(option, exc))
    if lines:
        out.print("\n".join(lines), markup=False, highlight=False)
    code = ExitCode.CHECK_FAILED if report.errors else ExitCode.OK
    raise exit_after_writes(ExitCode.INTERRUPTED if report.interrupted else code, failed)


@app.command()
def compare(
    old: Annotated[Path, typer.Argument(help="the baseline bench-*.json")],
    new: Annotated[Path, typer.Argument(help="the bench-*.json to judge")],
    threshold: Annotated[float, typer.Option("--threshold", help="percent rise of the "
                                             "custom/reference time ratio that counts as a "
                                             "regression (when significant)")] = 10.0,
) -> None:
    """Compare two bench runs phase by phase on the custom/reference ratio; exit 1 on a
    significant regression beyond --threshold."""

    from gradlab import bench as core
    from gradlab.render.bench import render_compare
    from gradlab.render.benchfile import read_bench_json

    if not math.isfinite(threshold) or threshold < 0:
        raise fail(f"--threshold: expected a non-negative percentage, got {threshold:g}")
    try:
        old_report, new_report = read_bench_json(old), read_bench_json(new)
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None
    rows = core.compare(old_report, new_report, threshold)
    render_compare(rows, threshold, out, core.env_differences(old_report.env, new_report.env))
    regressed = any(c.regression for c in rows)
    raise typer.Exit(int(ExitCode.CHECK_FAILED if regressed else ExitCode.OK))

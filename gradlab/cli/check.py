"""`gradlab check` and `gradlab repro`: options -> run (isolated, reports written as cases
finish) -> render -> exit code."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from gradlab.cli.app import (
    DEFAULT_REPORT_DIR,
    DEFAULT_TIMEOUT_S,
    VARIANT_HELP,
    Capabilities,
    Explore,
    FailFast,
    ImportPaths,
    Isolate,
    Junit,
    Match,
    MaxMemory,
    OpNames,
    Plots,
    Quiet,
    ReportDir,
    Seed,
    Shard,
    ShowChecks,
    SkipUnavailable,
    Strict,
    SummaryMd,
    TableMode,
    Timeout,
    What,
    Wide,
    app,
    err,
    explore_budget,
    fail,
    full_table,
    import_targets,
    load_targets,
    out,
    parse_devices,
    parse_dtypes,
    parse_max_memory,
    require_devices,
    sigterm_as_interrupt,
    spec_mistake,
)
from gradlab.cli.ci import (
    WRITE_ERRORS,
    check_outputs,
    exit_after_writes,
    output_failed,
    pick_targets,
    write_extras,
)
from gradlab.errors import GradlabError
from gradlab.model import CHECKS

#: --check's help, from the model's list of checks so that it cannot drift from it.
CHECK_HELP = f"only these checks: {', '.join(CHECKS)}"


def _check_options(what: list[str], dtype: list[str] | None, device: list[str] | None,
                   report_dir: Path, seed: int, variants: bool, variant: list[str] | None,
                   only: list[str] | None, mode: str, budget: float | None,
                   strict: bool = False, skip_unavailable: bool = False,
                   isolate: bool = False, timeout: float = 0.0,
                   paths: list[Path] | None = None, capabilities: str = "default") -> Any:
    """Validate check's options (exit 2 naming the option) and build the run's Options."""
    import math

    from gradlab.checks.run.options import Options, measured_capabilities
    from gradlab.model import CHECKS
    from gradlab.repro import ReproCommand

    if mode not in ("auto", "dense", "fast"):
        raise fail(f"--mode: expected auto, dense or fast, got {mode!r}")
    chosen_checks = _check_names("--check", only) or None
    picked = _variant_choice(variants, variant, chosen_checks)
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise fail("--budget: expected a positive number of seconds")
    if not (math.isfinite(timeout) and timeout >= 0):
        raise fail(f"--timeout: expected seconds >= 0 (0: no limit), got {timeout:g}")
    try:
        measured = measured_capabilities(capabilities)
    except ValueError as exc:
        raise fail(f"--capabilities: {exc}") from None
    devices = parse_devices(device, available=not skip_unavailable)
    return Options(dtypes=parse_dtypes(dtype), devices=devices, seed=seed, strict=strict,
                   skip_unavailable=skip_unavailable, isolate=isolate, capabilities=measured,
                   timeout=timeout or None, mode=mode, budget=budget, **picked,
                   repro_dir=str(report_dir / "repro"),
                   repro_command=ReproCommand(
                       tuple(what), seed, tuple(str(p) for p in paths or ()),
                       tuple(c for c in CHECKS if c in (chosen_checks or ())), mode,
                       capabilities, strict))


def _variant_choice(variants: bool, variant: list[str] | None,
                    checks: frozenset[str] | None) -> dict[str, Any]:
    """Options' variants, variant_names and checks for --variant: the families to run, of
    them the variants to keep (one named by itself: only it), and the checks, which lose the
    numerical ones (jacobian, ...: they run on the base case only) unless `base` is named.
    Exit 2 naming the option for a name that is no variant."""
    from gradlab.checks.run.plan import PER_CASE_CHECKS
    from gradlab.model import CHECKS
    from gradlab.select import BASE, check_variant_names, variant_family

    if not (variant and variants):
        return {"variants": variants, "checks": checks}
    try:
        check_variant_names(variant)
    except GradlabError as exc:
        raise fail(str(exc)) from None
    families = frozenset(variant_family(v) for v in variant) - {BASE}
    # a ragged variant's sizes are tried one at a time after the whole one: that one runs too
    names = frozenset("ragged" if variant_family(v) == "ragged" else v for v in variant) - {BASE}
    if BASE not in variant:
        left = (checks or frozenset(CHECKS)) - PER_CASE_CHECKS
        if not left:
            raise fail(f"--variant: {', '.join(sorted(checks or ()))} run on the base case only "
                       "(add --variant base)")
        checks = frozenset(left)
    return {"variants": families, "checks": checks,
            "variant_names": None if names <= families else names}


#: The most workers --jobs 0 starts.
MAX_AUTO_JOBS = 4
#: What --jobs 0 (the default) means.
JOBS_AUTO = f"one per CPU core, up to {MAX_AUTO_JOBS}; one on CUDA"


def auto_jobs(devices: list[str] | None) -> int:
    """Workers for --jobs 0: one per CPU core this process may use, up to MAX_AUTO_JOBS (each
    holds torch and the cases in memory); one when a GPU is used (workers would share it)."""
    if devices and any(d.startswith("cuda") for d in devices):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_JOBS))


def _start_workers(jobs: int, device: list[str] | None, isolate: bool,
                   fail_fast: bool) -> int:
    """The number of workers --jobs asks for; isolated, they are spawned now, once every spec
    is valid (a spec error starts none), so that their start (torch's import) overlaps the
    rest of this process's work: importing the spec's modules, rendering, writing.

    --fail-fast gets one: it stops at the first failing case, and with cases side by side a
    later one could be under way by then (its rows would come and go between runs)."""
    if jobs < 0:
        raise fail(f"--jobs: expected a number of workers >= 0 (0: {JOBS_AUTO}), got {jobs}")
    workers = 1 if fail_fast else jobs or auto_jobs(device)
    if isolate:
        from gradlab.checks.run.warm import warm_up

        warm_up(workers)
    return workers


Jobs = Annotated[int, typer.Option("-j", "--jobs", help="worker processes running cases side "
                                   f"by side (isolated runs; 0: {JOBS_AUTO})",
                                   envvar="GRADLAB_JOBS")]


@app.command()
def check(
    what: What,
    dtype: Annotated[list[str] | None, typer.Option("--dtype", help="dtype(s) to run: float64 "
                                                    "(double), float32, float16, bfloat16")] = None,
    device: Annotated[list[str] | None, typer.Option("--device", help="cpu or cuda")] = None,
    report_dir: ReportDir = Path(DEFAULT_REPORT_DIR),
    seed: Seed = 0,
    case: Annotated[list[str] | None, typer.Option("--case", help="only these case names")] = None,
    variants: Annotated[bool, typer.Option("--variants/--no-variants",
                                           help="layout / grad_output / requires_grad / size-1 "
                                                "variants")] = True,
    variant: Annotated[list[str] | None, typer.Option("--variant", help=VARIANT_HELP)] = None,
    only: Annotated[list[str] | None, typer.Option("--check", help=CHECK_HELP)] = None,
    capabilities: Capabilities = "default",
    mode: Annotated[str, typer.Option("--mode", help="numerical Jacobians: auto, dense or "
                                      "fast (random probes)")] = "auto",
    budget: Annotated[float | None, typer.Option("--budget", help="stop starting new cases "
                                                 "after this many seconds")] = None,
    strict: Strict = False, skip_unavailable: SkipUnavailable = False, isolate: Isolate = True,
    timeout: Timeout = DEFAULT_TIMEOUT_S, jobs: Jobs = 0,
    wide: Wide = False, max_memory: MaxMemory = None, path: ImportPaths = None,
    match: Match = None, shard: Shard = None, fail_fast: FailFast = False, quiet: Quiet = False,
    junit: Junit = None, summary_md: SummaryMd = None, plots: Plots = False, op: OpNames = None,
    show: ShowChecks = None, table: TableMode = "compact", explore: Explore = None,
) -> None:
    """Check gradients: reference comparison, contract, variants, Jacobians, second order,
    autocast; measure capabilities (torch.compile, torch.func, determinism, ...)."""
    how = Finish(wide, quiet, shard is not None, junit, summary_md, plots, full_table(table))
    # every output first: an unwritable one is exit 2 before any work, not a lost run
    check_outputs(report_dir, junit=junit, summary_md=summary_md, plots=plots)
    options = replace(_check_options(what, dtype, device, report_dir, seed, variants, variant,
                                     only, mode, budget, strict, skip_unavailable, isolate,
                                     timeout, path, capabilities),
                      error_maps=plots, fail_fast=fail_fast, explore=explore_budget(explore),
                      max_memory=parse_max_memory(max_memory))
    targets = _load(what, max_memory, path, op, case)
    targets = pick_targets(targets, match, shard, plots)
    require_devices(targets, options.devices, skip_unavailable)
    # the workers start (importing torch) once every spec is valid, beside the user's imports
    options = replace(options, jobs=_start_workers(jobs, device, isolate, fail_fast))
    targets = import_targets(targets)
    from gradlab.render.files import CheckReportWriter

    writer = CheckReportWriter(report_dir)
    # --variant: only the rows of the variants named (the base case's only with `base`)
    report = _run_check(targets, options, writer, quiet,
                        frozenset(variant or ()) if variants else frozenset(),
                        _check_names("--show", show))
    spec_mistake(report, targets, writer.paths)
    _finish_check(report, writer, how)


def _load(what: list[str], max_memory: str | None, path: list[Path] | None,
          op: list[str] | None, case: list[str] | None) -> list[Any]:
    """The targets picked by --op and --case, every spec validated and nothing it names
    imported yet (no torch: a spec error comes at once)."""
    from gradlab.select import pick

    try:
        # imports False: import_targets imports the modules once the workers are started
        return pick(load_targets(what, None, parse_max_memory(max_memory), path, False),
                    op or (), case or ())
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None


@dataclass(frozen=True)
class Finish:
    """How a check run ends: what it prints and which files it writes besides CSV/JSON."""

    wide: bool = False
    quiet: bool = False
    #: a shard: a run with no case to run passes.
    empty_ok: bool = False
    junit: Path | None = None
    summary_md: Path | None = None
    plots: bool = False
    #: --table full: a line per check of every case
    full: bool = False


def _finish_check(report: Any, writer: Any, how: Finish) -> None:
    """Render, write the report and the files asked for, then say the verdict (once the report
    is safely on disk) and exit with its code."""
    from gradlab.render.check import render_check, render_verdict
    from gradlab.results import exit_code

    render_check(report, out, verdict=False, wide=how.wide, quiet=how.quiet, full=how.full)
    failed: list[str] = []
    try:
        paths = writer.write(report, final=True)
    except WRITE_ERRORS as exc:  # the other outputs are still written
        paths, failed = [], [output_failed("--report-dir", exc)]
    render_verdict(report, out, empty_ok=how.empty_ok)
    failed += write_extras(report, paths, how.junit, how.summary_md, how.plots, how.quiet,
                           writer.folder)
    if report.interrupted and paths:
        err.print(f"gradlab: interrupted; the partial report is {paths[0]}", markup=False,
                  highlight=False, soft_wrap=True)
    raise exit_after_writes(int(exit_code(report, empty_ok=how.empty_ok)), failed)


def _check_names(option: str, names: list[str] | None) -> frozenset[str]:
    """The checks an option names (--check, --show), by their canonical names; exit 2 naming
    the option for an unknown one."""
    from gradlab.model import canonical_check

    try:
        return frozenset(canonical_check(c) for c in names or ())
    except ValueError as exc:
        raise fail(f"{option}: {exc}") from None


def _keeper(chosen: frozenset[str], shown: frozenset[str]) -> Callable[[Any], bool] | None:
    """Which rows a run reports under --variant (`chosen`) and --show (`shown`); None: all."""
    from gradlab.select import variant_picked

    def picked(r: Any) -> bool:
        return (not chosen or variant_picked(r.variant, chosen)) and (
            not shown or r.check in shown)

    return picked if chosen or shown else None


def _run_check(targets: list[Any], options: Any, writer: Any, quiet: bool = False,
               chosen: frozenset[str] = frozenset(), shown: frozenset[str] = frozenset()) -> Any:
    """Run the checks with a progress bar (a terminal) or progress lines (a log), the report
    rewritten as cases finish; `chosen`: --variant, the variants whose rows are reported;
    `shown`: --show, the checks whose rows are reported."""
    keep = _keeper(chosen, shown)
    from gradlab.checks.run.driver import plan, run
    from gradlab.checks.run.isolate import picklable
    from gradlab.render.progress import LogProgress, log_width, progress

    if options.isolate:
        why = picklable(targets, options)
        if why:
            err.print(f"gradlab: running in-process (cannot isolate: {why})", markup=False,
                      highlight=False, soft_wrap=True)
            options = replace(options, isolate=False)
    from gradlab.results import SPEC_INPUTS, Report

    # its environment record comes from the run (isolated: the first worker's, so that this
    # process need not import torch)
    partial, wrong = Report(), []  # wrong: a spec's mistake (SPEC_INPUTS), said alone
    log = None if err.is_terminal or quiet else LogProgress(err, width=log_width())
    total = sum(1 for _ in plan(targets, options))
    with sigterm_as_interrupt(), progress("checking", total, err, show=not quiet) as step:
        def write_partial() -> None:
            # a report that cannot be rewritten now is said once, by the final write
            with contextlib.suppress(*WRITE_ERRORS):
                if not wrong:  # a spec error writes no report
                    writer.write(partial)

        def on_rows(rows: list[Any]) -> None:
            if rows:
                step(f"{rows[0].op}/{rows[0].case}")
            wrong.extend(r for r in rows if r.reason == SPEC_INPUTS)
            rows = rows if keep is None else [r for r in rows if keep(r)]
            partial.extend(rows)
            write_partial()
            if log is not None and not wrong:
                log.rows_done(rows)

        def on_wait(label: str, seconds: float) -> None:
            # rows finished before a long (or hung) case reach the disk while it runs
            write_partial()
            if log is not None:
                log.waiting(label, seconds)

        if not options.isolate:
            import torch  # noqa: F401  (the run imports it here: loaded before the freeze)
        # What is loaded now (the specs, and torch in-process) lives as long as the run: kept
        # out of the cyclic collector's full passes, which otherwise walk it again and again.
        gc.freeze()
        report = run(targets, options, on_rows=on_rows, on_wait=on_wait,
                     on_env=partial.env.update)
    if log is not None:
        log.flush()
    return report if keep is None or wrong else _reported(report, chosen, keep)


def _reported(report: Any, chosen: frozenset[str], keep: Callable[[Any], bool]) -> Any:
    """`report` with the rows `keep` picks (--variant, --show) only, a line said for each
    variant named by its own name of which no row ran."""
    from gradlab.select import variants_missing

    for name in variants_missing(chosen, {r.variant for r in report.rows}):
        err.print(f"gradlab: --variant {name}: no such variant ran", markup=False,
                  highlight=False, soft_wrap=True)
    return replace(report, rows=[r for r in report.rows if keep(r)])


@app.command()
def repro(
    file: Annotated[Path, typer.Argument(help="a repro file (reports/repro/*.pt)")],
    report_dir: ReportDir = Path(DEFAULT_REPORT_DIR),
    wide: Wide = False, path: ImportPaths = None,
) -> None:
    """Re-run one failing case on the inputs saved in its repro file."""
    from gradlab.checks.run.driver import run
    from gradlab.checks.run.options import Options
    from gradlab.repro import load_repro
    from gradlab.spec import add_import_paths

    check_outputs(report_dir)
    add_import_paths(path or ())
    try:
        target, dtype, device, seed = load_repro(file)
    except GradlabError as exc:
        raise fail(str(exc), exc.exit_code) from None
    from gradlab.render.files import CheckReportWriter

    options = Options(dtypes=(dtype,), devices=(device,), seed=seed, skip_unavailable=True)
    _finish_check(run([target], options), CheckReportWriter(report_dir), Finish(wide=wide))

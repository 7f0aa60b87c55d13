"""The Typer CLI: parse arguments, call the core, render, pick the exit code.

Heavy imports (torch, pandas, the engine) happen inside the commands so `gradlab list` and
`--help` start fast.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from gradlab.errors import ExitCode, GradlabError
from gradlab.render.console import make_console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Verify and benchmark gradients of custom torch.autograd.Functions.")
# Colour only on a terminal and never under NO_COLOR; piped output gets a wide fixed width.
out = make_console()
err = make_console(stderr=True)

DEFAULT_REPORT_DIR = "reports"


def _fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    err.print(f"gradlab: error: {message}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(int(code))


def _dtypes(values: list[str] | None) -> tuple[str, ...] | None:
    from gradlab.model import canonical_dtype

    if not values:
        return None
    try:
        return tuple(canonical_dtype(v) for v in values)
    except ValueError as exc:
        raise _fail(f"--dtype: {exc}") from None


def _devices(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    for v in values:
        if v not in ("cpu", "cuda"):
            raise _fail(f"--device: expected cpu or cuda, got {v!r}")
    if "cuda" in values:
        import torch

        if not torch.cuda.is_available():
            raise _fail("--device cuda: torch.cuda.is_available() is False on this machine "
                        f"(torch {torch.__version__})")
    return tuple(values)


def _targets(what: list[str], cases: list[str] | None) -> list[Any]:
    from dataclasses import replace

    from gradlab.spec import resolve

    targets = [t for w in what for t in resolve(w)]
    if cases:
        picked = []
        for t in targets:
            keep = tuple(c for c in t.op.cases if c.name in cases)
            if keep:
                picked.append(replace(t, op=replace(t.op, cases=keep)))
        if not picked:
            raise GradlabError(f"--case: no case named {', '.join(cases)}")
        targets = picked
    return targets


@app.command("list")
def list_ops() -> None:
    """List the bundled ops and what each supports (does not import torch)."""
    from gradlab import ops

    width = max(len(e.name) for e in ops.BUNDLED)
    for e in ops.BUNDLED:
        order = "2nd order" if e.second_order else "1st order only"
        out.print(f"{e.name:<{width}}  {order:<14}  {'/'.join(e.devices):<8}  {e.summary}",
                  markup=False, highlight=False)


#: Arguments and options that check and bench share.
What = Annotated[list[str], typer.Argument(help="bundled op name(s), SPEC.yaml or folder")]
ReportDir = Annotated[Path, typer.Option("--report-dir", help="where the report files go")]
Seed = Annotated[int, typer.Option("--seed", help="seed of the random inputs")]
#: CI options (docs/ci.md); the files they write are gradlab.render's.
Junit = Annotated[Path | None, typer.Option("--junit", help="also write JUnit XML to this file",
                                            dir_okay=False)]
SummaryMd = Annotated[Path | None, typer.Option("--summary-md", dir_okay=False,
                                                help="also write a Markdown summary here")]
Plots = Annotated[bool, typer.Option("--plots", help="write PNG plots to REPORT_DIR/plots "
                                     "(needs matplotlib: the plots extra)")]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="print only the failures and the "
                                     "verdict line")]
Shard = Annotated[str | None, typer.Option("--shard", help="run only shard I of N (I/N) of the "
                                           "cases; `gradlab merge` joins the reports")]
FailFast = Annotated[bool, typer.Option("--fail-fast", help="stop after the first failing "
                                        "case (the report is still written)")]
Match = Annotated[list[str] | None, typer.Option("-k", "--match", help="only cases whose "
                                                 "'op/case' contains this (or matches this "
                                                 "glob); repeatable")]


@contextmanager
def progress(label: str, total: int, show: bool = True) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr (gone when done; none when not `show`); yields `step(text)`."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    if not show:
        yield lambda description: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda description: bar.update(task, advance=1, description=description)


def repro_command(what: list[str], seed: int) -> Callable[[str, str, str], str]:
    """How the command line that re-runs one case of this run reads."""
    head = "gradlab check " + " ".join(shlex.quote(w) for w in what)
    tail = f" --seed {seed}" if seed else ""
    return lambda case, dtype, device: (f"{head} --case {shlex.quote(case)} --dtype {dtype} "
                                        f"--device {device}{tail}")


def _check_options(what: list[str], dtype: list[str] | None, device: list[str] | None,
                   report_dir: Path, seed: int, variants: bool, variant: list[str] | None,
                   only: list[str] | None, mode: str, budget: float | None) -> Any:
    """Validate check's options (exit 2 naming the option) and build the run's Options."""
    from gradlab.checks.context import Options
    from gradlab.model import VARIANT_FAMILIES, canonical_check

    if mode not in ("auto", "dense", "fast"):
        raise _fail(f"--mode: expected auto, dense or fast, got {mode!r}")
    try:
        chosen_checks = frozenset(canonical_check(c) for c in only) if only else None
    except ValueError as exc:
        raise _fail(f"--check: {exc}") from None
    chosen_variants: bool | frozenset[str] = variants
    if variant and variants:
        bad = [v for v in variant if v not in VARIANT_FAMILIES]
        if bad:
            raise _fail(f"--variant: unknown family {bad[0]!r} (expected one of "
                        f"{', '.join(VARIANT_FAMILIES)})")
        chosen_variants = frozenset(variant)
    if budget is not None and budget <= 0:
        raise _fail("--budget: expected a positive number of seconds")
    return Options(dtypes=_dtypes(dtype), devices=_devices(device), seed=seed,
                   checks=chosen_checks, variants=chosen_variants, mode=mode, budget=budget,
                   repro_dir=str(report_dir / "repro"), repro_command=repro_command(what, seed))


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
    variant: Annotated[list[str] | None, typer.Option("--variant", help="only these variant "
                                                      "families (repeatable): noncontiguous, "
                                                      "transposed, channels_last, expanded, "
                                                      "grad_output, requires_grad, "
                                                      "undefined_grad, size1")] = None,
    only: Annotated[list[str] | None, typer.Option("--check", help="only these checks: forward, "
                                                   "gradient, contract, jacobian, "
                                                   "second_order")] = None,
    mode: Annotated[str, typer.Option("--mode", help="numerical Jacobians: auto, dense or "
                                      "fast (random probes)")] = "auto",
    budget: Annotated[float | None, typer.Option("--budget", help="stop starting new cases "
                                                 "after this many seconds")] = None,
    match: Match = None, shard: Shard = None, fail_fast: FailFast = False, quiet: Quiet = False,
    junit: Junit = None, summary_md: SummaryMd = None, plots: Plots = False,
) -> None:
    """Check gradients: reference comparison, contract, variants, Jacobians, second order."""
    from gradlab.checks.runner import plan, run
    from gradlab.render.check import render_check
    from gradlab.render.files import write_check_reports
    from gradlab.results import exit_code

    options = _check_options(what, dtype, device, report_dir, seed, variants, variant, only,
                             mode, budget)
    options = replace(options, error_maps=plots, fail_fast=fail_fast)
    targets = _pick(_targets(what, case), match, shard, plots)
    with progress("checking", sum(1 for _ in plan(targets, options)), not quiet) as step:
        report = run(targets, options,
                     on_rows=lambda rows: step(f"{rows[0].op}/{rows[0].case}") if rows else None)
    render_check(report, out, quiet=quiet, empty_ok=shard is not None)
    paths = write_check_reports(report, report_dir)
    _check_extras(report, paths, junit, summary_md, plots, quiet)
    raise typer.Exit(int(exit_code(report, empty_ok=shard is not None)))


def _pick(targets: list[Any], match: list[str] | None, shard: str | None,
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
        raise _fail(str(exc), exc.exit_code) from None


def _check_extras(report: Any, paths: list[Path], junit: Path | None, summary_md: Path | None,
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
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    render_check(report, out, quiet=quiet)
    paths = write_check_reports(report, report_dir)
    _check_extras(report, paths, junit, summary_md, False, quiet)
    raise typer.Exit(int(exit_code(report)))


# bench's option defaults repeat gradlab.bench's DEFAULT_* constants (importing it here would
# load torch for `gradlab --help`); a test keeps them equal.
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
                                            "and implementation, at least")] = 0.2,
    min_samples: Annotated[int, typer.Option("--min-samples", help="samples per phase and "
                                             "implementation, at least")] = 10,
    max_time: Annotated[float, typer.Option("--max-time", help="stop a phase at 3 samples once "
                                            "one implementation spent this long (0: never)")
                        ] = 1.0,
    case: Annotated[list[str] | None, typer.Option("--case", help="only these bench cases")
                    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the random inputs")] = 0,
    threads: Annotated[int | None, typer.Option("--threads", help="torch intra-op threads "
                                                "(default: the current count)")] = None,
    junit: Junit = None, plots: Plots = False,
) -> None:
    """Time forward / backward phases and memory of each Function against its reference."""
    import math

    from gradlab import bench as core
    from gradlab.render.bench import render_bench
    from gradlab.render.benchfile import write_bench_reports
    from gradlab.render.extras import bench_extras, require_plots

    if not (math.isfinite(min_time) and min_time > 0):
        raise _fail(f"--min-time: expected a positive number of seconds, got {min_time:g}")
    if not (math.isfinite(max_time) and max_time >= 0):
        raise _fail(f"--max-time: expected seconds >= 0 (0: no cap), got {max_time:g}")
    if min_samples < 1:
        raise _fail(f"--min-samples: expected at least 1, got {min_samples}")
    if threads is not None and threads < 1:
        raise _fail(f"--threads: expected at least 1, got {threads}")
    options = core.BenchOptions(
        dtypes=_dtypes(dtype), devices=_devices(device), cases=tuple(case) if case else None,
        min_time=min_time, min_samples=min_samples, max_time=max_time, seed=seed,
        threads=threads)
    try:
        require_plots(plots)  # before the run: a missing matplotlib is exit 2, not lost time
        targets = _targets(what, None)  # bench cases are picked by the core (--case included)
        total = core.total_steps(targets, options)
        if options.cases and not total:
            raise _fail(f"--case: no bench case named {', '.join(options.cases)}")
        with progress("benchmarking", total) as step:
            report = core.run(targets, options, on_step=step)
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    render_bench(report, out)
    paths = write_bench_reports(report, report_dir)
    written = bench_extras(report, paths[0], junit=junit, plots=plots)
    out.print("\n".join([f"report: {paths[0]}", f"raw samples: {paths[1]}",
                         *(f"wrote: {p}" for p in written)]), markup=False, highlight=False)
    code = ExitCode.CHECK_FAILED if report.errors else ExitCode.OK
    raise typer.Exit(int(ExitCode.INTERRUPTED if report.interrupted else code))


@app.command()
def compare(
    old: Annotated[Path, typer.Argument(help="the baseline bench-*.json")],
    new: Annotated[Path, typer.Argument(help="the bench-*.json to judge")],
    threshold: Annotated[float, typer.Option("--threshold", help="percent slower that counts "
                                             "as a regression (when significant)")] = 5.0,
) -> None:
    """Compare two bench runs; exit 1 on a significant regression beyond --threshold."""
    import math

    from gradlab import bench as core
    from gradlab.render.bench import render_compare
    from gradlab.render.benchfile import read_bench_json

    if not math.isfinite(threshold) or threshold < 0:
        raise _fail(f"--threshold: expected a non-negative percentage, got {threshold:g}")
    try:
        old_report, new_report = read_bench_json(old), read_bench_json(new)
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    rows = core.compare(old_report, new_report, threshold)
    render_compare(rows, threshold, out, core.env_differences(old_report.env, new_report.env))
    regressed = any(c.regression for c in rows)
    raise typer.Exit(int(ExitCode.CHECK_FAILED if regressed else ExitCode.OK))


def main() -> None:
    """Entry point: run the app, turning gradlab errors into one line and exit code 2."""
    try:
        # standalone_mode=False: click returns typer.Exit's code instead of raising it.
        code = app(standalone_mode=False)
    except GradlabError as exc:
        err.print(f"gradlab: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(int(exc.exit_code))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("gradlab: interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception as exc:
        # Usage errors: typer vendors click, so match the ClickException shape, not the class.
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show()
            sys.exit(int(ExitCode.BAD_INPUT))
        if type(exc).__name__ == "Abort":
            sys.exit(int(ExitCode.INTERRUPTED))
        raise
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

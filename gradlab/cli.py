"""The Typer CLI: parse arguments, call the core, render, pick the exit code.

Heavy imports (torch, pandas, the engine) happen inside the commands so `gradlab list` and
`--help` start fast.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gradlab.errors import ExitCode, GradlabError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Verify and benchmark gradients of custom torch.autograd.Functions.")


def _width(stream: Any) -> int | None:
    """Console width: the terminal's, or COLUMNS (rich reads it), else 160 when piped (CI
    logs and files are read in wide windows; rich's fallback is 80)."""
    return None if stream.isatty() or os.environ.get("COLUMNS", "").isdigit() else 160


out = Console(width=_width(sys.stdout))
err = Console(stderr=True, width=_width(sys.stderr))

DEFAULT_REPORT_DIR = "reports"
#: Per-case limit of `check` (isolated runs): far above any normal case (the bundled ones take
#: well under a second each), low enough that a hang fails a CI job long before its own limit.
DEFAULT_TIMEOUT_S = 300.0


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


def _devices(values: list[str] | None, available: bool = True) -> tuple[str, ...] | None:
    """--device values; with `available`, a device this machine lacks is exit 2."""
    if not values:
        return None
    for v in values:
        if v not in ("cpu", "cuda"):
            raise _fail(f"--device: expected cpu or cuda, got {v!r}")
    if "cuda" in values and available:
        import torch

        if not torch.cuda.is_available():
            raise _fail("--device cuda: torch.cuda.is_available() is False on this machine "
                        f"(torch {torch.__version__})")
    return tuple(values)


def _require_devices(targets: list[Any], devices: tuple[str, ...] | None,
                     skip_unavailable: bool) -> None:
    """Exit 2 when a spec asks for a device this machine lacks (a CPU runner told to check CUDA
    would otherwise skip everything and look green), unless the user said to skip those."""
    if skip_unavailable:
        return
    for t in targets:
        if "cuda" in (devices or t.devices or ("cpu",)):
            import torch

            if not torch.cuda.is_available():
                where = f"{t.source}: devices" if t.source else "devices"
                raise _fail(f"{where}: cuda is not available on this machine (torch "
                            f"{torch.__version__}); pass --skip-unavailable to skip those cases")


def _max_memory(value: str | None) -> int | None:
    """--max-memory in bytes (None: the default, a fraction of the available memory)."""
    from gradlab.guard import parse_size

    try:
        return None if value is None else parse_size(value)
    except ValueError as exc:
        raise _fail(f"--max-memory: {exc}") from None


def _report_folder(folder: Path) -> None:
    """Exit 2 naming the report folder when it cannot be written, before any work is done."""
    from gradlab.fileio import ensure_writable

    try:
        ensure_writable(folder)
    except GradlabError as exc:
        raise _fail(f"--report-dir: {exc}", exc.exit_code) from None


def _targets(what: list[str], cases: list[str] | None,
             max_memory: int | None = None) -> list[Any]:
    from dataclasses import replace

    from gradlab.spec import resolve

    targets = [t for w in what for t in resolve(w, max_memory)]
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
MaxMemory = Annotated[str | None, typer.Option(
    "--max-memory", help="refuse a case whose tensors need more memory than this, e.g. 8GiB "
                         "(default: a quarter of the available memory)")]


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job cancelled, a container stopped) stops the run like Ctrl-C does, so the
    finished rows are still written."""
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _check_options(what: list[str], dtype: list[str] | None, device: list[str] | None,
                   report_dir: Path, seed: int, variants: bool, variant: list[str] | None,
                   only: list[str] | None, mode: str, budget: float | None,
                   strict: bool = False, skip_unavailable: bool = False,
                   isolate: bool = False, timeout: float = 0.0) -> Any:
    """Validate check's options (exit 2 naming the option) and build the run's Options."""
    import math

    from gradlab.checks.context import Options
    from gradlab.model import VARIANT_FAMILIES, canonical_check
    from gradlab.repro import ReproCommand

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
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise _fail("--budget: expected a positive number of seconds")
    if not (math.isfinite(timeout) and timeout >= 0):
        raise _fail(f"--timeout: expected seconds >= 0 (0: no limit), got {timeout:g}")
    devices = _devices(device, available=not skip_unavailable)
    return Options(dtypes=_dtypes(dtype), devices=devices, seed=seed, strict=strict,
                   skip_unavailable=skip_unavailable, isolate=isolate,
                   timeout=timeout or None,
                   checks=chosen_checks, variants=chosen_variants, mode=mode, budget=budget,
                   repro_dir=str(report_dir / "repro"),
                   repro_command=ReproCommand(tuple(what), seed))


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
    strict: Annotated[bool, typer.Option("--strict", help="a capability the reference has and "
                                         "the Function lacks (a warn row) fails the run")
                      ] = False,
    skip_unavailable: Annotated[bool, typer.Option("--skip-unavailable", help="skip (and say "
                                                   "so) the cases on a device this machine "
                                                   "lacks, instead of exit 2")] = False,
    isolate: Annotated[bool, typer.Option("--isolate/--no-isolate", help="run cases in a "
                                          "worker process: a segfault, exit or hang fails "
                                          "that case only")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds one case may run "
                                           "(isolated runs only; 0: no limit)")
                       ] = DEFAULT_TIMEOUT_S,
    wide: Annotated[bool, typer.Option("--wide", help="every column, whatever the width")
                    ] = False,
    max_memory: MaxMemory = None,
) -> None:
    """Check gradients: reference comparison, contract, variants, Jacobians, second order."""
    options = _check_options(what, dtype, device, report_dir, seed, variants, variant, only,
                             mode, budget, strict, skip_unavailable, isolate, timeout)
    if isolate:
        from gradlab.checks.isolate import warm_up

        warm_up()
    _report_folder(report_dir)
    try:
        targets = _targets(what, case, _max_memory(max_memory))
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    _require_devices(targets, options.devices, skip_unavailable)
    from gradlab.render.files import CheckReportWriter

    writer = CheckReportWriter(report_dir)
    _finish_check(_run_check(targets, options, writer), writer, wide)


def _finish_check(report: Any, writer: Any, wide: bool = False) -> None:
    """Render, write the report, then say the verdict and exit with its code."""
    from gradlab.render.check import render_check, render_verdict

    render_check(report, out, verdict=False, wide=wide)
    paths = writer.write(report, final=True)
    # the verdict comes once the report is safely on disk
    render_verdict(report, out)
    out.print(f"report: {paths[0]}", markup=False, highlight=False)
    if report.interrupted:
        err.print(f"gradlab: interrupted; the partial report is {paths[0]}", markup=False,
                  highlight=False, soft_wrap=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if report.internal_errors:
        raise typer.Exit(int(ExitCode.INTERNAL))
    raise typer.Exit(int(ExitCode.OK if report.passed else ExitCode.CHECK_FAILED))


def _run_check(targets: list[Any], options: Any, writer: Any) -> Any:
    """Run the checks with a progress bar (a terminal) or progress lines (a log), the report
    rewritten as cases finish."""
    from dataclasses import replace

    from gradlab.checks.isolate import picklable
    from gradlab.checks.runner import plan, run
    from gradlab.render.progress import LogProgress, progress

    if options.isolate:
        why = picklable(targets, options)
        if why:
            err.print(f"gradlab: running in-process (cannot isolate: {why})", markup=False,
                      highlight=False, soft_wrap=True)
            options = replace(options, isolate=False)
    from gradlab.envinfo import environment
    from gradlab.results import Report

    partial = Report(env=environment(seed=options.seed))
    log = None if err.is_terminal else LogProgress(err)
    with sigterm_as_interrupt(), progress("checking", sum(1 for _ in plan(targets, options)),
                                          err) as step:
        def on_rows(rows: list[Any]) -> None:
            partial.extend(rows)
            writer.write(partial)
            if rows:
                step(f"{rows[0].op}/{rows[0].case}")
            if log is not None:
                log.rows_done(rows)

        report = run(targets, options, on_rows=on_rows,
                     on_wait=log.waiting if log is not None else None)
    if log is not None:
        log.flush()
    return report


@app.command()
def repro(
    file: Annotated[Path, typer.Argument(help="a repro file (reports/repro/*.pt)")],
    report_dir: ReportDir = Path(DEFAULT_REPORT_DIR),
    wide: Annotated[bool, typer.Option("--wide", help="every column, whatever the width")
                    ] = False,
) -> None:
    """Re-run one failing case on the inputs saved in its repro file."""
    from gradlab.checks.context import Options
    from gradlab.checks.runner import run
    from gradlab.repro import load_repro

    try:
        target, dtype, device, seed = load_repro(file)
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    from gradlab.render.files import CheckReportWriter

    options = Options(dtypes=(dtype,), devices=(device,), seed=seed, skip_unavailable=True)
    _finish_check(run([target], options), CheckReportWriter(report_dir), wide)


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
    max_memory: MaxMemory = None,
) -> None:
    """Time forward / backward phases and memory of each Function against its reference."""
    # The option defaults repeat gradlab.bench's DEFAULT_* constants (importing it here would
    # load torch for `gradlab --help`); a test keeps them equal.
    import math

    from gradlab import bench as core
    from gradlab.render.bench import render_bench
    from gradlab.render.benchfile import write_bench_reports
    from gradlab.render.progress import progress

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
        min_time=min_time, min_samples=min_samples, max_time=max_time, seed=seed, threads=threads)
    _report_folder(report_dir)
    try:
        # bench cases (--case included) are picked by the core
        targets = _targets(what, None, _max_memory(max_memory))
        total = core.total_steps(targets, options)
        if options.cases and not total:
            raise _fail(f"--case: no bench case named {', '.join(options.cases)}")
        with progress("benchmarking", total, err) as step:
            report = core.run(targets, options, on_step=step)
    except GradlabError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    render_bench(report, out)
    paths = write_bench_reports(report, report_dir)
    out.print(f"report: {paths[0]}\nraw samples: {paths[1]}", markup=False, highlight=False)
    if report.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    raise typer.Exit(int(ExitCode.CHECK_FAILED if report.errors else ExitCode.OK))


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
        # anything else is a bug in gradlab: its own exit code, never 1 (a failed check)
        import traceback

        traceback.print_exc()
        err.print(f"gradlab: internal error: {type(exc).__name__}: {exc} (a gradlab bug; please "
                  "report it with the traceback above)", markup=False, highlight=False,
                  soft_wrap=True)
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

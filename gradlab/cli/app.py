"""The CLI's shared parts: the Typer app, the consoles, option parsing shared by the commands.

Heavy imports (torch, pandas, the engine) happen inside the commands so `gradlab list` and
`--help` start fast.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from gradlab import guard
from gradlab.errors import ExitCode, GradlabError, SpecError, unknown_name
from gradlab.render.console import make_console

# rich_markup_mode=None: plain click help (the rich panels label every flag `<bool>`)
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Verify and benchmark gradients of custom torch.autograd.Functions.")


# Colour only on a terminal and never under NO_COLOR; piped output wide unless COLUMNS is set.
out = make_console()
err = make_console(stderr=True)

DEFAULT_REPORT_DIR = "reports"
#: Per-case limit of `check` (isolated runs): the one default of gradlab.guard.
DEFAULT_TIMEOUT_S = guard.DEFAULT_TIMEOUT_S


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    err.print(f"gradlab: error: {message}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(int(code))


def parse_dtypes(values: list[str] | None) -> tuple[str, ...] | None:
    from gradlab.model import canonical_dtype

    if not values:
        return None
    try:
        return tuple(canonical_dtype(v) for v in values)
    except ValueError as exc:
        raise fail(f"--dtype: {exc}") from None


def parse_devices(values: list[str] | None, available: bool = True) -> tuple[str, ...] | None:
    """--device values; with `available`, a device this machine lacks is exit 2."""
    if not values:
        return None
    for v in values:
        if v not in ("cpu", "cuda"):
            raise fail(f"--device: {unknown_name('device', v, ('cpu', 'cuda'))}")
    if "cuda" in values and available:
        import torch

        if not torch.cuda.is_available():
            raise fail("--device cuda: torch.cuda.is_available() is False on this machine "
                        f"(torch {torch.__version__})")
    return tuple(values)


def require_devices(targets: list[Any], devices: tuple[str, ...] | None,
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
                raise fail(f"{where}: cuda is not available on this machine (torch "
                            f"{torch.__version__}); pass --skip-unavailable to skip those cases")


def parse_max_memory(value: str | None) -> int | None:
    """--max-memory in bytes (None: the default, a fraction of the available memory)."""
    from gradlab.guard import parse_size

    try:
        return None if value is None else parse_size(value)
    except ValueError as exc:
        raise fail(f"--max-memory: {exc}") from None


def load_targets(what: list[str], cases: list[str] | None, max_memory: int | None = None,
                 paths: list[Path] | None = None, imports: bool = True) -> list[Any]:
    """The targets of the ops, spec files and folders named (`paths`: --path folders to import
    from), narrowed to the `cases` named (check cases; bench picks its own).  Every spec is
    validated before any module it names is imported; `imports=False` leaves that to
    gradlab.spec.import_callables."""
    from dataclasses import replace

    from gradlab.spec import add_import_paths, import_callables, look_up_callables, resolve

    for folder in paths or ():
        if not folder.is_dir():
            raise GradlabError(f"--path: {folder}: no such folder")
    add_import_paths(paths or ())
    targets = [t for w in what for t in resolve(w, max_memory, imports=False)]
    look_up_callables(targets)  # a misspelt module or attribute before torch or a worker
    if imports:
        targets = import_callables(targets)
    if cases:
        require_cases(cases, [c.name for t in targets for c in t.op.cases])
        targets = [replace(t, op=replace(t.op, cases=keep)) for t in targets
                   if (keep := tuple(c for c in t.op.cases if c.name in cases))]
    return targets


def import_targets(targets: list[Any]) -> list[Any]:
    """`targets` (loaded with imports=False) with the modules their specs name imported; an
    import error is exit 2 naming file and key, and stops the warm workers no run will take."""
    from gradlab.checks.run.warm import cool_down
    from gradlab.spec import import_callables

    try:
        return import_callables(targets)
    except GradlabError as exc:
        cool_down()
        raise fail(str(exc), exc.exit_code) from None


def require_cases(asked: list[str], known: list[str], what: str = "case") -> None:
    """GradlabError (exit 2) for a --case name no loaded op has, with the closest one."""
    for name in asked:
        if name not in known:
            hint = unknown_name("", name, known, f"{what}s") if known else "(none loaded)"
            raise GradlabError(f"--case: no {what} named {name!r} {hint}")


def machine_devices(wanted: set[str]) -> set[str]:
    """Which of the devices in `wanted` this machine has (torch is imported only when cuda is
    among them: listing cpu-only specs stays fast)."""
    has = wanted & {"cpu"}
    if "cuda" in wanted:
        import torch

        if torch.cuda.is_available():
            has.add("cuda")
    return has


def device_cell(declared: tuple[str, ...], has: set[str]) -> str:
    """A spec's declared devices, each this machine lacks marked `*`: `cpu`, `cpu/cuda*`."""
    return "/".join(d if d in has else f"{d}*" for d in declared)


def devices_note(has: set[str], declared: set[str]) -> str:
    """The line under the op list saying what its devices column means."""
    note = "devices: as each op's spec declares them (gradlab/specs/NAME.yaml, default cpu)"
    missing = sorted(declared - has)
    if not missing:
        return f"{note}; this machine has all of them."
    return (f"{note}; *: not on this machine (torch.cuda.is_available() is False): gradlab "
            "check stops on them unless given --skip-unavailable or --device cpu.")


@app.command("list")
def list_ops(wide: Annotated[bool, typer.Option("--wide", help="every column, whatever the "
                                               "width")] = False) -> None:
    """List the bundled ops, the devices their specs declare and what each supports (imports
    torch only when a spec declares cuda, to ask whether this machine has it)."""
    import textwrap

    from gradlab import ops
    from gradlab.render.capabilities import capability_table
    from gradlab.results.capabilities import from_states
    from gradlab.spec import load_bundled

    # load_bundled: each spec file read and parsed once (load_file's `op: NAME` reads it again)
    declared = {t.op.name: t.devices or ("cpu",)  # no devices: in a spec checks the cpu
                for e in ops.BUNDLED for t in load_bundled(e.name)}
    has = machine_devices({d for ds in declared.values() for d in ds})
    cells = {name: device_cell(ds, has) for name, ds in declared.items()}
    width = max(len(e.name) for e in ops.BUNDLED)
    dwidth = max(len(c) for c in cells.values())
    for e in ops.BUNDLED:
        lead = f"{e.name:<{width}}  {cells.get(e.name, '-'):<{dwidth}}  "
        # a long summary continues under itself, not at the line's start
        line = lead + e.summary if wide else textwrap.fill(
            e.summary, max(len(lead) + 20, out.width), initial_indent=lead,
            subsequent_indent=" " * len(lead), break_on_hyphens=False, break_long_words=False)
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    note = devices_note(has, {d for ds in declared.values() for d in ds})
    out.print(note if wide else textwrap.fill(note, out.width), markup=False, highlight=False,
              soft_wrap=True)
    matrix = [from_states(e.name, e.capabilities) for e in ops.BUNDLED]
    out.print(capability_table(matrix, None if wide else out.width,
                               title="capabilities, measured on the CPU (gradlab check specs/ "
                                     "--capabilities all)"))


#: Arguments and options that check and bench share.
What = Annotated[list[str], typer.Argument(help="bundled op name(s), SPEC.yaml or folder")]
ReportDir = Annotated[Path, typer.Option("--report-dir", help="where the report files go")]
Seed = Annotated[int, typer.Option("--seed", help="seed of the random inputs")]
Wide = Annotated[bool, typer.Option("--wide", help="every column, whatever the width")]
TableMode = Annotated[str, typer.Option("--table", help="compact: a line per passing case "
                                        "(dtypes, variants, worst error), every line of the "
                                        "others; full: a line per check of every case")]


def full_table(mode: str) -> bool:
    """--table: True for full (a line per check of every case), False for compact."""
    if mode not in ("compact", "full"):
        raise fail(f"--table: expected compact or full, got {mode!r}")
    return mode == "full"
#: CI options (docs/ci.md); the files they write are gradlab.render's.
# (a folder given is refused by gradlab.cli.ci.check_outputs, in one line naming the option)
Junit = Annotated[Path | None, typer.Option("--junit", help="also write JUnit XML to this file")]
SummaryMd = Annotated[Path | None, typer.Option("--summary-md",
                                                help="also write a Markdown summary here")]
Plots = Annotated[bool, typer.Option("--plots", help="write PNG plots to REPORT_DIR/plots "
                                     "(needs matplotlib: the plots extra)")]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="print only the failures and the "
                                     "verdict line")]
Shard = Annotated[str | None, typer.Option("--shard", help="run only shard I of N (I/N) of the "
                                           "cases; `gradlab merge` joins the reports")]
FailFast = Annotated[bool, typer.Option("--fail-fast", help="stop after the first failing "
                                        "case (the report is still written; one worker)")]
Match = Annotated[list[str] | None, typer.Option("-k", "--match", help="only cases whose "
                                                 "'op/case' contains this (or matches this "
                                                 "glob); repeatable")]
ImportPaths = Annotated[list[Path] | None, typer.Option(
    "--path", help="a folder to import function:/reference: modules from (repeatable; after "
                   "the spec file's own folder, before sys.path and the current directory)")]
MaxMemory = Annotated[str | None, typer.Option(
    "--max-memory", help="refuse a case whose tensors need more memory than this, e.g. 8GiB; "
                         "dense Jacobians past a quarter of it run probes instead "
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


VARIANT_HELP = ("only the rows of these variants (repeatable): a family (noncontiguous, "
                "transposed, channels_last, expanded, grad_output, requires_grad, "
                "undefined_grad, size1, magnitude, ragged, small, special, ties, "
                "repeated_index, sentinel), one variant as the report names it "
                "('noncontiguous[0]'), or base (the case itself, and the checks made on it "
                "only: jacobian, ...)")

Strict = Annotated[bool, typer.Option("--strict", help="a warn row (a likely bug that leaves "
                                      "every result right) fails the run")]
SkipUnavailable = Annotated[bool, typer.Option("--skip-unavailable", help="skip (and say so) the "
                                               "cases on a device this machine lacks, instead "
                                               "of exit 2")]
Isolate = Annotated[bool, typer.Option("--isolate/--no-isolate", help="run cases in a worker "
                                       "process: a segfault, exit or hang fails that case only",
                                       envvar="GRADLAB_ISOLATE")]
Timeout = Annotated[float, typer.Option("--timeout", help="seconds one case may run, all its "
                                        "dtypes and checks together (isolated runs only; 0: no "
                                        "limit)")]
ShowChecks = Annotated[list[str] | None, typer.Option(
    "--show", help="report only these checks' rows (repeatable); what they are judged against "
                   "still runs (a repro command's one row)")]
OpNames = Annotated[list[str] | None, typer.Option("--op", help="only these ops (repeatable; "
                                                "names as the report shows them)")]
Capabilities = Annotated[str, typer.Option("--capabilities", help="capabilities measured: "
                                           "default (all but torch.compile) or all (adds "
                                           "torch.compile: seconds per op)")]


def spec_mistake(report: Any, targets: list[Any], written: list[Path]) -> None:
    """Exit 2 with one line naming the spec file and the case's key when the Function and the
    reference both raised on a case's own inputs (the run stopped there): the spec's
    mistake, as bad input as a wrong key, not the Function's crash."""
    from gradlab.results import SPEC_INPUTS

    row = next((r for r in report.rows if r.reason == SPEC_INPUTS), None)
    if row is None:
        return
    for path in written:  # a partial report written before the mistake came to light
        path.unlink(missing_ok=True)
    t = next(t for t in targets if t.op.name == row.op)
    key = next((c.key for c in t.op.cases if c.name == row.case), "")
    raise fail(str(SpecError(f"case {row.case!r} ({row.dtype}): the Function and the "
                             f"reference both raise on its inputs: {row.note}",
                             source=t.source, key=key or None)))



#: Seconds of the explore search per case and device when `--explore` names none.
DEFAULT_EXPLORE_S = 10.0
Explore = Annotated[str | None, typer.Option(
    "--explore", metavar="[BUDGET]",
    help="also search inputs a caller can produce (sizes incl. empty and size-1, signs, "
         f"zeros, ties, tiny/large values) for BUDGET seconds per case (default "
         f"{DEFAULT_EXPLORE_S:g}); a failure is shrunk and printed as a spec case")]


def explore_argv(argv: list[str]) -> list[str]:
    """argv with the default budget after a `--explore` given without one (click has no option
    whose value may be left out: the next word is taken only when it is a number)."""
    out: list[str] = []
    for k, word in enumerate(argv):
        if word == "--":  # what follows is another command's (gradlab record -- CMD ...)
            return out + argv[k:]
        out.append(word)
        if word == "--explore" and not _number(argv[k + 1] if k + 1 < len(argv) else ""):
            out.append(f"{DEFAULT_EXPLORE_S:g}")
    return out


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def explore_budget(value: str | None) -> float:
    """--explore's seconds (0: not asked), exit 2 naming the option for anything else."""
    import math

    if value is None:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise fail(f"--explore: expected a positive number of seconds, got {value!r}")
    return seconds

"""pytest plugin (entry point `pytest11: gradlab`): gradlab spec files as tests, one item per op
and case, named 'op/case', failing with gradlab's diagnosis.

Which YAML files it collects, conservatively (a repository's other YAML is never touched):

1. a `*.yaml` / `*.yml` file named on the command line (`pytest specs/conv2d.yaml`);
2. the `*.yaml` / `*.yml` files directly in a folder named on the command line
   (`pytest specs/`), as `gradlab check specs/` reads a folder: not its subfolders, and not the
   `testpaths` pytest falls back on when no path is given;
3. files whose path relative to the rootdir matches a glob of the ini option `gradlab_specs`
   (fnmatch: `*` also crosses folders), wherever pytest's own collection walks;

and of those only files that parse as gradlab specs: a YAML mapping with an `op:`, `function:`
or `ops:` key.  An invalid spec of that shape is a collection error naming file and key.

Each item runs in a worker process (gradlab.checks.run.isolate), as `gradlab check` runs cases: a
Function that segfaults, exits or hangs past gradlab.guard.DEFAULT_TIMEOUT_S fails its item
(naming the signal) and the session goes on.  One worker serves the whole session (kept
between items, replaced after a death), started as collection ends: an item costs a few
milliseconds more than in-process (docs/ci.md).  `--gradlab-inprocess` (or GRADLAB_ISOLATE=0,
as for `gradlab check`) runs items in pytest's own process instead (a debugger's breakpoints in
a Function work there).
"""

from __future__ import annotations

import fnmatch
import shlex
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gradlab.errors import ExitCode, GradlabError
from gradlab.model import Case, Target

SUFFIXES = (".yaml", ".yml")
#: Top-level keys that make a YAML mapping a gradlab spec.
SPEC_KEYS = ("op", "function", "ops")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("gradlab_specs", type="linelist", default=[],
                  help="gradlab: globs (relative to the rootdir) of spec files to collect as "
                       "tests, besides spec files and folders named on the command line")
    parser.addoption("--gradlab-inprocess", action="store_true", default=False,
                     help="gradlab: run spec items in pytest's process, not in a worker (a "
                          "segfault in a Function then ends the session)")
    parser.addoption("--gradlab-record", metavar="DIR", default=None,
                     help="gradlab: record the session's calls of custom autograd.Functions "
                          "and torch.library ops into the spec folder DIR (new or empty), "
                          "as `gradlab record` does; `gradlab check DIR` checks them")
    parser.addoption("--gradlab-record-max-signatures", metavar="N", type=int, default=None,
                     help="gradlab: distinct signatures kept per op (default 3)")


#: The --gradlab-record session of this process (one per pytest run).
RECORDING = pytest.StashKey[Any]()


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("gradlab_record", default=None)
    if folder is None:
        return
    from gradlab.record.command import MAX_SIGNATURES
    from gradlab.record.session import InProcess

    path = Path(folder)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise pytest.UsageError(f"--gradlab-record: {folder} exists and is not an empty folder")
    path.mkdir(parents=True, exist_ok=True)
    n = config.getoption("gradlab_record_max_signatures") or MAX_SIGNATURES
    if n < 1:
        raise pytest.UsageError("--gradlab-record-max-signatures: expected at least 1")
    session = InProcess(path, n)
    session.start()
    config.stash[RECORDING] = session


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    recording = session.config.stash.get(RECORDING, None)
    if recording is None:
        return
    del session.config.stash[RECORDING]
    what = shlex.join(["pytest", *session.config.invocation_params.args])
    done = recording.finish(what, int(exitstatus))
    session.config.stash[RECORDED] = (done, str(recording.folder))


RECORDED = pytest.StashKey[Any]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    recorded = config.stash.get(RECORDED, None)
    if recorded is None:
        return
    from gradlab.render.record import record_lines

    terminalreporter.section("gradlab record")
    for line in record_lines(*recorded)[1:]:  # the first says how a command ended
        terminalreporter.write_line(line)


def isolated(config: pytest.Config) -> bool:
    """Whether spec items run in a worker process: the default, unless --gradlab-inprocess or
    GRADLAB_ISOLATE=0 (the CLI's switch, honoured alike)."""
    if config.getoption("gradlab_inprocess", default=False):
        return False
    from gradlab.checks.run.options import switched_off

    return not switched_off("GRADLAB_ISOLATE")


def pytest_collection_finish(session: pytest.Session) -> None:
    # the worker imports torch while pytest reports collection and runs the tests before
    if isolated(session.config) and any(isinstance(i, SpecItem) for i in session.items):
        from gradlab.checks.run.warm import warm_up

        warm_up(1)


def pytest_unconfigure(config: pytest.Config) -> None:
    if "gradlab.checks.run.isolate" in sys.modules:  # only when a spec item ran isolated
        from gradlab.checks.run.isolate import close_idle

        close_idle()


def looks_like_spec(path: Path) -> bool:
    """True when `path` holds a YAML mapping with an op:, function: or ops: key."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(doc, dict) and any(k in doc for k in SPEC_KEYS)


def _named_paths(config: pytest.Config) -> list[Path]:
    """The paths given on the command line (not testpaths), resolved."""
    source = getattr(config, "args_source", None)
    if source is None or source != pytest.Config.ArgsSource.ARGS:
        return []
    base = Path(config.invocation_params.dir)
    return [(base / a.split("::")[0]).resolve() for a in config.args]


def wanted(config: pytest.Config, path: Path) -> bool:
    """Whether rules 1-3 of the module docstring select `path` (its content not yet read)."""
    if path.suffix not in SUFFIXES:
        return False
    real = path.resolve()
    named = _named_paths(config)
    if real in named or real.parent in named:
        return True
    globs = config.getini("gradlab_specs")
    if globs:
        try:
            rel = path.absolute().relative_to(config.rootpath).as_posix()
        except ValueError:
            return False
        return any(fnmatch.fnmatch(rel, g) for g in globs)
    return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if wanted(parent.config, file_path) and looks_like_spec(file_path):
        return SpecFile.from_parent(parent, path=file_path)
    return None


class SpecFile(pytest.File):
    """A gradlab spec file: one item per op and case."""

    def collect(self) -> Iterator[pytest.Item]:
        from gradlab.spec import load_file

        try:
            targets = load_file(self.path)
        except GradlabError as exc:
            raise self.CollectError(f"gradlab: {exc}") from None
        seen: set[str] = set()
        for t in targets:
            for case in t.op.cases:
                name = f"{t.op.name}/{case.name}"
                k = 2
                while name in seen:  # two ops of one file with the same label
                    name = f"{t.op.name}/{case.name}#{k}"
                    k += 1
                seen.add(name)
                yield SpecItem.from_parent(self, name=name, target=t, case=case)


class SpecFailure(AssertionError):
    """A case failed its checks; the message is the diagnosis."""


class SpecItem(pytest.Item):
    """One case of one op: every dtype, device, variant and check gradlab runs for it."""

    def __init__(self, *, target: Target, case: Case, **kw: Any) -> None:
        super().__init__(**kw)
        self.target = replace(target, op=replace(target.op, cases=(case,)))
        self.case = case

    def runtest(self) -> None:
        from gradlab.checks.run.driver import run
        from gradlab.render.diagnosis import skip_reason
        from gradlab.results import SKIP, exit_code
        from gradlab.testing import failure_text

        report = run([self.target], self.options())
        if report.interrupted:  # Ctrl-C (the run caught it to keep its rows): pytest's to act on
            raise KeyboardInterrupt
        if report.rows and all(r.status == SKIP for r in report.rows):
            pytest.skip(skip_reason(report.rows))
        if exit_code(report) != ExitCode.OK:
            # --op too: ops of one spec may share a case name (the CLI's repro lines name both)
            rerun = (f"re-run: gradlab check {shlex.quote(self.shown_path())} --op "
                     f"{shlex.quote(self.target.op.name)} --case {shlex.quote(self.case.name)}")
            raise SpecFailure(f"{failure_text(report, f'{self.name} in {self.shown_path()}')}"
                              f"\n\n{rerun}")

    def options(self) -> Any:
        """The run's Options: isolated in a kept worker unless --gradlab-inprocess (or the
        target cannot travel to one: a Function that does not pickle)."""
        from gradlab.checks.run.isolate import picklable
        from gradlab.checks.run.options import Options
        from gradlab.guard import DEFAULT_TIMEOUT_S

        options = Options()
        if not isolated(self.config) or picklable([self.target], options):
            return options
        return replace(options, isolate=True, keep_workers=True, timeout=DEFAULT_TIMEOUT_S)

    def shown_path(self) -> str:
        """The spec's path as the person typed it: relative to where pytest was started."""
        try:
            return str(self.path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(self.path)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, SpecFailure):
            return str(excinfo.value)  # the diagnosis, not a traceback into gradlab
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"gradlab {self.name}"

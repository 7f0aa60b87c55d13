"""Runs that survive the code they check: worker processes, timeouts, signals, exit codes.

tests/data/faulty/faulty.yaml holds Functions that raise, return NaN, hang, call os._exit or
sys.exit, segfault and change global state, each followed by a correct op.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from multiprocessing import Pipe
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import DATA

from gradlab.checks.run import driver
from gradlab.checks.run.isolate import describe_exit, picklable
from gradlab.checks.run.options import Options
from gradlab.spec import resolve

FAULTY = DATA / "faulty"
REPO = Path(__file__).resolve().parent.parent


def in_the_foreground() -> None:
    """Ctrl-C's signals as a terminal's foreground command gets them (run in the child).

    A suite started as a background job of a script (`cmd &`, nohup) hands every process it
    starts SIGINT and SIGQUIT ignored, and Python leaves an ignored SIGINT ignored: the
    interrupt test then sent a SIGINT nothing could act on (SigIgn 0x1001007, measured), and
    failed on every loaded run started that way while passing in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def gradlab_cli(*args: str, cwd: Path, **kw: object) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="100")
    env.pop("GRADLAB_ISOLATE", None)  # the real default: isolated (see conftest.py)
    return subprocess.Popen([sys.executable, "-m", "gradlab", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=in_the_foreground, **kw)


def report_rows(folder: Path) -> tuple[pd.DataFrame, dict[str, object]]:
    (csv,) = folder.glob("check-*.csv")
    (js,) = folder.glob("check-*.json")
    return pd.read_csv(csv), json.loads(js.read_text())


def test_faulty_functions_fail_alone_and_the_run_completes(tmp_path: Path) -> None:
    # two workers: a dead or hung one is replaced while the other goes on.  --timeout 2: what
    # stops Hangs, and far more than a correct op's item needs even on a loaded machine (a
    # few milliseconds: its worker has imported torch and run a first backward before the
    # clock starts, isolate.prime_autograd)
    proc = gradlab_cli("check", "faulty.yaml", "--timeout", "2", "--report-dir", str(tmp_path),
                       "--jobs", "2", cwd=FAULTY)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, out + err
    assert "Traceback" not in out + err
    frame, doc = report_rows(tmp_path)
    failed = set(frame[frame["status"].isin(["fail", "error"])]["op"])
    assert failed == {"Raises", "NanForward", "Hangs", "Exits", "SysExits", "Segfaults",
                      "ChangesState"}
    ok = frame[frame["op"].str.startswith("ok_after_")]
    assert set(ok["op"]) == {f"ok_after_{n}" for n in failed}
    assert set(ok["status"]) == {"pass"}, ok[ok["status"] != "pass"]
    hints = dict(zip(frame["op"] + "/" + frame["check"], frame["hint"], strict=False))
    assert hints["Hangs/gradient"] == "timeout"  # its backward hangs: the gradient step
    assert hints["Exits/forward"] == "worker_died"
    assert hints["Segfaults/forward"] == "worker_died"
    assert "SIGSEGV" in " ".join(frame[frame["op"] == "Segfaults"]["note"].astype(str))
    assert "exit code 1" in " ".join(frame[frame["op"] == "Exits"]["note"].astype(str))
    assert doc["passed"] is False


def test_sys_exit_in_process_is_the_functions_crash() -> None:
    sys.path.insert(0, str(FAULTY))
    try:
        bad = resolve(str(FAULTY / "faulty.yaml"))[8]
        report = driver.run([bad], Options(isolate=False))
    finally:
        sys.path.remove(str(FAULTY))
    assert bad.op.name == "SysExits"
    assert any(r.status == "error" and "SystemExit: 5" in r.note for r in report.rows)


#: A passing op, then one that hangs: an interrupt after the first op's progress line lands
#: while the run is certainly still going (a timing-based wait on the bundled specs once sent
#: its signal after a loaded machine had already finished the run).
HALF_WAY = """\
ops:
  - function: faulty_functions:Double
    name: quick
    reference: faulty_functions:double_reference
    dtypes: [float64]
    args: [{shape: [3, 4]}]
  - function: faulty_functions:Hangs
    reference: faulty_functions:double_reference
    variants: false
    dtypes: [float64]
    args: [{shape: [3, 4]}]
"""


#: HALF_WAY with quick as one work item (no variants, no numerical checks), so its rows reach
#: the report all at once: with its numerical item's rows (a warn among them) arriving in a
#: later write than its case's, what a partial report held depended on when it was read.
#: (Not for the interrupt tests: they need the run still going when the signal comes.)
HALF_WAY_ONE_ITEM = HALF_WAY.replace(
    "    name: quick\n", "    name: quick\n    variants: false\n"
    "    checks: [forward, gradient, contract]\n", 1)


def half_way(tmp_path: Path, *extra: str, spec: str = HALF_WAY) -> subprocess.Popen[str]:
    """`gradlab check` of HALF_WAY (or `spec`), started."""
    (tmp_path / "half_way.yaml").write_text(spec)
    return gradlab_cli("check", str(tmp_path / "half_way.yaml"), "--report-dir", str(tmp_path),
                       "--path", str(FAULTY), *extra, cwd=tmp_path)


def signal_state(pid: int) -> str:
    """The signal masks of process `pid` (Linux's /proc/PID/status), for a failure message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines()
    except OSError:
        return "no /proc"
    return ", ".join(ln.replace("\t", " ") for ln in status
                     if ln.startswith(("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))


def interrupted_half_way(tmp_path: Path, sig: signal.Signals,
                         *extra: str) -> tuple[str, str, int]:
    """Run HALF_WAY, send `sig` once the first op is done: (stdout, stderr, exit code)."""
    proc = half_way(tmp_path, *extra)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # progress lines in a log
        seen.append(line)
        if line.startswith("checked quick"):
            break
    assert proc.poll() is None, seen  # Hangs cannot have finished
    # what became of a signal that was not acted on: blocked, ignored, caught or pending
    state = signal_state(proc.pid)
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        state += f"; 60 s later: {signal_state(proc.pid)}"
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"no exit 60 s after {sig.name} ({state}):\n{out[-3000:]}\n"
                    f"{''.join(seen)}{err}")
    return out, "".join(seen) + err, proc.returncode


def test_sigint_half_way_exits_130_with_a_readable_partial_report(tmp_path: Path) -> None:
    # two workers (the default on a multi-core machine): both stop, the finished rows stay
    out, err, code = interrupted_half_way(tmp_path, signal.SIGINT, "--jobs", "2")
    assert code == 130, out + err
    assert "partial report" in err
    frame, doc = report_rows(tmp_path)
    assert set(frame["op"]) == {"quick"} and doc["interrupted"] is True
    assert doc["passed"] is False
    assert "INTERRUPTED" in out


def test_sigterm_is_an_interrupt_too(tmp_path: Path) -> None:
    # in-process this time (the hang is in gradlab's own process): the other path of a run
    out, err, code = interrupted_half_way(tmp_path, signal.SIGTERM, "--no-isolate")
    assert code == 130, out + err
    _, doc = report_rows(tmp_path)
    assert doc["interrupted"] is True


def test_an_import_time_sys_exit_is_a_one_line_spec_error(tmp_path: Path) -> None:
    # f is bound in its source (the lookup without importing finds it): the import says
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(3)\ndef f(x):\n"
                                                 "    return x\n")
    (tmp_path / "s.yaml").write_text("function: exits_on_import:f\nargs: [{shape: [2]}]\n")
    proc = gradlab_cli("check", "s.yaml", "--report-dir", str(tmp_path), cwd=tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert err.strip().count("\n") == 0 and "cannot import 'exits_on_import'" in err


def test_a_lambda_cannot_travel_and_is_said_so() -> None:
    target = resolve("exp")[0]
    assert picklable([target], Options()) == ""
    from dataclasses import replace

    local = replace(target, op=replace(target.op, function=lambda x: x.exp()))
    assert "pickle" in picklable([local], Options()).lower()


@pytest.mark.parametrize(("code", "words"), [(-11, "killed by SIGSEGV"),
                                             (-9, "killed by SIGKILL (out of memory?)"),
                                             (5, "exit code 5")])
def test_exit_statuses_in_words(code: int, words: str) -> None:
    assert describe_exit(code) == words


def test_an_internal_error_in_the_cli_is_exit_3(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from gradlab import cli
    from gradlab.cli import check

    def broken(*args: object) -> None:
        raise AttributeError("gradlab's own bug")

    monkeypatch.setattr(check, "load_targets", broken)
    monkeypatch.setattr(sys, "argv", ["gradlab", "check", "exp", "--no-isolate"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 3
    assert "internal error: AttributeError: gradlab's own bug" in capsys.readouterr().err


def test_the_report_is_on_disk_while_the_run_goes_on(tmp_path: Path) -> None:
    """Killed outright (SIGKILL: no handler runs), a run leaves the rows of its last write,
    marked as partial."""
    proc = half_way(tmp_path, spec=HALF_WAY_ONE_ITEM)
    assert proc.stderr is not None
    for line in proc.stderr:  # quick done: the run now hangs in Hangs
        if line.startswith("checked quick"):
            break
    # the rows reach the disk while Hangs runs (the writer waits a while between writes)
    deadline = time.monotonic() + 120  # a safety net: the writer writes every few seconds
    while "quick" not in on_disk(tmp_path):
        assert time.monotonic() < deadline, "quick's rows were not on disk 120 s after it ended"
        time.sleep(0.2)
    assert proc.poll() is None  # still hanging
    proc.kill()
    proc.communicate(timeout=60)
    frame, doc = report_rows(tmp_path)
    assert doc["interrupted"] is True and doc["passed"] is False
    # every case finished before the hang is on disk
    assert set(frame["op"]) == {"quick"} and set(frame["status"]) == {"pass"}


def on_disk(folder: Path) -> set[str]:
    """The ops in the report on disk (none before the first write; a write is atomic, so
    never a half-written report)."""
    try:
        return set(report_rows(folder)[0]["op"])
    except (ValueError, KeyError, json.JSONDecodeError, pd.errors.EmptyDataError):
        return set()


def test_partial_writes_take_a_bounded_share_of_the_run(tmp_path: Path) -> None:
    from gradlab.render.files import COST_SHARE, CheckReportWriter
    from gradlab.results import CheckRow, Report

    times = iter([0.0, 0.0, 1.0,  # the first write takes 1 s
                  5.0,  # 4 s later: under 1 s / COST_SHARE since it, so skipped
                  1.0 + 1.0 / COST_SHARE, 11.0, 11.0])  # written
    writer = CheckReportWriter(tmp_path, every=2.0, clock=lambda: next(times))
    report = Report(rows=[CheckRow("op", "c", "float64", "cpu", "base", "forward", "pass")])
    paths = writer.write(report)
    report.rows.append(CheckRow("op", "d", "float64", "cpu", "base", "forward", "pass"))
    writer.write(report)
    assert len(pd.read_csv(paths[0])) == 1
    writer.write(report)
    assert len(pd.read_csv(paths[0])) == 2


def test_the_writer_keeps_one_name_and_marks_writes_before_the_last(tmp_path: Path) -> None:
    from gradlab.render.files import CheckReportWriter
    from gradlab.results import CheckRow, Report

    now = [0.0]
    writer = CheckReportWriter(tmp_path, every=2.0, clock=lambda: now[0])
    report = Report(rows=[CheckRow("op", "c", "float64", "cpu", "base", "forward", "pass")])
    first = writer.write(report)
    assert json.loads(first[1].read_text())["interrupted"] is True
    report.rows.append(CheckRow("op", "d", "float64", "cpu", "base", "forward", "pass"))
    now[0] = 1.0
    writer.write(report)  # too soon: not written
    assert len(pd.read_csv(first[0])) == 1
    assert writer.write(report, final=True) == first
    assert len(pd.read_csv(first[0])) == 2
    assert json.loads(first[1].read_text())["interrupted"] is False
    assert len(list(tmp_path.glob("check-*"))) == 2


def test_workers_side_by_side_give_the_rows_of_one_process_in_plan_order() -> None:
    targets = [t for name in ("exp", "relu") for t in resolve(name)]
    options = Options(dtypes=("float64", "float32"), checks=frozenset({"forward", "gradient"}),
                      variants=frozenset({"noncontiguous"}))
    here = driver.run(targets, options)
    seen: list[str] = []
    apart = driver.run(targets, replace(options, isolate=True, jobs=2),
                       on_rows=lambda rows: seen.append(f"{rows[0].op}/{rows[0].case}"))

    def key(r: Any) -> tuple[Any, ...]:
        return (r.op, r.case, r.dtype, r.variant, r.check, r.status, r.hint, r.max_abs_err)

    assert here.passed and [key(r) for r in apart.rows] == [key(r) for r in here.rows]
    # the caller hears the items in plan order too, each op's cases together
    assert len(seen) > 4 and seen == [f"{r.op}/{r.case}" for r in here.rows
                                      if r.variant == "base" and r.check == "forward"]


class FakeWorker:
    """A worker whose items finish as soon as the parent looks: it records what ran when."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log
        self.inbox, self._out = Pipe(duplex=False)
        self.index = -1

    def submit(self, index: int, options: Options) -> str:
        self.index = index
        self.log.append(("start", index))
        self._out.send(index)
        return ""

    def outcome(self, waited: float, timeout: float | None) -> Any:
        from gradlab.checks.run.isolate import Outcome

        self.inbox.recv()
        self.log.append(("end", self.index))
        return Outcome(rows=[])


def test_big_cases_run_side_by_side_only_within_the_memory_budget() -> None:
    from gradlab.checks.run.isolate import fits, run_parallel

    assert fits([], 10, 5) and fits([2], 3, 5) and not fits([2], 4, 5) and fits([9], 9, None)
    weights = [1, 1, 6, 6, 1, 1]  # bytes per item; the budget is 8: the two 6s never overlap
    log: list[tuple[str, int]] = []
    jobs = iter([(i, i, Options()) for i in range(len(weights))])
    done = [d[0] for d in run_parallel([FakeWorker(log), FakeWorker(log)], jobs, None, None,
                                       str, weight=lambda i: weights[i], budget=8)]
    assert sorted(done) == list(range(len(weights)))
    running: set[int] = set()
    peak = 0
    for what, i in log:
        running = running | {i} if what == "start" else running - {i}
        peak = max(peak, sum(weights[j] for j in running))
        assert not {2, 3} <= running
    assert peak == 7  # a 6 beside a 1: side by side where the budget allows


def test_an_isolated_run_leaves_torch_to_its_workers(tmp_path: Path) -> None:
    # the parent plans, dispatches, collects and reports: a torch import there (1.35 s of CPU)
    # would share the cores with the workers' own imports at the start of every run
    code = f"""
import sys
from gradlab.cli import main
sys.argv = ["gradlab", "check", "exp", "--case", "vector", "--jobs", "1", "--report-dir",
            {str(tmp_path)!r}]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
assert "torch" not in sys.modules, "the parent imported torch"
"""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GRADLAB_ISOLATE", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, doc = report_rows(tmp_path)
    assert doc["passed"] and str(doc["env"]["torch_version"]).startswith("2.")


def test_jobs_auto_is_one_per_core_up_to_four_and_one_on_cuda() -> None:
    from gradlab.cli.check import MAX_AUTO_JOBS, auto_jobs

    assert auto_jobs(["cuda"]) == auto_jobs(["cpu", "cuda:1"]) == 1
    assert auto_jobs(None) == min(len(os.sched_getaffinity(0)), MAX_AUTO_JOBS)


def test_fail_fast_runs_one_case_at_a_time() -> None:
    # a later case under way when the first one fails would come and go between runs
    from gradlab.cli.check import _start_workers

    assert _start_workers(3, None, False, fail_fast=False) == 3
    assert _start_workers(3, None, False, fail_fast=True) == 1


def test_a_negative_jobs_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    from conftest import run_cli

    code, _, err = run_cli(["check", "exp", "--jobs", "-1", "--report-dir", str(tmp_path)],
                             capsys)
    assert code == 2 and err.strip().splitlines() == [
        "gradlab: error: --jobs: expected a number of workers >= 0 (0: one per CPU core, "
        "up to 4; one on CUDA), got -1"], err


@pytest.mark.parametrize(("value", "spawns"), [("0", False), ("1", True)])
def test_gradlab_isolate_sets_the_default(value: str, spawns: bool,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    from conftest import run_cli

    from gradlab.checks.run import isolate

    spawned: list[bool] = []

    def no_worker() -> None:
        spawned.append(True)
        raise RuntimeError("no worker in this test")

    monkeypatch.setattr(isolate, "spawn", no_worker)
    monkeypatch.setattr(isolate, "WARM", [])
    monkeypatch.setenv("GRADLAB_ISOLATE", value)
    run_cli(["check", "exp", "--case", "vector", "--dtype", "double", "--no-variants",
             "--report-dir", str(tmp_path)], capsys)
    assert bool(spawned) == spawns


def test_a_function_its_worker_cannot_import_says_so() -> None:
    # a module made at import time (stub parent packages in sys.modules) pickles by reference
    # here, and is not importable in the worker: every row says that, not "the process died"
    import functools
    import types

    import torch

    import gradlab
    from gradlab.render.words import message

    mod = types.ModuleType("made_at_import_time")
    exec("import torch\n"
         "class Twice(torch.autograd.Function):\n"
         "    @staticmethod\n"
         "    def forward(ctx, x):\n"
         "        return 2 * x\n"
         "    @staticmethod\n"
         "    def backward(ctx, g):\n"
         "        return 2 * g\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    try:
        x = torch.rand(3, dtype=torch.float64, requires_grad=True)
        report = gradlab.check(mod.Twice, [x], reference=functools.partial(torch.mul, other=2.0),
                               isolate=True)
    finally:
        del sys.modules[mod.__name__]
    errors = [r for r in report.rows if r.status == "error"]
    assert errors and {r.hint for r in errors} == {"worker_load"}
    assert "No module named 'made_at_import_time'" in errors[0].note
    assert "--no-isolate" in message(errors[0])

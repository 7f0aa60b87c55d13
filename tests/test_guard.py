"""Checks that cannot take their caller down: the pytest plugin's items in a worker process (a
segfault fails its item, the session goes on), and the Python API's guard (a time and a memory
limit with the partial report kept, Ctrl-C, a variant stopped outside the op's cost envelope).

The Functions are in tests/data/guard/guard_functions.py.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import DATA, ROOT, TESTS

import gradlab
from gradlab import guard, watchdog
from gradlab.apiguard import CheckLimitError, memory_limit
from gradlab.checks.run import isolate
from gradlab.checks.run.driver import run
from gradlab.checks.run.options import Options
from gradlab.errors import SpecError
from gradlab.results import SKIP
from gradlab.spec import load_file
from gradlab.watchdog import LimitExceeded, Scope, watched

GUARD = DATA / "guard"
sys.path.insert(0, str(GUARD))
import guard_functions as gf  # noqa: E402


def plugin_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pytest with the gradlab plugin in a fresh process, isolation at its default (on)."""
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    env.pop("GRADLAB_ISOLATE", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "gradlab.pytest_plugin",
                           "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_segfaulting_item_fails_alone_naming_its_signal_and_the_session_goes_on() -> None:
    proc = plugin_run("crash.yaml", "-q", "-rA", cwd=GUARD)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # failures, not a crash (-11) nor an internal error (3)
    assert "FAILED crash.yaml::segfaults/base" in out
    assert "PASSED crash.yaml::correct/base" in out
    assert "killed by SIGSEGV" in out


def test_gradlab_inprocess_runs_items_in_pytests_process(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    def no_worker() -> None:
        raise AssertionError("a worker was spawned")

    monkeypatch.delenv("GRADLAB_ISOLATE", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr(isolate, "spawn", no_worker)
    monkeypatch.setattr("gradlab.checks.run.warm.spawn", no_worker)
    spec = pytester.path / "ok.yaml"
    spec.write_text("function: guard_functions:Double\nreference: guard_functions:"
                    "double_reference\nvariants: false\nchecks: [forward, gradient]\n"
                    "dtypes: [float64]\nargs: [{shape: [3, 4]}]\n")
    result = pytester.runpytest_inprocess("-p", "gradlab.pytest_plugin", "-p",
                                          "no:cacheprovider", "--gradlab-inprocess", str(spec))
    result.assert_outcomes(passed=1)


def test_a_kept_worker_serves_the_next_run_and_a_dead_one_is_replaced() -> None:
    segfaults, correct = load_file(GUARD / "crash.yaml")
    options = Options(isolate=True, keep_workers=True, timeout=120.0)
    try:
        first = run([correct], options)
        (pid,) = [p.pid for p, _, _ in isolate.IDLE]
        second = run([correct], options)
        assert [p.pid for p, _, _ in isolate.IDLE] == [pid]  # the same process, reused
        assert first.passed and second.passed
        assert [r.status for r in first.rows] == [r.status for r in second.rows]
        crashed = run([segfaults], options)
        assert not isolate.IDLE  # the worker that died is not kept
        assert any("SIGSEGV" in r.note for r in crashed.rows)
        assert run([correct], options).passed  # a fresh worker
    finally:
        isolate.close_idle()
    assert not isolate.IDLE


def x34() -> torch.Tensor:
    return torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_a_variant_outside_the_cost_envelope_is_a_declared_skip() -> None:
    # the magnitude variant ends its envelope itself (gf.envelope_is_up): the floor stays at
    # its default, which no normal variant reaches however loaded the machine
    report = gradlab.check(gf.RunsAwayWithMagnitude, [x34()], reference=gf.double_reference,
                           checks=["forward", "gradient"], cost_envelope=2)
    stopped = {r.variant: r for r in report.rows if r.status == SKIP}["magnitude"]
    assert (stopped.check, stopped.reason) == ("gradient", "cost_envelope")
    assert stopped.declared and "2x the base case" in stopped.note
    assert report.passed  # the other variants ran and passed: a stop is not a failure
    assert any(r.variant.startswith("ties") for r in report.rows)  # the run went on after it


def test_a_timeout_names_check_and_variant_and_keeps_the_rows_before() -> None:
    # the time runs out when the magnitude variant's backward starts (gf.time_is_up), not
    # after 4 s of a run that a loaded machine may not have brought that far
    with pytest.raises(CheckLimitError) as info:
        gradlab.check(gf.RunsOutOfTimeWithMagnitude, [x34()], reference=gf.double_reference,
                      checks=["forward", "gradient"], cost_envelope=0, timeout=120)
    message = str(info.value)
    assert "stopped by timeout=120 s in check gradient, variant magnitude" in message
    assert "RunsOutOfTimeWithMagnitude/example float64 cpu" in message
    rows = info.value.report.rows
    assert rows[-1].reason == "time_limit" and rows[-1].status == "error"
    assert rows[-1].variant == "magnitude"
    measured = rows[:-1]  # the base case and the variants before magnitude
    assert {r.variant for r in measured} >= {"base", "noncontiguous[0]"}
    assert all(r.status == "pass" for r in measured)
    assert isinstance(info.value, gradlab.CheckLimitError)


def test_a_memory_limit_stops_an_unbounded_allocation() -> None:
    with pytest.raises(CheckLimitError) as info:
        gradlab.check(gf.Hoards, [x34()], reference=gf.double_reference, max_memory="300MB",
                      checks=["forward", "gradient"])
    assert "stopped by max_memory=300 MiB" in str(info.value)
    assert "check gradient, variant base" in str(info.value)
    assert info.value.report.rows[-1].reason == "memory_limit"


def test_ctrl_c_returns_the_partial_report() -> None:
    report = gradlab.check(gf.InterruptedInFloat32, [x34()], reference=gf.double_reference,
                           dtypes=["float64", "float32"], checks=["forward", "gradient"],
                           variants=False)
    assert report.interrupted and not report.passed
    assert report.rows and {r.dtype for r in report.rows} == {"float64"}
    assert "interrupted" in str(report)


def test_the_api_limits_default_to_the_clis() -> None:
    from gradlab.cli.app import DEFAULT_TIMEOUT_S

    params = inspect.signature(gradlab.check).parameters
    assert params["timeout"].default == DEFAULT_TIMEOUT_S == guard.DEFAULT_TIMEOUT_S
    assert params["max_memory"].default == "auto"
    assert abs(memory_limit("auto") - guard.default_limit()) < 0.05 * guard.default_limit()


@pytest.mark.parametrize(("kw", "words"), [
    ({"timeout": -1}, "timeout: expected seconds > 0"),
    ({"max_memory": "lots"}, "max_memory: expected a size"),
    ({"max_memory": -5}, "max_memory: expected bytes >= 0"),
    ({"cost_envelope": 0.5}, "cost_envelope: expected a factor >= 1"),
])
def test_bad_limits_are_one_line_value_errors(kw: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        gradlab.check(gf.Double, [x34()], reference=gf.double_reference, **kw)  # type: ignore[arg-type]


def test_a_specs_cost_envelope_stops_its_runaway_variant_in_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import run_cli

    code, out, err = run_cli(["check", str(GUARD / "envelope.yaml"), "--no-isolate",
                              "--report-dir", str(tmp_path)], capsys)
    assert code == 0, out + err
    (csv,) = tmp_path.glob("check-*.csv")
    import pandas as pd

    frame = pd.read_csv(csv)
    stopped = frame[frame["variant"] == "magnitude"]
    assert list(stopped["status"]) == ["skip"] and list(stopped["reason"]) == ["cost_envelope"]
    assert set(frame[frame["variant"] != "magnitude"]["status"]) == {"pass"}


@pytest.mark.parametrize(("value", "words"), [(0.5, "expected a factor >= 1"),
                                              ("lots", "expected a number")])
def test_a_bad_spec_cost_envelope_is_a_spec_error_naming_the_key(tmp_path: Path, value: object,
                                                                 words: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"op: exp\ncost_envelope: {value}\n")
    with pytest.raises(SpecError, match=f"cost_envelope: {words}"):
        load_file(spec)


def test_ctrl_c_in_a_plugin_item_stops_the_session(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    spec = pytester.path / "interrupted.yaml"
    spec.write_text("function: guard_functions:InterruptedInFloat32\nreference: "
                    "guard_functions:double_reference\nvariants: false\nchecks: [forward, "
                    "gradient]\ndtypes: [float32]\nargs: [{shape: [3, 4]}]\n")
    recorded = pytester.inline_run("-p", "gradlab.pytest_plugin", "-p", "no:cacheprovider",
                                   "--gradlab-inprocess", str(spec), no_reraise_ctrlc=True)
    assert recorded.ret == pytest.ExitCode.INTERRUPTED


@pytest.mark.parametrize("check", ["jacobian", "second_order"])
def test_a_timeout_in_a_numerical_check_names_it(check: str) -> None:
    with pytest.raises(CheckLimitError, match=f"stopped by timeout=120 s in check {check}, "
                                              "variant base .*; no row was measured before"):
        gradlab.check(gf.RunsOutOfTime, [x34()], reference=gf.double_reference,
                      checks=[check], timeout=120)  # out of time in backward: gf.time_is_up


def spin() -> None:
    while True:
        time.sleep(0.005)


def test_watchdog_scopes_stop_their_own_block_and_let_an_outer_limit_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "ENVELOPE_FLOOR_S", 0.1)
    stopped: list[str] = []
    with watchdog.envelope(1, 0.0, stopped.append):
        spin()  # stopped after the floor: the envelope records it and goes on
    assert len(stopped) == 1 and "stopped after 0.1 s" in stopped[0]
    outer = Scope("run", deadline=time.monotonic() + 0.1)
    with pytest.raises(LimitExceeded), watched(outer), watchdog.envelope(1, 100.0, stopped.append):
        spin()  # the run's limit, through a variant's envelope that has 100 s left
    assert outer.fired == "timeout" and len(stopped) == 1
    # 1 s: a loaded machine may stall this process between entering and leaving for a while
    with watched(Scope("run", deadline=time.monotonic() + 1)):
        pass  # left before its limit: nothing is raised later
    time.sleep(1.2)
    assert not watchdog.WATCH.scopes


@pytest.mark.parametrize("wait", sorted(gf.WAITS))
def test_a_timeout_stops_a_backward_blocked_in_a_wait(wait: str) -> None:
    """Issue 30, item 6: in the main thread a signal interrupts time.sleep, a held lock's
    acquire and an empty queue's get, which the watchdog's asynchronous exception cannot."""
    fn = gf.blocks_in_float32(wait)
    gradlab.check(gf.Double, [x34()], reference=gf.double_reference, variants=False,
                  checks=["forward", "gradient"])  # imports done before the clock starts
    started = time.monotonic()
    with pytest.raises(CheckLimitError) as info:
        gradlab.check(fn, [x34()], reference=gf.double_reference, variants=False,
                      dtypes=["float64", "float32"], checks=["forward", "gradient"], timeout=0.5)
    took = time.monotonic() - started
    # not stopped, it would have waited gf.BLOCK_S (60 s)
    assert took < 0.5 + 5, f"stopped after {took:.1f} s"
    assert "stopped by timeout=0.5 s in check gradient" in str(info.value)
    assert "outside the main thread" not in str(info.value)  # the signal stopped it
    *measured, last = info.value.report.rows
    assert (last.dtype, last.reason, last.status) == ("float32", "time_limit", "error")
    assert measured and {r.dtype for r in measured} == {"float64"}
    assert all(r.status == "pass" for r in measured)


def test_the_timeout_puts_back_a_previous_alarm_handler_and_timer() -> None:
    import signal

    def theirs(signum: int, frame: object) -> None:
        raise AssertionError("the caller's alarm fired during the check")

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1000)
        gradlab.check(gf.Double, [x34()], reference=gf.double_reference, variants=False,
                      checks=["forward", "gradient"], timeout=60)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert signal.getsignal(signal.SIGALRM) is theirs and 900 < left <= 1000
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_the_timeout_error_says_what_it_cannot_stop() -> None:
    import threading

    caught: list[BaseException] = []

    def check() -> None:
        try:
            gradlab.check(gf.Spins, [x34()], reference=gf.double_reference, timeout=1,
                          checks=["forward", "gradient"], variants=False)
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=check)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the watchdog did not stop a Python loop in 60 s"
    (exc,) = caught
    assert isinstance(exc, CheckLimitError), exc
    assert "cannot interrupt a blocking call (time.sleep, a lock" in str(exc)

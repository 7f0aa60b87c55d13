"""Workers forked from one fork server (gradlab.checks.run.forkserver): one torch import per
run, the parent's environment in each worker, nothing left behind, and the fresh-interpreter
path where the server is switched off.  The Functions are tests/data/guard/guard_functions.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DATA

from gradlab.checks.run import forkserver, warm
from gradlab.checks.run.driver import run
from gradlab.checks.run.options import Options
from gradlab.model import Target
from gradlab.spec import load_file

GUARD = DATA / "guard"
if str(GUARD) not in sys.path:
    sys.path.insert(0, str(GUARD))

pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="no fork server off Linux")

SCALED = """\
function: guard_functions:ScaledByEnv
reference: guard_functions:double_reference
variants: false
checks: [forward, gradient]
dtypes: [float64]
args: [{shape: [3, 4]}]
"""


@pytest.fixture(autouse=True)
def _no_server_left() -> Iterator[None]:
    yield
    warm.cool_down()


def parent_of(pid: int) -> int:
    """Process `pid`'s parent (Linux's /proc/PID/stat, field 4)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_workers_are_forks_of_one_server_and_die_with_it() -> None:
    spawned = [warm.spawn() for _ in range(3)]  # its pipes kept: a closed one ends a worker
    procs = [s[0] for s in spawned]
    pids = [p.pid for p in procs]
    (server,) = warm.SERVER
    assert all(isinstance(p, forkserver.ForkedProc) for p in procs)
    assert [parent_of(pid) for pid in pids if pid is not None] == [server.proc.pid] * 3
    assert len(set(pids)) == 3 and all(p.poll() is None for p in procs)
    procs[0].kill()  # a worker killed (a timeout) gives its signal, as Popen's returncode does
    assert procs[0].wait(10.0) == -9 and procs[1].poll() is None
    warm.close_server()
    assert all(gone(pid) for pid in pids[1:] if pid is not None)  # PR_SET_PDEATHSIG


def test_a_worker_has_its_parents_environment_of_the_moment_it_was_forked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warm.spawn()[0].kill()  # the server started without GUARD_SCALE
    monkeypatch.setenv("GUARD_SCALE", "2")
    (tmp_path / "scaled.yaml").write_text(SCALED)
    targets: list[Target] = load_file(tmp_path / "scaled.yaml")
    report = run(targets, Options(isolate=True, timeout=120.0))
    assert [r.status for r in report.rows] == ["pass", "pass"], report.rows
    # and the run's end stopped the server
    assert warm.SERVER == []
    assert servers_of(os.getpid()) == []


def test_a_fork_request_that_cannot_be_sent_gets_a_fresh_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # an environment past a socket message's size (EMSGSIZE): the run must still get a worker
    for k in range(4):
        monkeypatch.setenv(f"GRADLAB_TEST_BIG_{k}", "x" * 100_000)
    proc, inbox, outbox = warm.spawn()
    try:
        assert isinstance(proc, subprocess.Popen)
        assert warm.SERVER == []  # given up on, not left running
    finally:
        proc.kill()
        proc.wait(10.0)
        inbox.close()
        outbox.close()


def test_switched_off_each_worker_is_a_fresh_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, "0")
    started: list[object] = []
    fresh = warm.spawn_interpreter

    def counted() -> object:
        started.append(got := fresh())
        return got

    monkeypatch.setattr(warm, "spawn_interpreter", counted)
    (correct,) = load_file(GUARD / "crash.yaml")[1:]
    report = run([correct], Options(isolate=True, timeout=120.0))
    assert report.passed
    assert warm.SERVER == []
    assert len(started) == 1 and isinstance(started[0][0], subprocess.Popen)  # type: ignore[index]


def servers_of(parent: int) -> list[int]:
    """The live fork servers whose parent is `parent`."""
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and is_server_of(int(e.name), parent)]


def is_server_of(pid: int, parent: int) -> bool:
    """Whether process `pid` is a fork server started by `parent` (False once it has gone)."""
    try:
        return (parent_of(pid) == parent
                and b"server_main" in Path(f"/proc/{pid}/cmdline").read_bytes())
    except (OSError, ValueError, IndexError):
        return False  # it ended while being read

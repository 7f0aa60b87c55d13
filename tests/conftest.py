"""Shared test setup: tests/ on sys.path so specs can load `user_functions:...`; run_cli."""

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
ROOT = TESTS.parent

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def pytest_configure(config: pytest.Config) -> None:
    """One intra-op thread, as gradlab's own runs use: tiny tensors gain nothing from more,
    and two OpenMP threads on a loaded 2-core machine made a float64 conv 700x slower.

    Not in pytest-xdist's controller: it runs no test, and its torch import (1.2 s) came
    before its workers started."""
    if is_xdist_controller(config):
        return
    import torch

    from gradlab.exitnoise import quiet_triton_exit

    torch.set_num_threads(1)
    # no nanobind leak report (60 lines) from each pytest process that imported Triton
    quiet_triton_exit()


def is_xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests to pytest-xdist workers (and runs none itself)."""
    return (getattr(config.option, "dist", "no") != "no"
            and not hasattr(config, "workerinput"))


@pytest.fixture(autouse=True)
def _no_worker_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gradlab check` run by a test defaults to --no-isolate (GRADLAB_ISOLATE=0): a worker
    process imports torch (1.5-2.5 s here) and most tests are about what a run finds, not
    where it runs.  The isolation tests and the README's quick start take the real default
    (tests/test_isolation.py, tests/test_docs.py).

    An isolated run gets one worker (GRADLAB_JOBS=1) unless a test asks for more: pytest's
    own workers keep the cores busy, and each extra worker imports torch again."""
    monkeypatch.setenv("GRADLAB_ISOLATE", "0")
    monkeypatch.setenv("GRADLAB_JOBS", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `cuda`-marked tests cleanly when no CUDA device is present."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        # the marker, not any keyword: a test parametrized with the string "cuda" (run on a
        # fake CUDA, tests/test_cuda_paths.py) has "cuda" among its keywords too
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What importing torch and collecting made stays for the session: out of the cyclic
    garbage collector's reach, so that each full collection (and the five at the session's
    end) scans only what the tests made since (about 0.4 s less per worker)."""
    import gc

    gc.freeze()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """gradlab's real entry point (cli.main, which turns errors into one line and an exit code)
    run in this process: (exit code, stdout, stderr).  Faster than a subprocess per call."""
    from gradlab.cli import main

    old = sys.argv
    sys.argv = ["gradlab", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    """torch.cuda faked (tests/cuda_fakes.py), for the CUDA paths' tests without a GPU."""
    from cuda_fakes import FakeCuda

    return FakeCuda().install(monkeypatch)


@pytest.fixture
def on_cpu(fake: Any) -> Iterator[Any]:
    """The fake GPU with cuda tensors mapped to the CPU (cuda_fakes.cuda_on_cpu)."""
    from cuda_fakes import cuda_on_cpu

    with cuda_on_cpu() as mode:
        yield mode

"""The torch range (docs/ci.md): features newer than the floor are probed, and a check that
needs one this torch lacks is a declared skip naming the release, never a traceback.

An old torch is faked here by patching the probe (`has`) where it is used: the real old torch
runs in the scheduled job (.github/workflows/torch-range.yml)."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy
import pytest
import torch
import yaml
from conftest import ROOT
from torch import Tensor
from torch.autograd import Function
from torchguards import needs_triton_interpreter

import gradlab
from gradlab import torchcompat
from gradlab.checks.numeric import rawbackward
from gradlab.render.words import REASONS
from gradlab.results import SKIP, Report


class Cube(Function):
    """A correct Function."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


class CubeFloat64Grad(Cube):
    """BROKEN: backward returns float64 for a float32 input (autograd casts it quietly)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return (3 * x**2 * g).double()


def cube_ref(x: Tensor) -> Tensor:
    return x**3


def wrapped_cube(x: Tensor) -> Tensor:
    """Not a Function's apply: its custom node is found in the graph."""
    return Cube.apply(x) + 0


def x32() -> list[Tensor]:
    return [torch.rand(3, 4, dtype=torch.float32) + 0.5]


@pytest.fixture
def old_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """This torch as one without Node._input_metadata (torch 2.1-2.4)."""
    monkeypatch.setattr(rawbackward, "has", lambda name: name != "node_metadata")
    monkeypatch.setattr(torch, "__version__", "2.1.2")


def contract_rows(report: Report) -> list[Any]:
    return [r for r in report.rows if r.check == "contract" and r.variant == "base"]


def test_every_feature_is_probed_and_dated() -> None:
    for name, (feature, _) in torchcompat.FEATURES.items():
        assert isinstance(torchcompat.has(name), bool)
        major, minor = (int(p) for p in feature.since.split("."))
        assert (major, minor) > (2, 1), name  # newer than the floor, or no guard is needed
    assert "old_torch" in REASONS


def test_missing_note_names_this_torch_and_the_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", "2.1.2")
    note = torchcompat.missing_note("node_metadata")
    assert "torch 2.1.2" in note and "torch 2.5 or newer" in note


def test_each_feature_is_dated_by_the_release_that_has_it() -> None:
    """On the running torch (2.13 here; 2.1.2, 2.4.1, 2.5.1 and 2.15.0 in the range runs), a
    feature is there exactly from its release on: the dates in FEATURES are measured ones."""
    running = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    for name, (feature, _) in torchcompat.FEATURES.items():
        since = tuple(int(p) for p in feature.since.split("."))
        assert torchcompat.has(name) == (running >= since), (name, torch.__version__)


def test_old_torch_still_checks_a_functions_raw_return(old_torch: None) -> None:
    # a Function's apply: its outputs stand in for the node's metadata
    good = gradlab.check(Cube, x32(), reference=cube_ref, checks=["gradient", "contract"],
                         variants=False)
    assert good.passed
    assert all(r.status == "pass" for r in contract_rows(good))
    bad = gradlab.check(CubeFloat64Grad, x32(), reference=cube_ref,
                        checks=["gradient", "contract"], variants=False)
    # autograd casts the gradient to the input's dtype: the contract row warns (as
    # summed_shape does), and strict fails it
    assert any(r.hint == "wrong_dtype" and r.status == "warn" for r in contract_rows(bad))
    assert not gradlab.check(CubeFloat64Grad, x32(), reference=cube_ref, strict=True,
                             checks=["gradient", "contract"], variants=False).passed


def test_old_torch_graph_nodes_are_a_declared_skip(old_torch: None) -> None:
    report = gradlab.check(wrapped_cube, x32(), reference=cube_ref,
                           checks=["gradient", "contract"], variants=False)
    rows = contract_rows(report)
    assert rows and all(r.status == SKIP and r.declared and r.reason == "old_torch"
                        for r in rows)
    assert all("torch 2.1.2" in r.note and "2.5" in r.note for r in rows)
    assert report.passed  # a declared skip does not fail the run


STUB_PYTHON = """#!/usr/bin/env bash
# a python that only records how scripts/dev.sh calls it
echo "$0 $*" >> "$DEVSH_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    d="${@: -1}"; mkdir -p "$d/bin"; cp "$0" "$d/bin/python"
fi
if [ "$1" = "-" ]; then cat >/dev/null; echo "torch==2.1.2"; echo "numpy<2"; fi
exit 0
"""


def dev_sh(tmp_path: Path, **env: str) -> list[str]:
    """Run a copy of scripts/dev.sh `test` in tmp_path with a stub python: its calls."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / "dev.sh", tmp_path / "scripts" / "dev.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    stub = tmp_path / "stub-python"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    keep = {k: v for k, v in os.environ.items() if not k.startswith("GRADLAB_")}
    subprocess.run(["bash", str(tmp_path / "scripts" / "dev.sh"), "test", "-x"], check=True,
                   env={**keep, "PYTHON": str(stub), "DEVSH_LOG": str(log), **env},
                   cwd=tmp_path, timeout=60)
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines()]


def test_dev_sh_makes_a_venv_per_requested_torch(tmp_path: Path) -> None:
    calls = dev_sh(tmp_path, GRADLAB_TORCH="torch==2.1.2")
    venv = tmp_path / ".venv-torch-2.1.2"
    # its own venv, without the system's site-packages (whose torch is another)
    assert calls[0] == "-m venv .venv-torch-2.1.2"
    assert "-m pip install -q torch==2.1.2" in calls
    pins = venv / ".gradlab-constraints.txt"
    assert pins.read_text().split() == ["torch==2.1.2", "numpy<2"]
    assert "-m pip install -q -c .venv-torch-2.1.2/.gradlab-constraints.txt -e .[test]" in calls
    assert calls[-1].startswith("-m pytest -n 2 --dist loadgroup -x")
    # set up once: a second run only runs the tests
    again = dev_sh(tmp_path, GRADLAB_TORCH="torch==2.1.2")
    assert [c for c in again if "pip" in c or "venv" in c] == []


def test_dev_sh_without_a_request_keeps_the_system_torch(tmp_path: Path) -> None:
    calls = dev_sh(tmp_path)
    assert calls[0] == "-m venv --system-site-packages .venv"
    assert not any("install -q torch" in c for c in calls)


def test_dev_sh_names_a_wildcard_request_plainly(tmp_path: Path) -> None:
    calls = dev_sh(tmp_path, GRADLAB_TORCH="torch==2.15.*")
    assert calls[0] == "-m venv .venv-torch-2.15"
    assert "-m pip install -q torch==2.15.*" in calls


def test_the_scheduled_job_runs_the_floor_pyproject_claims() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (floor,) = [d.removeprefix("torch>=") for d in deps if d.startswith("torch>=")]
    job = yaml.safe_load((ROOT / ".github" / "workflows" / "torch-range.yml").read_text())
    oldest, newest = job["jobs"]["suite"]["strategy"]["matrix"]["torch"]
    assert job["jobs"]["suite"]["steps"][-1]["env"]["GRADLAB_TORCH"] == "${{ matrix.torch }}"
    assert oldest.startswith(f"torch=={floor}.")
    ci_md = (ROOT / "docs" / "ci.md").read_text()
    for request in (oldest, newest):  # the command written in docs/ci.md is the job's
        assert f"GRADLAB_TORCH={request} " in ci_md


@pytest.mark.parametrize(("triton_version", "numpy_version", "runs"), [
    ("2.1.0", "1.26.4", False), ("3.0.0", "2.4.6", False), ("3.1.0", "1.26.4", False),
    ("3.2.0", "1.26.4", True), ("3.6.0", "2.4.6", False), ("3.6.0", "2.3.5", True),
    ("3.7.0", "2.4.6", True), ("3.9.0", "2.4.6", True)])
def test_the_triton_interpreter_guard_follows_what_was_measured(
        monkeypatch: pytest.MonkeyPatch, triton_version: str, numpy_version: str,
        runs: bool) -> None:
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__=triton_version))
    monkeypatch.setattr(numpy, "__version__", numpy_version)
    if runs:
        needs_triton_interpreter()
    else:
        with pytest.raises(pytest.skip.Exception, match=f"triton {triton_version}'s"):
            needs_triton_interpreter()


class ScaledBy(Function):
    """forward(ctx, x, k=...): k is a plain keyword argument."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, k: float = 1.0) -> Tensor:
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * ctx.k, None


class ScaledBySetup(Function):
    """The same with setup_context (forward without ctx)."""

    @staticmethod
    def forward(x: Tensor, k: float = 1.0) -> Tensor:
        return x * k

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * ctx.k, None


@pytest.mark.parametrize("cls", [ScaledBy, ScaledBySetup])
def test_keyword_apply_binds_keywords_to_forward(cls: type[Function]) -> None:
    """What a spec's kwargs call on a torch whose apply takes none (before 2.13)."""
    apply = torchcompat.KeywordApply(cls)
    x = torch.ones(2, requires_grad=True)
    (apply(x, k=3.0)).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [3.0, 3.0]
    assert apply(x).tolist() == [1.0, 1.0]  # forward's default
    assert apply.__self__ is cls  # read as a Function's own apply (name, direct calls)
    assert pickle.loads(pickle.dumps(apply)).__self__ is cls  # workers get it by the class


def test_old_torch_checks_a_function_called_with_keywords(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchcompat, "has", lambda name: name != "apply_kwargs")
    report = gradlab.check(ScaledBy, [torch.rand(3, dtype=torch.float64)], kwargs={"k": 2.0},
                           reference=lambda x, k: x * k, variants=False)
    assert report.passed

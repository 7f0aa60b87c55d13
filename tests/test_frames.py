"""Whose code a traceback frame is (gradlab.frames): torch's, gradlab's own, or the code under
check, from the installed packages' real folders, not from folder names in a path.

A user's project inside a folder named `gradlab` (a fresh `git clone` of gradlab lands in one)
or `torch` is the user's: its Function's crash is the Function's (exit 1), not a gradlab bug
(exit 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab import frames
from gradlab.checks.numeric.context import crash_location, raised_in_user_code
from gradlab.checks.run import driver
from gradlab.checks.run.options import Options
from gradlab.errors import ExitCode
from gradlab.results.check import exit_code
from gradlab.spec import resolve

FUNCTIONS = '''\
import sys
import torch
from torch.autograd import Function


class Exits(Function):
    @staticmethod
    def forward(ctx, x):
        sys.exit(5)

    @staticmethod
    def backward(ctx, g):
        return g


class Raises(Function):
    @staticmethod
    def forward(ctx, x):
        raise ValueError("the user's own error")

    @staticmethod
    def backward(ctx, g):
        return g


def reference(x):
    return x * 1
'''

SPEC = """\
ops:
  - function: {module}:Exits
    reference: {module}:reference
    variants: false
    checks: [forward, gradient]
    dtypes: [float64]
    args: [{{shape: [3]}}]
  - function: {module}:Raises
    reference: {module}:reference
    variants: false
    checks: [forward, gradient]
    dtypes: [float64]
    args: [{{shape: [3]}}]
"""


@pytest.mark.parametrize("folder", ["gradlab", "torch", "gradlab/gradlab/checks", "torch/torch"])
def test_a_project_in_a_folder_named_like_a_package_is_the_users(tmp_path: Path,
                                                                  folder: str) -> None:
    project = tmp_path / folder / "proj"
    project.mkdir(parents=True)
    module = f"user_fns_{folder.replace('/', '_')}"
    (project / f"{module}.py").write_text(FUNCTIONS)
    (project / "spec.yaml").write_text(SPEC.format(module=module))
    sys.path.insert(0, str(project))
    try:
        report = driver.run(resolve(str(project / "spec.yaml")), Options(isolate=False))
    finally:
        sys.path.remove(str(project))
        sys.modules.pop(module, None)
    errors = {r.op: r for r in report.rows if r.status == "error"}
    assert set(errors) == {"Exits", "Raises"}, report.rows
    assert not report.internal_errors
    assert "SystemExit: 5" in errors["Exits"].note
    assert "ValueError: the user's own error" in errors["Raises"].note
    for row in errors.values():
        assert row.crash_location.startswith(str(project / module)), row.crash_location
    assert exit_code(report) == ExitCode.CHECK_FAILED


def raised(fn: object, *args: object) -> BaseException:
    """The exception `fn(*args)` raises, its traceback without this test's own frame."""
    try:
        fn(*args)  # type: ignore[operator]
    except BaseException as exc:
        assert exc.__traceback__ is not None
        return exc.with_traceback(exc.__traceback__.tb_next)
    raise AssertionError("did not raise")


def test_gradlabs_own_frame_is_gradlabs() -> None:
    exc = raised(gradlab.guard.parse_size, "not a size")
    assert exc.__traceback__ is not None
    assert frames.is_gradlab(exc.__traceback__.tb_frame.f_code.co_filename)
    assert not raised_in_user_code(exc)  # only gradlab on it: a gradlab bug
    assert crash_location(exc).startswith(str(Path(gradlab.guard.__file__).resolve()))


def test_torchs_frames_are_torchs_and_the_bundled_ops_are_checked_code() -> None:
    exc = raised(torch.nn.functional.softmax, torch.zeros(2), 5)  # raised in functional.py
    assert not raised_in_user_code(exc)
    assert frames.is_torch(torch.nn.functional.__file__)
    assert not frames.is_checked_code(torch.nn.functional.__file__)
    ops_file = str(Path(gradlab.__file__).parent / "ops" / "__init__.py")
    assert frames.is_gradlab(ops_file) and frames.is_checked_code(ops_file)
    checks_file = str(Path(gradlab.__file__).parent / "checks" / "numeric" / "context.py")
    assert not frames.is_checked_code(checks_file) and frames.is_machinery(checks_file)


def test_a_symlinked_path_is_judged_by_its_real_folder(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(Path(gradlab.__file__).parent)
    assert frames.is_gradlab(str(link / "guard.py"))
    assert not frames.is_checked_code(str(link / "checks" / "numeric" / "context.py"))
    assert frames.is_checked_code(str(link / "ops" / "__init__.py"))
    named = tmp_path / "gradlab" / "gradlab"
    named.mkdir(parents=True)
    assert not frames.is_gradlab(str(named / "guard.py"))
    assert frames.is_checked_code(str(tmp_path / "torch" / "torch" / "nn" / "x.py"))

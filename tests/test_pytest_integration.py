"""gradlab in a test suite: `assert_gradients`, and the pytest plugin that runs spec files as
tests (which YAML it collects, its items, its failures, xdist, the entry point).

The plugin runs in subprocesses with plugin autoloading off and `-p gradlab.pytest_plugin`, so
the result does not depend on whether this checkout's entry point is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA, ROOT, TESTS
from user_functions import Square, SquareNoChainRule, square_reference

from gradlab.testing import assert_gradients


def test_assert_gradients_passes_and_returns_the_report() -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = assert_gradients(Square, [x], reference=square_reference, variants=False)
    assert report.passed and report.rows


def test_assert_gradients_failure_reads_as_a_grouped_diagnosis() -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(AssertionError) as info:
        assert_gradients(SquareNoChainRule, [x], reference=square_reference)
    text = str(info.value)
    assert text.startswith("gradlab: SquareNoChainRule (case example): FAILED: 1 op, 1 case, ")
    # one bug, one finding: its checks and variants listed once, not a block per row
    assert text.count("likely cause: no_chain_rule") == 1 and "(finding 1 of 1)" in text
    assert "where: gradient, jacobian" in text and "input 0 [3, 4]" in text
    assert "forward /" not in text  # passing checks stay out


def pytest_run(args: list[str], cwd: Path, *, timeout: int = 300
               ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "gradlab.pytest_plugin",
                           "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def collected(proc: subprocess.CompletedProcess[str] | pytest.RunResult) -> list[str]:
    out = proc.stdout if isinstance(proc, subprocess.CompletedProcess) else proc.stdout.str()
    return sorted(ln for ln in out.splitlines() if "::" in ln)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with specs and other YAML, and its own (empty) pytest config; pytest runs
    there in this process (`inprocess`), with only the plugin under test loaded."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    root = pytester.path
    (root / "pytest.ini").write_text("[pytest]\n")
    specs = root / "specs"
    (specs / "nested").mkdir(parents=True)
    (specs / "exp.yaml").write_text("op: exp\ndtypes: [float64]\n")
    (specs / "notes.yaml").write_text("name: not a spec\nsteps: [a, b]\n")
    (specs / "list.yml").write_text("- op: exp\n")
    (specs / "nested" / "linear.yaml").write_text("op: linear\n")
    (root / "docker-compose.yaml").write_text("services: {web: {image: x}}\n")
    (root / "broken.yaml").write_text((DATA / "user_broken.yaml").read_text())
    return root


def inprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest with the plugin, in this process (a subprocess would import torch again)."""
    return pytester.runpytest_inprocess("-p", "gradlab.pytest_plugin", "-p", "no:cacheprovider",
                                        *args)


def test_collects_specs_directly_in_a_named_folder_only(project: Path,
                                                        pytester: pytest.Pytester) -> None:
    proc = inprocess(pytester, "--collect-only", "-q", "specs/")
    assert collected(proc) == ["specs/exp.yaml::exp/matrix", "specs/exp.yaml::exp/vector"]


def test_collects_a_named_spec_file_and_nothing_without_paths(project: Path,
                                                              pytester: pytest.Pytester) -> None:
    named = inprocess(pytester, "--collect-only", "-q", "specs/nested/linear.yaml")
    assert collected(named) and all(i.startswith("specs/nested/linear.yaml::linear/")
                                    for i in collected(named))
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = specs\n")
    bare = inprocess(pytester, "--collect-only", "-q")
    assert bare.ret == 5 and not collected(bare)  # testpaths are not "named"


def test_ini_globs_select_spec_files(project: Path, pytester: pytest.Pytester) -> None:
    (project / "pytest.ini").write_text("[pytest]\ngradlab_specs = specs/*.yaml\n")
    proc = inprocess(pytester, "--collect-only", "-q")
    files = {i.split("::")[0] for i in collected(proc)}
    assert files == {"specs/exp.yaml", "specs/nested/linear.yaml"}  # notes.yaml is no spec


def test_failing_case_prints_the_diagnosis_and_a_rerun_command(project: Path,
                                                               pytester: pytest.Pytester) -> None:
    # two ops of one file share the case name `base`: the re-run line names the failing op
    # too, so it re-runs that op's case alone (issue 30, item 5)
    (project / "broken.yaml").write_text(
        "ops:\n"
        "- {function: 'user_functions:Square', reference: 'user_functions:square_reference',"
        " dtypes: [float64], args: [{shape: [3, 4]}]}\n"
        "- {function: 'user_functions:SquareNoChainRule', dtypes: [float64],"
        " reference: 'user_functions:square_reference', args: [{shape: [3, 4]}]}\n")
    proc = inprocess(pytester, "broken.yaml", "-q")
    assert proc.ret == 1
    out = proc.stdout.str()
    assert "broken.yaml::SquareNoChainRule/base" in out and "1 failed, 1 passed" in out
    assert "likely cause: no_chain_rule" in out
    assert "re-run: gradlab check broken.yaml --op SquareNoChainRule --case base" in out
    assert "Traceback" not in out and "gradlab/checks" not in out


def test_invalid_spec_is_a_one_line_collection_error(project: Path,
                                                     pytester: pytest.Pytester) -> None:
    (project / "bad.yaml").write_text((DATA / "bad_shape.yaml").read_text())
    proc = inprocess(pytester, "bad.yaml", "-q")
    assert proc.ret == 2
    out = proc.stdout.str()
    assert "gradlab: " in out and "shape" in out


def test_runs_under_xdist(project: Path) -> None:
    proc = pytest_run(["-p", "xdist.plugin", "specs/", "-n", "2", "-q"], project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_gradlab_own_suite_collects_no_spec_items() -> None:
    """`pytest` at the repository root (testpaths = tests) and `pytest tests` leave the YAML
    of tests/data and gradlab/specs alone."""
    for args in ([], ["tests"]):
        # without pytest's python plugin only non-Python items (the plugin's) are collected,
        # and the suite's modules are not imported (7 s of collection each time); nor is its
        # conftest (it imports torch), which has no say in what YAML is collected
        proc = pytest_run(["--collect-only", "-p", "no:python", "--noconftest", *args], ROOT)
        assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]  # none at all
        assert "no tests collected" in proc.stdout and "error" not in proc.stdout.lower()


def test_entry_point_and_extras_are_declared() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"gradlab": "gradlab.pytest_plugin"}
    extras = project["optional-dependencies"]
    assert any(d.startswith("matplotlib") for d in extras["plots"])
    for dep in ("pytest-xdist", "junitparser", "matplotlib"):
        assert any(d.startswith(dep) for d in extras["test"]), dep

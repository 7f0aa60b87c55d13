"""The third-party corpus harness (benchmarks/thirdparty/run_corpus.py, issue 28).

The harness's own logic runs everywhere, on tiny local configs: a correct Function passes, its
broken twin is a fail row and exit 1, a config that cannot be set up is a harness error (exit
2), not a gradlab failure.  The corpus itself needs the packages install.sh puts outside the
repository, and takes minutes: it runs only with GRADLAB_CORPUS=1 and the packages installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "benchmarks" / "thirdparty" / "run_corpus.py"

LOCAL_CONFIGS = '''
import torch
from corpus import Config


class Cube(torch.autograd.Function):
    FACTOR = 3.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Cube.FACTOR * x ** 2


class BrokenCube(Cube):
    FACTOR = 2.0  # the broken twin: a gradient 2/3 of the true one

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * BrokenCube.FACTOR * x ** 2


def example():
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return [x.requires_grad_()]


def missing_package():
    import gradlab_no_such_package  # noqa: F401


def ref(x):
    return x ** 3


CONFIGS = [
    Config("local:cube:3x4", "local==0", lambda: (Cube, example(), {}), ref, "x^3"),
    Config("local:broken_cube:3x4", "local==0", lambda: (BrokenCube, example(), {}), ref,
           "x^3, backward 2/3 of the true one"),
    Config("local:missing:3x4", "missing==0", missing_package, ref, "cannot be set up"),
]
BUGS = [CONFIGS[1]]
'''


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("run_corpus", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def local(tmp_path: Path) -> Path:
    path = tmp_path / "configs_local.py"
    path.write_text(LOCAL_CONFIGS)
    return path


def run(harness, local: Path, tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    code = harness.main(["--configs", str(local), "--dtype", "float64", "--no-install",
                         "--json", str(out), *args])
    return code, json.loads(out.read_text())


def test_correct_function_passes(harness, local, tmp_path, capsys):
    code, data = run(harness, local, tmp_path, "--only", "local:cube", "--no-bugs")
    assert code == 0
    (o,) = data["outcomes"]
    assert o["counts"]["fail"] == 0 and o["counts"]["error"] == 0 and o["counts"]["pass"] > 0
    assert "1 configs from 1 packages: 0 fail rows" in capsys.readouterr().out


def test_broken_twin_is_a_fail_row_and_exit_1(harness, local, tmp_path, capsys):
    code, data = run(harness, local, tmp_path, "--only", "broken_cube", "--no-bugs")
    assert code == 1
    (o,) = data["outcomes"]
    gradient = [r for r in o["rows"] if r["check"] == "gradient" and r["variant"] == "base"]
    assert gradient and gradient[0]["status"] == "fail"
    assert gradient[0]["max_abs_err"] > 0.1
    out = capsys.readouterr().out
    assert "fail  gradient/base (float64)" in out  # the row: its check, variant, hint, errors
    assert data["summary"]["fail"] >= 1 and data["summary"]["failed_configs"] == [o["name"]]


def test_set_up_crash_is_a_harness_error_not_a_fail(harness, local, tmp_path, capsys):
    code, data = run(harness, local, tmp_path, "--only", "local:missing", "--no-bugs")
    assert code == 2
    (o,) = data["outcomes"]
    assert "ModuleNotFoundError" in o["harness_error"] and o["rows"] == []
    assert data["summary"]["fail"] == 0 and data["summary"]["harness_errors"] == 1
    assert "HARNESS ERROR" in capsys.readouterr().out


def test_config_file_that_does_not_import_is_a_harness_error(harness, tmp_path):
    bad = tmp_path / "configs_bad.py"
    bad.write_text("raise RuntimeError('broken config file')\n")
    out = tmp_path / "out.json"
    assert harness.main(["--configs", str(bad), "--no-install", "--json", str(out)]) == 2
    assert "broken config file" in json.loads(out.read_text())["outcomes"][0]["harness_error"]


def test_a_bug_config_must_fail(harness, local, tmp_path, capsys):
    code, data = run(harness, local, tmp_path, "--bugs-only")
    assert code == 0  # the broken twin, listed as a bug, was caught
    assert [o["name"] for o in data["outcomes"]] == ["local:broken_cube:3x4"]
    assert data["summary"]["bugs_caught"] == ["local:broken_cube:3x4"]
    assert "bugs: 1 of 1 caught" in capsys.readouterr().out


def test_a_missed_bug_is_exit_1(harness, tmp_path, capsys):
    path = tmp_path / "configs_missed.py"
    path.write_text(LOCAL_CONFIGS + "\nBUGS = [CONFIGS[0]]  # correct: gradlab passes it\n")
    code, data = run(harness, path, tmp_path, "--bugs-only")
    assert code == 1 and data["summary"]["bugs_missed"] == ["local:cube:3x4"]
    assert "missed: local:cube:3x4" in capsys.readouterr().out


def test_a_bug_stopped_by_a_limit_is_no_catch(harness):
    from gradlab.results import CheckRow

    def row(check: str, status: str, reason: str = "") -> CheckRow:
        return CheckRow(op="f", case="example", dtype="float64", device="cpu", variant="base",
                        check=check, status=status, reason=reason)

    killed = harness.Outcome("hung", "p==1", "float64", bug=True, seen_by=("gradient",),
                             limit="hung: the child did not return in 150 s and was killed")
    stopped = harness.Outcome("slow", "p==1", "float64", bug=True, seen_by=("gradient",),
                              rows=[row("forward", "pass"),
                                    row("gradient", "error", "time_limit")],
                              limit="gradlab.check(fn): stopped by timeout=60 s")
    elsewhere = harness.Outcome("other", "p==1", "float64", bug=True, seen_by=("second_order",),
                                rows=[row("gradient", "fail")])
    caught = harness.Outcome("late", "p==1", "float64", bug=True, seen_by=("gradient",),
                             rows=[row("gradient", "fail"), row("jacobian", "error",
                                                                "time_limit")],
                             limit="gradlab.check(fn): stopped by timeout=60 s")
    s = harness.summarize([killed, stopped, elsewhere, caught])
    assert s["bugs_caught"] == ["late"]  # caught on its check before the limit stopped it
    assert s["bugs_limit"] == ["hung", "slow"]
    assert s["bugs_missed"] == ["other"]  # failed, but not on the check that sees its bug


def test_a_killed_child_is_a_limit_and_exit_1(harness, tmp_path, capsys, monkeypatch):
    path = tmp_path / "configs_hang.py"
    path.write_text(LOCAL_CONFIGS + "\nBUGS = [CONFIGS[1]]\n")
    # the child's budget, timeout + 30 s + HARD_TIMEOUT_S, made 0: killed before it answers
    monkeypatch.setattr(harness, "HARD_TIMEOUT_S", -30.0)
    code, data = run(harness, path, tmp_path, "--bugs-only", "--timeout", "0")
    assert code == 1
    assert data["summary"]["bugs_limit"] == ["local:broken_cube:3x4"]
    assert data["summary"]["bugs_caught"] == []
    assert "0 of 1 caught, 1 stopped by a limit" in capsys.readouterr().out


def test_summary_counts_a_float64_row_of_a_float32_call_once(harness):
    from gradlab.results import CheckRow

    def row(dtype: str, check: str, status: str) -> CheckRow:
        return CheckRow(op="f", case="example", dtype=dtype, device="cpu", variant="base",
                        check=check, status=status)

    outs = [harness.Outcome("c", "p==1", "float64", rows=[row("float64", "jacobian", "fail")]),
            harness.Outcome("c", "p==1", "float32", rows=[row("float64", "jacobian", "fail"),
                                                          row("float32", "gradient", "warn")])]
    s = harness.summarize(outs)
    assert (s["configs"], s["packages"], s["fail"], s["warn"]) == (1, 1, 1, 1)
    assert harness.package_name("POT==0.9.7.post1") == harness.package_name("pot")


def _corpus_installed() -> str:
    """"" when every package of the corpus imports from the scratch folder, else why not."""
    target = Path(os.environ.get("GRADLAB_THIRDPARTY",
                                 Path.home() / ".cache" / "gradlab-thirdparty"))
    if not target.is_dir():
        return f"the third-party packages are not installed ({target} is missing; " \
               "bash benchmarks/thirdparty/install.sh)"
    missing = [m for m in ("torchdiffeq", "torchsde", "ot", "roma", "kornia", "entmax",
                           "sparsemax", "qpth", "pytorch_wavelets", "torchinterp1d", "torch_struct")
               if not (target / m).is_dir()]
    return f"not installed in {target}: {', '.join(missing)}" if missing else ""


@pytest.mark.skipif(os.environ.get("GRADLAB_CORPUS") != "1",
                    reason="the third-party corpus takes minutes: GRADLAB_CORPUS=1 runs it")
def test_corpus_has_no_fail_rows(harness, tmp_path):
    why = _corpus_installed()
    if why:
        pytest.skip(why)
    out = tmp_path / "corpus.json"
    code = harness.main(["--no-install", "--json", str(out)])
    data = json.loads(out.read_text())
    s = data["summary"]
    assert s["configs"] >= 25 and s["packages"] >= 6, s
    # per config: no fail, error or limit on a correct one; every bug caught on a check its
    # config says sees it (a limit, gradlab's or the harness's, is never a catch)
    for o in data["outcomes"]:
        assert not o["harness_error"], (o["name"], o["dtype"], o["harness_error"])
        if not o["bug"]:
            failed = [(r["check"], r["variant"], r["status"]) for r in o["rows"]
                      if r["status"] in ("fail", "error")]
            assert not failed and not o["limit"], (o["name"], o["dtype"], failed, o["limit"])
    bugs: dict[str, list[dict]] = {}
    for o in data["outcomes"]:
        if o["bug"]:
            bugs.setdefault(o["name"], []).append(o)
    assert len(bugs) >= 10
    for name, calls in bugs.items():
        assert calls[0]["seen_by"], f"{name}: configs_bugs.py names no check that sees it"
        seen = {(r["check"], r["status"]) for o in calls for r in o["rows"]
                if r["status"] in ("fail", "error") and r["reason"] not in harness.LIMIT_REASONS}
        assert any(check in calls[0]["seen_by"] for check, _ in seen), (
            name, calls[0]["seen_by"], seen, [o["limit"] for o in calls])
    assert not s["bugs_missed"] and not s["bugs_limit"], s
    assert code == 0, f"fail rows in {s['failed_configs']}"
    sys.stdout.write(f"{s}\n")


def test_config_files_import_without_the_packages(harness):
    """The corpus's shape, checked in CI (the packages are imported in make() only)."""
    configs, bugs = [], []
    for path in harness.DEFAULT_FILES:
        c, b, error = harness.load_configs(path)
        assert not error, error
        configs += c
        bugs += b
    names = [c.name for c in configs + bugs]
    assert len(names) == len(set(names)), "config names must be unique over the files"
    packages = {harness.package_name(c.package) for c in configs}
    assert len(configs) >= 25 and len(packages) >= 6, (len(configs), packages)
    assert all("==" in c.package and callable(c.make) and callable(c.reference)
               for c in configs + bugs)
    assert len(bugs) >= 10

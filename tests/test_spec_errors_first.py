"""A spec error comes before anything heavy: the whole spec (every op, every file of a folder)
is validated before torch, a worker or the user's module is imported, so a misspelt key inside
`args:` is reported as fast as a top-level one (issue 30); a misspelt attribute gets a "did you
mean" once its module is imported.

The processes below get a `torch` that refuses to import: had the CLI imported the user's
module (which imports torch) or started a worker before the spec error, the error would be
that refusal, or a worker's traceback, instead of one line naming file and key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, ROOT, TESTS, run_cli

from gradlab.errors import SpecError
from gradlab.spec import import_callables, resolve
from gradlab.spec.imports import Pending, function_name

REFUSE = "torch imported before the spec was validated"

USER_OP = "function: user_functions:Square\nreference: user_functions:square_reference\n"

BAD = {
    # a misspelt tensor key inside args
    "misspelt.yaml": (USER_OP + "args: [{shap: [3, 4]}]\n",
                      "args[0].shap: unknown key (did you mean shape?"),
    # a shape that is no shape
    "shape.yaml": (USER_OP + "args: [{shape: [3, -4]}]\n",
                   "args[0].shape: expected a list of positive ints"),
    # the first op is valid and would import torch; the second's case is wrong
    # a tensor read from a file (loading one imports torch) before the misspelt key
    "file_first.yaml": (USER_OP + "args: [{file: taps.pt, key: db2, const: true}, "
                                  "{shape: [3], dtpye: float32}]\n",
                        "args[1].dtpye: unknown key (did you mean dtype?"),
    # a misspelt attribute of a module that imports torch: found in its source, not imported
    "attribute.yaml": ("function: user_functions:Sqaure\nargs: [{shape: [3]}]\n",
                       "function: module 'user_functions' has no attribute 'Sqaure' (did you "
                       "mean Square? its names: Square, SquareNoChainRule, square_reference"),
    # a module on no path, and a package's submodule that is not there
    "module.yaml": ("function: user_functionz:Square\nargs: [{shape: [3]}]\n",
                    "function: cannot import 'user_functionz': ModuleNotFoundError: No module "
                    "named 'user_functionz'"),
    "submodule.yaml": ("function: gradlab.opz:relu\nargs: [{shape: [3]}]\n",
                       "No module named 'gradlab.opz'"),
    "second_op.yaml": ("ops:\n  - function: user_functions:Square\n    args: [{shape: [3]}]\n"
                       "  - function: user_functions:Square\n    args: [{shape: [3]}]\n"
                       "    cases: [{name: a, set: {0: {shape: [2], layout: diagonal}}}]\n",
                       "ops[1].cases[0].set[0].layout: unknown layout 'diagonal'"),
}


def _fake_torch(folder: Path) -> Path:
    """A folder holding a `torch` package whose import fails with REFUSE."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(f"raise ImportError({REFUSE!r})\n")
    return folder


def _gradlab(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`gradlab ARGS` in a fresh process with the refusing torch first on its path, isolated
    (the default: a worker started too early would show)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADLAB_ISOLATE", "GRADLAB_JOBS")}
    env["PYTHONPATH"] = os.pathsep.join([str(_fake_torch(tmp_path / "fake")), str(TESTS),
                                         str(ROOT)])
    return subprocess.run([sys.executable, "-m", "gradlab", "check", *args,
                           "--report-dir", str(tmp_path / "reports")],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_spec_error_inside_args_comes_before_torch_is_imported(name: str,
                                                                 tmp_path: Path) -> None:
    text, expected = BAD[name]
    spec = tmp_path / name
    spec.write_text(text)
    shutil.copy(DATA / "specs_features" / "taps.pt", tmp_path / "taps.pt")
    proc = _gradlab([str(spec)], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [f"gradlab: error: {spec}: " + lines[0].split(f"{spec}: ", 1)[1]], lines
    assert expected in lines[0]
    assert REFUSE not in proc.stderr + proc.stdout


def test_a_folder_is_validated_whole_before_any_import(tmp_path: Path) -> None:
    # a.yaml is valid (its module imports torch); b.yaml, loaded after it, is not
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "a.yaml").write_text(USER_OP + "args: [{shape: [3]}]\n")
    (folder / "b.yaml").write_text(USER_OP + "args: [{shape: [3], dtpye: float64}]\n")
    proc = _gradlab([str(folder)], tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "b.yaml: args[0].dtpye: unknown key (did you mean dtype?" in proc.stderr
    assert REFUSE not in proc.stderr + proc.stdout


def test_the_fake_torch_would_show_an_import(tmp_path: Path) -> None:
    # the control: a valid user spec does import its module, and the refusal is what shows
    spec = tmp_path / "ok.yaml"
    spec.write_text(USER_OP + "args: [{shape: [3]}]\n")
    proc = _gradlab([str(spec)], tmp_path)
    assert proc.returncode == 2 and REFUSE in proc.stderr, (proc.stdout, proc.stderr)


def test_resolve_without_imports_leaves_the_callables_pending(tmp_path: Path) -> None:
    spec = tmp_path / "ok.yaml"
    spec.write_text(USER_OP + "args: [{shape: [3]}]\n")
    (target,) = resolve(str(spec), imports=False)
    assert isinstance(target.op.function, Pending)
    assert isinstance(target.op.reference, Pending)
    (target,) = import_callables([target])
    from user_functions import square_reference

    assert function_name(target.op.function) == "Square"  # the Function's apply
    assert target.op.reference is square_reference


def test_a_misspelt_attribute_gets_a_did_you_mean(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text("function: user_functions:Sqaure\nreference: user_functions:square_reference"
                    "\nargs: [{shape: [3]}]\n")
    code, _, err = run_cli(["check", str(spec), "--report-dir", str(tmp_path / "r")], capsys)
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"gradlab: error: {spec}: function: module 'user_functions' has no attribute 'Sqaure' "
        + err.split("'Sqaure' ", 1)[1].strip()]
    assert "(did you mean Square? its names: " in err


def test_an_import_error_stops_the_warm_workers() -> None:
    from gradlab.checks.run import warm

    warm.warm_up(1)
    (proc, _, _) = warm.WARM[0]
    warm.cool_down()
    assert warm.WARM == []
    assert proc.poll() is not None


def test_a_file_tensor_is_still_read_and_checked(tmp_path: Path) -> None:
    # the second pass reads the file: its shape is checked against the spec's
    shutil.copy(DATA / "specs_features" / "taps.pt", tmp_path / "taps.pt")
    spec = tmp_path / "taps.yaml"
    spec.write_text(USER_OP + "args: [{file: taps.pt, key: db2, const: true, shape: [99]}]\n")
    with pytest.raises(SpecError, match=r"args\[0\]\.shape: shape \[99\] does not match"):
        resolve(str(spec))
    spec.write_text(USER_OP + "args: [{file: taps.pt, key: db2, const: true}]\n")
    (target,) = resolve(str(spec))
    assert target.op.cases[0].args[0].values is not None


@pytest.mark.parametrize("source", [
    "globals()['Made'] = len\n",
    "from os.path import *\nMade = join\n",
    "def __getattr__(name):\n    return len\n",
    "def make():\n    global Made\n    Made = len\nmake()\n",
])
def test_a_name_bound_at_run_time_is_left_to_the_import(source: str, tmp_path: Path) -> None:
    # what no parse can follow is not judged without the import: never a false spec error
    from gradlab.spec.imports import look_up

    (tmp_path / "dyn_mod.py").write_text(source)
    look_up("dyn_mod:Made", "function", tmp_path)


def test_the_names_a_module_binds_are_found_without_running_it(tmp_path: Path) -> None:
    from gradlab.spec.imports import look_up

    (tmp_path / "stat_mod.py").write_text(
        "import torch as tt\nfrom math import exp as e\nclass K:\n    inner = 1\n"
        "def f():\n    local = 1\nif tt:\n    A = B = 1\nelse:\n    (C, D) = 2, 3\n"
        "try:\n    pass\nexcept ValueError as err:\n    pass\nfor i in []:\n    pass\n"
        "with open('x') as fh:\n    pass\nsq = [j for j in []]\nraise SystemExit(1)\n")
    for name in ("tt", "e", "K", "f", "A", "B", "C", "D", "err", "i", "fh", "sq"):
        look_up(f"stat_mod:{name}", "function", tmp_path)
    for name in ("inner", "local", "j", "torch"):
        with pytest.raises(SpecError, match=f"has no attribute '{name}'"):
            look_up(f"stat_mod:{name}", "function", tmp_path)

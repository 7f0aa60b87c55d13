"""Spec features: integer and bool tensors, fixed values (inline, .pt, .npy), keyword tensors,
cases that `set` one argument, `const`, where `function:` is imported from, and errors that say
what was meant.  tests/data/specs_features/ holds the spec that shows them together and its
broken twin."""

from __future__ import annotations

import shutil
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import DATA, run_cli

from gradlab.cases import Inputs, make_tensor, materialize, narrowed
from gradlab.errors import SpecError
from gradlab.model import TensorArg
from gradlab.results import CheckRow, Finding
from gradlab.spec import load_file, parse_document

FEATURES = DATA / "specs_features"


def one_case(doc: dict[str, Any]) -> Any:
    (target,) = parse_document({"op": "exp", **doc})
    return target.op.cases[0]


def spec_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "x.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(SpecError) as info:
        load_file(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


# -- integer and bool tensors ---------------------------------------------------------------------

def test_integer_and_bool_tensors_keep_their_dtype_and_never_require_grad() -> None:
    case = one_case({"args": [{"shape": [64, 3]}, {"shape": [500], "dtype": "int64", "low": 2,
                                                    "high": 7},
                              {"shape": [500], "dtype": "bool"},
                              {"shape": [4], "dtype": "uint8", "high": 256}]})
    for dtype in ("float64", "float32"):
        inputs = materialize(case, dtype, "cpu", seed=3)
        x, target, mask, small = inputs.args
        assert x.dtype == getattr(torch, dtype) and x.requires_grad
        assert target.dtype == torch.int64 and not target.requires_grad
        assert int(target.min()) >= 2 and int(target.max()) < 7
        assert set(target.tolist()) == {2, 3, 4, 5, 6}  # 500 draws hit every value
        assert mask.dtype == torch.bool and 0 < int(mask.sum()) < 500
        assert small.dtype == torch.uint8
        assert inputs.diff_index == [0]
    # the same seed gives the same integers in every run dtype
    a = materialize(case, "float64", "cpu", seed=3).args[1]
    assert torch.equal(a, materialize(case, "float32", "cpu", seed=3).args[1])


def test_integer_tensors_survive_clone_and_casts() -> None:
    inputs = materialize(one_case({"args": [{"shape": [3]}, {"shape": [3], "dtype": "int32",
                                                             "high": 4}]}), "float32", "cpu", 0)
    copy = inputs.clone(dtype=torch.float64, requires_grad={0, 1})
    assert copy.args[0].dtype == torch.float64 and copy.args[1].dtype == torch.int32
    assert copy.diff_index == [0]


@pytest.mark.parametrize(("arg", "expected"), [
    ({"shape": [3], "dtype": "int64"}, "args[0]: random int64 values need high"),
    ({"shape": [3], "dtype": "int64", "high": 5, "requires_grad": True},
     "args[0].requires_grad: int64 tensors cannot require grad"),
    ({"shape": [3], "dtype": "int8", "low": -200, "high": 5}, "args[0].high: expected -128 <= low"),
    ({"shape": [3], "dtype": "int64", "high": 2.5}, "args[0].high: expected an integer"),
    ({"shape": [3], "dtype": "bool", "low": 0}, "args[0].low: a bool tensor is a random mask"),
    ({"shape": [3], "dtype": "int64", "high": 4, "min_abs": 1},
     "args[0].min_abs: min_abs applies to floating"),
    ({"shape": [3], "dtype": "in64"}, "args[0].dtype: unknown dtype 'in64' (did you mean int64?"),
])
def test_integer_tensor_errors(arg: dict[str, Any], expected: str, tmp_path: Path) -> None:
    import yaml

    assert expected in spec_error(tmp_path, yaml.safe_dump({"op": "exp", "args": [arg]}))


# -- fixed values ---------------------------------------------------------------------------------

def test_inline_values_infer_the_shape_and_take_the_run_dtype() -> None:
    case = one_case({"args": [{"values": [[1, 2, 3], [4, 5, 6]]},
                              {"values": [0, 2, 1], "dtype": "int64"},
                              {"values": [True, False, True]},
                              {"values": 2.5, "const": True}]})
    x = case.args[0]
    assert x.shape == (2, 3) and x.dtype is None and x.requires_grad
    inputs = materialize(case, "float32", "cpu", seed=0)
    assert inputs.args[0].dtype == torch.float32
    assert inputs.args[0].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert inputs.args[1].tolist() == [0, 2, 1] and inputs.args[1].dtype == torch.int64
    assert inputs.args[2].tolist() == [True, False, True]
    assert inputs.args[3].shape == () and float(inputs.args[3]) == 2.5
    assert inputs.diff_index == [0]  # const: true is requires_grad: false


def test_fixed_values_draw_nothing_so_other_args_keep_their_values() -> None:
    base = one_case({"args": [{"shape": [4]}, {"shape": [4]}]})
    fixed = one_case({"args": [{"shape": [4]}, {"values": [1.0, 2.0]}, {"shape": [4]}]})
    a, b = materialize(base, "float64", "cpu", 5).args, materialize(fixed, "float64", "cpu", 5).args
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[2])


def test_values_from_a_pt_file_next_to_the_spec(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    torch.save({"taps": torch.tensor([[0.5, 0.5]], dtype=torch.float32),
                "target": torch.tensor([3, 1], dtype=torch.int32)}, tmp_path / "t.pt")
    torch.save(torch.tensor([1.0, -1.0]), tmp_path / "single.pt")
    (tmp_path / "x.yaml").write_text(
        "op: exp\nargs:\n  - {file: t.pt, key: taps, const: true}\n"
        "  - {file: t.pt, key: target}\n  - {file: single.pt, shape: [2]}\n")
    monkeypatch.chdir(DATA)  # relative to the spec's folder, not the working directory
    (case,) = load_file(tmp_path / "x.yaml")[0].op.cases
    taps, target, _ = case.args
    assert (taps.shape, taps.dtype, taps.requires_grad) == ((1, 2), None, False)
    assert (target.dtype, target.requires_grad) == ("int32", False)
    inputs = materialize(case, "float64", "cpu", 0)
    assert inputs.args[0].dtype == torch.float64 and inputs.args[0].tolist() == [[0.5, 0.5]]
    assert inputs.args[1].dtype == torch.int32 and inputs.args[1].tolist() == [3, 1]
    assert inputs.args[2].tolist() == [1.0, -1.0]


def test_values_from_an_npy_file(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    np.save(tmp_path / "w.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    (tmp_path / "x.yaml").write_text("op: exp\nargs: [{file: w.npy}]\n")
    (case,) = load_file(tmp_path / "x.yaml")[0].op.cases
    assert materialize(case, "float64", "cpu", 0).args[0].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_npy_without_numpy_is_a_one_line_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "w.npy").write_bytes(b"\x93NUMPY")
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    message = spec_error(tmp_path, "op: exp\nargs: [{file: w.npy}]\n")
    assert message.startswith("args[0].file: reading a .npy file needs numpy"), message


@pytest.mark.parametrize(("arg", "expected"), [
    ("{values: [[1, 2], [3]]}", "args[0].values[1]: ragged values"),
    ("{values: [1, .nan]}", "args[0].values[1]: expected a finite number, got nan"),
    ("{values: [[1, 2]], shape: [2]}", "args[0].shape: shape [2] does not match the values' "
                                       "shape [1, 2]"),
    ("{values: [1, 300], dtype: int8}", "args[0].values: value 300 does not fit int8"),
    ("{values: [1, 2], low: 0}", "args[0].low: low shapes random values"),
    ("{values: [1], file: t.pt}", "args[0].file: give values or file, not both"),
    ("{file: t.pt}", "args[0].file: the file holds a dict: pick a tensor with key: (keys: "
                     "taps, bad)"),
    ("{file: t.pt, key: tap}", "args[0].key: unknown key 'tap' (did you mean taps?"),
    ("{file: t.pt, key: bad}", "args[0].file: holds 1 NaN or infinite values"),
    ("{file: nope.pt}", "args[0].file: "),
    ("{file: t.txt}", "args[0].file: expected a .pt, .pth or .npy file"),
    ("{file: junk.pt}", "args[0].file: cannot load: "),
    ("{values: [1, 2], requires_grad: true, const: true}", "args[0].const: give requires_grad "
                                                           "or const, not both"),
])
def test_fixed_value_errors(arg: str, expected: str, tmp_path: Path) -> None:
    torch.save({"taps": torch.ones(2), "bad": torch.tensor([1.0, float("inf")])},
               tmp_path / "t.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a pickle")
    message = spec_error(tmp_path, f"op: exp\nargs: [{arg}]\n")
    assert message.startswith(expected), message


def test_size1_variants_narrow_fixed_values() -> None:
    arg = one_case({"args": [{"values": [[1.0, 2.0], [3.0, 4.0]]}]}).args[0]
    small = narrowed(arg, 0)
    assert small.shape == (1, 2)
    t = make_tensor(small, "float64", "cpu", torch.Generator())
    assert t.tolist() == [[1.0, 2.0]]


# -- keyword tensors and set ----------------------------------------------------------------------

def test_keyword_tensors_are_made_cast_and_never_differentiated() -> None:
    case = one_case({"args": [{"shape": [3]}],
                     "kwargs": {"weight": {"shape": [3]}, "index": {"values": [0, 2],
                                                                   "dtype": "int64"}}})
    assert case.kwargs["weight"].requires_grad is False
    inputs = materialize(case, "float32", "cpu", 0)
    assert inputs.kwargs["weight"].dtype == torch.float32
    assert not inputs.kwargs["weight"].requires_grad
    ref = inputs.clone(dtype=torch.float64)
    assert ref.kwargs["weight"].dtype == torch.float64
    assert ref.kwargs["index"].dtype == torch.int64
    assert ref.kwargs["weight"] is not inputs.kwargs["weight"]


def test_a_keyword_tensor_asking_for_grad_is_an_error(tmp_path: Path) -> None:
    message = spec_error(tmp_path, "op: exp\nargs: [{shape: [3]}]\n"
                                   "kwargs: {w: {shape: [3], requires_grad: true}}\n")
    assert message.startswith("kwargs.w.requires_grad: keyword tensors are passed, never "
                              "differentiated"), message


def test_set_replaces_one_argument_by_position_or_name() -> None:
    (target,) = parse_document({
        "op": "exp",
        "args": [{"shape": [2, 3]}, {"shape": [4], "const": True}, 1],
        "kwargs": {"mode": "a", "scale": 1.0},
        "cases": [{"name": "base"},
                  {"name": "wide", "set": {0: {"shape": [2, 5]}, "mode": "b"}},
                  {"name": "both", "kwargs": {"scale": 2.0}, "set": {2: 3}},
                  {"name": "tensor_kwarg", "set": {"extra": {"shape": [2]}}}],
    })
    base, wide, both, tkw = target.op.cases
    assert wide.args[0] == TensorArg((2, 5)) and wide.args[1:] == base.args[1:]
    assert wide.kwargs == {"mode": "b", "scale": 1.0}
    assert both.args[2] == 3 and both.kwargs == {"mode": "a", "scale": 2.0}
    assert tkw.kwargs["extra"] == TensorArg((2,), requires_grad=False)


@pytest.mark.parametrize(("case", "expected"), [
    ("{name: a, set: {3: 1}}", "cases[0].set[3]: no argument at position 3 (the case's "
                               "positions: 0 to 1)"),
    ("{name: a, set: {-1: 1}}", "cases[0].set[-1]: no argument at position -1"),
    ("{name: a, set: {'x y': 1}}", "cases[0].set.'x y': expected an argument position"),
    ("{name: a, set: []}", "cases[0].set: expected a mapping"),
    ("{name: a, kwargs: {k: 1}, set: {k: 2}}", "cases[0].set.k: also given in this case's "
                                               "kwargs"),
    ("{name: a, set: {0: {shap: [2]}}}", "cases[0].set[0].shap: unknown key (did you mean "
                                         "shape?"),
    ("{name: a, sett: {0: 1}}", "cases[0].sett: unknown key (did you mean set? case keys: "),
])
def test_set_errors(case: str, expected: str, tmp_path: Path) -> None:
    message = spec_error(tmp_path, f"op: exp\nargs: [{{shape: [3]}}, 1]\ncases: [{case}]\n")
    assert message.startswith(expected), message


def test_memory_limit_follows_set(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("op: exp\nargs: [{shape: [4]}]\ncases:\n  - {name: a}\n"
                    "  - {name: big, set: {0: {shape: [1024, 1024]}}}\n")
    assert load_file(path, max_memory=16 << 20)
    with pytest.raises(SpecError, match=r"cases\[1\]\.set\[0\]\.shape: needs 8\.0 MiB"):
        load_file(path, max_memory=4 << 20)


# -- unknown names --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("op: exp\ndtype: [float64]\n", "dtype: unknown key (did you mean dtypes? op keys: "),
    ("op: exp\nargs: [{shape: [3], lwo: 0}]\n", "args[0].lwo: unknown key (did you mean low? "
                                               "tensor keys: "),
    ("op: exp\ndtypes: [flaot32]\n", "dtypes[0]: unknown dtype 'flaot32' (did you mean "
                                     "float32? dtypes: float64, float32"),
    ("op: exp\ndtypes: [int64]\n", "dtypes[0]: int64 is a dtype for tensor arguments"),
    ("op: exp\nchecks: [jacobain]\n", "checks[0]: unknown check 'jacobain' (did you mean "
                                      "jacobian?"),
    ("op: exp\nvariants: {transpose: false}\n", "variants.transpose: unknown variant family "
                                                "'transpose' (did you mean transposed?"),
    ("op: exp\ndevices: [cdua]\n", "devices[0]: unknown device 'cdua' (did you mean cuda?"),
    ("op: conv2\n", "op: unknown op 'conv2' (did you mean conv2d? bundled ops: "),
])
def test_unknown_names_say_what_was_meant(text: str, expected: str, tmp_path: Path) -> None:
    message = spec_error(tmp_path, text)
    assert message.startswith(expected), message


@pytest.mark.parametrize(("args", "expected"), [
    (["check", "conv2"], "gradlab: error: unknown op 'conv2' (did you mean conv2d? bundled ops: "
                         "linear, "),
    (["check", "conv2d", "--case", "basc"], "gradlab: error: --case: no case named 'basc' (did "
                                            "you mean basic? cases: basic, "),
    (["check", "conv2d", "--case", "basic", "--case", "nope"], "gradlab: error: --case: no case "
                                                              "named 'nope' (cases: basic, "),
    (["bench", "conv2d", "--case", "resnet3x3"], "gradlab: error: --case: no bench case named "
                                                 "'resnet3x3' (did you mean resnet_3x3? bench "
                                                 "cases: resnet_3x3)"),
    (["check", "exp", "--dtype", "flaot"], "gradlab: error: --dtype: unknown dtype 'flaot' "
                                           "(did you mean float64?"),
    (["check", "exp", "--check", "jacobain"], "gradlab: error: --check: unknown check "
                                              "'jacobain' (did you mean jacobian?"),
    (["check", "exp", "--variant", "transpose"], "gradlab: error: --variant: unknown variant "
                                                 "family 'transpose' (did you mean transposed?"),
    (["check", "exp", "--path", "no/such/dir"], "gradlab: error: --path: no/such/dir: no such "
                                                "folder"),
])
def test_cli_unknown_names_exit_2_in_one_line(args: list[str], expected: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([*args, "--report-dir", str(tmp_path)], capsys)
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(expected), lines


# -- where function: is imported from -------------------------------------------------------------

def write_module(folder: Path, name: str, value: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(
        "import torch\n"
        f"WHERE = {value!r}\n"
        "def double(x):\n    return 2 * x\n"
        "def double_reference(x):\n    return x * 2\n")


def spec_for(folder: Path, module: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.yaml"
    path.write_text(f"function: {module}:double\nreference: {module}:double_reference\n"
                    "dtypes: [float64]\nvariants: false\nargs: [{shape: [3]}]\n")
    return path


def test_function_from_the_spec_folder_then_path_then_cwd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"where_{uuid.uuid4().hex[:8]}"
    spec_dir, extra, cwd = tmp_path / "spec", tmp_path / "extra", tmp_path / "cwd"
    for folder in (spec_dir, extra, cwd):
        write_module(folder, name, folder.name)
    monkeypatch.chdir(cwd)
    # the spec folder wins over --path and the cwd; the isolated worker imports it too
    code, out, err = run_cli(["check", str(spec_for(spec_dir, name)), "--path", str(extra),
                              "--report-dir", str(tmp_path / "r"), "--isolate"], capsys)
    assert code == 0 and "PASSED" in out, (out, err)
    assert sys.modules[name].WHERE == "spec"
    # a spec elsewhere: --path comes before the current directory
    del sys.modules[name]
    (spec_dir / f"{name}.py").unlink()
    code, out, err = run_cli(["check", str(spec_for(tmp_path / "other", name)), "--path",
                              str(extra), "--report-dir", str(tmp_path / "r")], capsys)
    assert code == 0, (out, err)
    assert sys.modules[name].WHERE == "extra"
    del sys.modules[name]
    shutil.rmtree(extra)
    load_file(spec_for(tmp_path / "other", name))
    assert sys.modules[name].WHERE == "cwd"
    del sys.modules[name]


# -- the feature specs ----------------------------------------------------------------------------

def test_features_spec_passes_with_int_targets_fixed_taps_and_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", str(FEATURES / "features.yaml"), "--report-dir",
                              str(tmp_path)], capsys)
    assert code == 0 and "PASSED" in out, (out[-3000:], err)
    (csv,) = tmp_path.glob("check-*.csv")
    frame = pd.read_csv(csv)
    # the Functions have no jvp: forward_ad's warn is the only other status
    assert set(frame["status"]) <= {"pass", "warn"}
    assert set(frame[frame["status"] == "warn"]["check"]) <= {"forward_ad"}
    xent = frame[frame["op"] == "WeightedCrossEntropy"]
    assert {"basic", "fixed_target", "keep_all", "unweighted", "large_logits"} <= set(xent["case"])
    variants = set(xent["variant"])
    # integer target and bool mask: layout variants, never expanded ones
    assert {"noncontiguous[1]", "noncontiguous[2]", "expanded[0]"} <= variants
    assert not {"expanded[1]", "expanded[2]"} & variants
    # only the logits are differentiated: checked numerically and by the contract
    assert {"jacobian", "contract"} <= set(xent["check"])
    bank = frame[frame["op"] == "FilterBank"]
    assert {"db2", "odd_length", "stride_1", "haar", "inline_taps"} <= set(bank["case"])


def test_broken_features_twin_fails_with_the_right_hints(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", str(FEATURES / "features_broken.yaml"), "--report-dir",
                              str(tmp_path), "-q"], capsys)
    assert code == 1, (out[-3000:], err)
    # (the terminal output wraps lines: compare the words)
    assert "(if input 1 is a constant, mark it requires_grad: false)" in " ".join(out.split())
    frame = pd.read_csv(next(tmp_path.glob("check-*.csv")))
    failed = frame[frame["status"] == "fail"]
    hints = failed.groupby("op")["hint"].agg(set).to_dict()
    assert "missing" in hints["FilterBankTapsNotConst"]
    assert hints["CrossEntropyNoMean"] == {"constant_factor"}


def test_a_missing_gradient_names_the_input_to_mark_constant() -> None:
    from gradlab.render.words import describe

    # the advice belongs to a base gradient or jacobian row (the spec's own inputs)
    row = CheckRow("op", "case", "float64", "cpu", "base", "gradient", "fail")
    text = describe(Finding("input", 1, "missing", shape=(2, 4)), row=row)
    assert text == ("input 1 [2, 4]: gradient missing (None) for an input that requires grad "
                    "(if input 1 is a constant, mark it requires_grad: false)")


def test_inputs_diff_index_skips_integer_and_constant_tensors() -> None:
    inputs = Inputs([torch.ones(2, requires_grad=True), torch.ones(2, dtype=torch.int64),
                     torch.ones(2), 3, torch.ones(2, requires_grad=True)])
    assert inputs.diff_index == [0, 4] and inputs.tensor_index == [0, 1, 2, 4]

"""The YAML spec loader: valid specs become Targets, invalid ones a one-line keyed error."""

from pathlib import Path

import pytest
from conftest import DATA, ROOT

from gradlab import ops
from gradlab.errors import SpecError, UnknownOpError
from gradlab.model import TensorArg
from gradlab.spec import load_file, parse_document, resolve


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("malformed.yaml", "invalid YAML: line 4"),
        ("empty.yaml", "(top level): the file is empty"),
        ("top_list.yaml", "(top level): expected a mapping (one op) or 'ops: [...]', got list"),
        ("bad_shape.yaml", "ops[0].args[1].shape: expected a list of positive ints, got 'abc'"),
        ("unknown_op.yaml", "op: unknown op 'not_an_op'"),
        ("unknown_key.yaml", "ops[0].dtype: unknown key"),
        ("bad_dtype.yaml", "dtypes[1]: unknown dtype 'int7'"),
        ("bad_function.yaml", "function: cannot import 'no_such_module_xyz'"),
        ("overlap_strides.yaml", "cases[0].args[0].strides: strides [1, 1] make elements overlap"),
        ("bad_case.yaml", "cases[0].args[1].layout: expected one of contiguous, channels_last"),
    ],
)
def test_invalid_spec_names_file_and_key(name: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        load_file(DATA / name)
    message = str(info.value)
    assert message.startswith(f"{DATA / name}: "), message
    assert expected in message, message
    assert "\n" not in message


def test_every_bundled_spec_loads_and_names_a_bundled_op() -> None:
    files = sorted((ROOT / "specs").glob("*.yaml"))
    assert {f.stem for f in files} >= {e.name for e in ops.BUNDLED}
    for f in files:
        targets = load_file(f)
        assert targets and all(t.op.cases for t in targets), f


def test_base_args_cases_override_and_inherit() -> None:
    targets = parse_document({
        "op": "linear",
        "args": [{"shape": [4, 5]}, {"shape": [3, 5]}, {"shape": [3]}],
        "kwargs": {},
        "cases": [{"name": "inherits"},
                  {"name": "own", "args": [{"shape": [2, 5]}, {"shape": [3, 5]}, None]}],
        "dtypes": ["double"],
    })
    (t,) = targets
    assert [c.name for c in t.op.cases] == ["inherits", "own"]
    assert t.op.cases[0].args[0] == TensorArg((4, 5))
    assert t.op.cases[1].args[2] is None
    assert t.dtypes == ("float64",)


def test_tensor_layouts_parse() -> None:
    (t,) = parse_document({"op": "exp", "args": [
        {"shape": [2, 3, 4, 5], "layout": "channels_last"}]})
    assert t.op.cases[0].args[0].layout == "channels_last"
    (t,) = parse_document({"op": "exp", "args": [{"shape": [3, 4], "strides": [1, 5]}]})
    assert t.op.cases[0].args[0].strides == (1, 5)
    (t,) = parse_document({"op": "exp", "args": [
        {"shape": [2, 3, 4], "layout": "transposed", "transpose": [0, 2]}]})
    assert t.op.cases[0].args[0].transpose == (0, 2)


def test_value_escape_and_plain_values() -> None:
    (t,) = parse_document({"op": "mulconstant", "args": [{"shape": [3]}, {"value": 2.0}]})
    assert t.op.cases[0].args[1] == 2.0


def test_user_function_spec_loads_function_apply() -> None:
    (t,) = load_file(DATA / "user_ok.yaml")
    assert t.op.name == "Square"
    assert t.op.second_order is True
    assert t.op.reference is not None


def test_checks_and_variants_switches() -> None:
    (t,) = parse_document({"op": "exp", "checks": {"gradgradcheck": False},
                           "variants": ["grad_output"]})
    assert t.checks is not None and "gradgradcheck" not in t.checks and "gradcheck" in t.checks
    assert t.variants == frozenset({"grad_output"})


def test_resolve_name_file_and_folder(tmp_path: Path) -> None:
    assert resolve("conv2d")[0].op.name == "conv2d"
    assert len(resolve(str(ROOT / "specs"))) >= len(ops.BUNDLED)
    with pytest.raises(UnknownOpError):
        resolve("no_such_op")
    with pytest.raises(SpecError, match=r"no \*.yaml spec files"):
        resolve(str(tmp_path))
    with pytest.raises(SpecError, match="no such file"):
        resolve(str(tmp_path / "missing.yaml"))

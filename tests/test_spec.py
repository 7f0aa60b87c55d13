"""The YAML spec loader: valid specs become Targets, invalid ones a one-line keyed error."""

from importlib.resources import files
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from gradlab import ops
from gradlab.errors import SpecError, UnknownOpError
from gradlab.model import Case, TensorArg
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
        ("bad_case.yaml", "cases[0].args[1].layout: unknown layout 'diagonal' (layouts: "
                          "contiguous, channels_last"),
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
    (t,) = parse_document({"op": "exp", "checks": {"second_order": False},
                           "variants": ["grad_output"]})
    # explore is among them, run only when --explore asks (model.OPT_IN_CHECKS)
    assert t.checks == frozenset({"forward", "gradient", "contract", "jacobian", "forward_ad",
                                  "autocast", "capabilities", "edges", "opcheck", "explore"})
    assert t.variants == frozenset({"grad_output"})


def test_former_check_names_and_numerical_dtype_key_are_accepted() -> None:
    (t,) = parse_document({"op": "exp", "checks": {"gradgradcheck": False}})
    # explore is among them, run only when --explore asks (model.OPT_IN_CHECKS)
    assert t.checks == frozenset({"forward", "gradient", "contract", "jacobian", "forward_ad",
                                  "autocast", "capabilities", "edges", "opcheck", "explore"})
    (t,) = parse_document({"op": "exp", "checks": ["gradcheck", "gradgradcheck"]})
    assert t.checks == frozenset({"jacobian", "second_order"})
    (t,) = parse_document({"op": "exp", "numerical_dtype": "float32"})
    assert t.numerical_dtype == "float32"
    (t,) = parse_document({"op": "exp", "gradcheck_dtype": "double"})
    assert t.numerical_dtype == "float64"


def test_resolve_name_file_and_folder(tmp_path: Path) -> None:
    assert resolve("conv2d")[0].op.name == "conv2d"
    assert resolve("conv2d")[0].source == "gradlab/specs/conv2d.yaml"
    assert len(resolve(str(ROOT / "specs"))) >= len(ops.BUNDLED)
    with pytest.raises(UnknownOpError):
        resolve("no_such_op")
    with pytest.raises(SpecError, match=r"no \*.yaml spec files"):
        resolve(str(tmp_path))
    with pytest.raises(SpecError, match="no such file"):
        resolve(str(tmp_path / "missing.yaml"))


def cases_of(targets: list) -> list[tuple[str, tuple, dict, tuple]]:
    return [(c.name, c.args, dict(c.kwargs), c.size1) for t in targets for c in t.op.cases]


def bench_of(targets: list) -> list[tuple[str, tuple]]:
    return [(c.name, c.args) for t in targets for c in t.op.bench_cases]


@pytest.mark.parametrize("name", ops.names())
def test_bundled_name_runs_what_its_spec_file_runs(name: str) -> None:
    by_name = resolve(name)
    by_file = load_file(ROOT / "specs" / f"{name}.yaml")
    assert cases_of(by_name) == cases_of(by_file) and cases_of(by_name)
    assert bench_of(by_name) == bench_of(by_file)
    assert [(t.op.name, t.dtypes, t.devices, t.checks, t.variants, t.numerical_dtype)
            for t in by_name] == [(t.op.name, t.dtypes, t.devices, t.checks, t.variants,
                                   t.numerical_dtype) for t in by_file]


def test_bundled_specs_are_package_data() -> None:
    folder = files("gradlab") / "specs"
    assert folder.is_dir()
    found = {f.name for f in folder.iterdir() if f.name.endswith(".yaml")}
    assert found == {f"{n}.yaml" for n in ops.names()}
    assert ops.spec_file("conv2d").read_text(encoding="utf-8") == (
        folder / "conv2d.yaml").read_text(encoding="utf-8")
    # The top-level specs/ is a link to the package's folder, not a copy.
    assert (ROOT / "specs").resolve() == (ROOT / "gradlab" / "specs").resolve()


def test_op_without_cases_inherits_the_bundled_spec() -> None:
    (bundled,) = resolve("conv2d")
    (t,) = parse_document({"op": "conv2d", "dtypes": ["float64"]})
    assert cases_of([t]) == cases_of([bundled])
    assert bench_of([t]) == bench_of([bundled])
    assert t.dtypes == ("float64",) and t.devices is None
    # A spec's own cases replace the bundled ones; its bench is still inherited.
    (t,) = parse_document({"op": "conv2d", "cases": [
        {"name": "mine", "args": [{"shape": [1, 2, 4, 4]}, {"shape": [3, 2, 3, 3]}, None]}]})
    assert [c.name for c in t.op.cases] == ["mine"]
    assert bench_of([t]) == bench_of([bundled])


def test_inherited_base_is_the_bundled_top_level_args_and_size1() -> None:
    (bundled,) = resolve("blur")  # blur.yaml has top-level args and size1
    (t,) = parse_document({"op": "blur", "cases": [
        {"name": "asym"}, {"name": "small", "args": [{"shape": [1, 2, 3, 3]}, "binomial"]}]})
    first = bundled.op.cases[0]
    assert t.op.cases[0] == Case("asym", first.args, first.kwargs, first.size1)
    assert t.op.cases[1].size1 == first.size1
    # conv2d.yaml has no top-level args: a case without args takes the first case's args alone
    # (its per-case size1 stays its own), so a copy of conv2d.yaml loads exactly as the original.
    (conv,) = resolve("conv2d")
    (t,) = parse_document({"op": "conv2d", "cases": [
        {"name": "again"}, {"name": "mine", "args": list(conv.op.cases[1].args)}]})
    assert t.op.cases[0] == Case("again", conv.op.cases[0].args)
    assert t.op.cases[1].size1 == ()


def test_a_bundled_name_wins_over_a_same_named_folder(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conv2d").mkdir()
    (tmp_path / "conv2d" / "other.yaml").write_text("op: exp\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert [t.op.name for t in resolve("conv2d")] == ["conv2d"]
    assert [t.op.name for t in resolve("./conv2d")] == ["exp"]


def test_modconv_spec_holds_its_cases() -> None:
    (t,) = resolve("modconv")
    assert [c.name for c in t.op.cases] == ["reflect", "zero_pad", "upsample", "downsample",
                                            "normalize_mlp", "kernel1x1"]
    assert [c.name for c in t.op.bench_cases] == ["8x64x64x32x32"]
    size1 = (((0, 0), (1, 0)), ((2, 0), (3, 1)), ((0, 1), (2, 1), (4, 0), (5, 0)))
    assert all(c.size1 == size1 for c in t.op.cases)

"""torch.library custom ops: opcheck's checks as gradlab rows beside gradlab's own.

The ops live in tests/data/customops/gl_custom_ops.py (namespace gradlab_cops, registered once
per process): `scale_sin` is correct and the twin of each broken copy.  Each is checked through
the API (the op object) and through a spec (`function: gradlab_cops::NAME`, `import:`).
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA, run_cli
from torchguards import needs

import gradlab
from gradlab.checks.numeric import opcheck
from gradlab.customops import LibraryOp, is_qualname, library_op
from gradlab.render.words import message
from gradlab.results import CheckRow, Report

needs("library_custom_op")  # custom_op with these annotations: torch 2.5
CUSTOM = DATA / "customops"
OPCHECK_ROWS = ("schema", "autograd_registration", "faketensor", "aot_dispatch_dynamic",
                "aot_dispatch_static")


# The test ops' module, imported as the specs beside it import it (by its own name; a
# worker process of an isolated run finds it on the sys.path it is given).
sys.path.insert(0, str(CUSTOM))


@pytest.fixture(scope="module")
def cops() -> Any:
    import gl_custom_ops

    return gl_custom_ops


def example() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
            for _ in range(2)]


def opcheck_rows(report: Report) -> dict[str, CheckRow]:
    return {r.variant: r for r in report.rows if r.check == "opcheck"}


def table(rows: list[CheckRow]) -> str:
    return "\n".join(f"{r.variant} {r.check} {r.status} {r.hint} {message(r)[:160]}"
                     for r in rows)


@pytest.mark.parametrize("form", ["torch.ops", "custom_op function"])
def test_a_correct_custom_op_passes_every_row(form: str, cops: Any) -> None:
    op = torch.ops.gradlab_cops.scale_sin if form == "torch.ops" else cops.OPS["scale_sin"]
    r = gradlab.check(op, example(), reference=cops.scale_sin_reference)
    assert r.passed, table(r.failures)
    rows = opcheck_rows(r)
    assert sorted(rows) == sorted(OPCHECK_ROWS)
    assert all(row.status == "pass" for row in rows.values()), table(list(rows.values()))
    assert {row.op for row in r.rows} == {"gradlab_cops::scale_sin"}
    # gradlab's own checks ran beside them: gradients, Jacobians, the variants
    assert {"gradient", "jacobian", "second_order", "contract"} <= {row.check for row in r.rows}
    assert any(row.variant.startswith("noncontiguous") for row in r.rows)


@pytest.mark.parametrize(("name", "row", "hint"), [
    ("bad_fake", "faketensor", "fake_mismatch"),
    ("mutates_input", "schema", "undeclared_mutation"),
])
def test_a_broken_custom_op_fails_its_opcheck_row_with_its_hint(name: str, row: str, hint: str,
                                                                cops: Any) -> None:
    r = gradlab.check(getattr(torch.ops.gradlab_cops, name), example(),
                      reference=cops.scale_sin_reference, variants=False)
    got = opcheck_rows(r)[row]
    assert (got.status, got.hint) == ("fail", hint), table(r.rows)
    assert not r.passed


def test_the_aot_rows_of_a_wrong_fake_kernel_name_the_fake_kernel(cops: Any) -> None:
    r = gradlab.check(torch.ops.gradlab_cops.bad_fake, example(),
                      reference=cops.scale_sin_reference, checks=["opcheck"])
    rows = opcheck_rows(r)
    assert [rows[v].hint for v in ("aot_dispatch_dynamic", "aot_dispatch_static")] == [
        "fake_mismatch", "fake_mismatch"], table(r.rows)
    assert rows["schema"].status == rows["autograd_registration"].status == "pass"
    assert "Shapes torch.Size([3, 4]) and torch.Size([3, 5])" in rows["faketensor"].note


def test_a_wrong_registered_backward_passes_opcheck_and_fails_gradlab(cops: Any) -> None:
    op = torch.ops.gradlab_cops.bad_grad
    torch.library.opcheck(op, tuple(example()))  # raises on any failure: opcheck alone passes
    r = gradlab.check(op, example(), reference=cops.scale_sin_reference, variants=False)
    assert all(row.status == "pass" for row in opcheck_rows(r).values()), table(r.rows)
    failing = {row.check: row.hint for row in r.failures}
    assert failing.get("gradient") == "constant_factor", table(r.rows)
    assert failing.get("jacobian") == "constant_factor", table(r.rows)
    assert "off by a constant factor 1.5" in message(
        next(row for row in r.failures if row.check == "gradient"))


def test_no_fake_kernel_is_a_warning_and_strict_fails_it(cops: Any) -> None:
    op = torch.ops.gradlab_cops.no_fake
    r = gradlab.check(op, example(), reference=cops.scale_sin_reference, checks=["opcheck"])
    rows = opcheck_rows(r)
    assert (rows["faketensor"].status, rows["faketensor"].hint) == ("warn", "fake_missing")
    assert r.passed, table(r.rows)
    strict = gradlab.check(op, example(), reference=cops.scale_sin_reference,
                           checks=["opcheck"], strict=True)
    assert opcheck_rows(strict)["faketensor"].status == "fail" and not strict.passed


def test_an_op_that_raises_on_the_case_is_one_error_row_not_five_causes(cops: Any) -> None:
    r = gradlab.check(torch.ops.gradlab_cops.raises, example(),
                      reference=cops.scale_sin_reference, checks=["opcheck"])
    rows = [row for row in r.rows if row.check == "opcheck"]
    assert [(row.variant, row.status) for row in rows] == [("base", "error")], table(rows)
    assert "takes 1-D inputs only" in rows[0].note


def test_a_plain_callable_gets_no_opcheck_rows() -> None:
    r = gradlab.check(lambda x, w: x * w.sin(), example(), reference=lambda x, w: x * w.sin(),
                      variants=False)
    assert r.passed and not opcheck_rows(r)


# -- through a spec -------------------------------------------------------------------------

#: spec file -> (exit code, the failing opcheck row and its hint; None: none fails there)
SPECS = {
    "scale_sin": (0, None),
    "bad_fake": (1, ("faketensor", "fake_mismatch")),
    "mutates_input": (1, ("schema", "undeclared_mutation")),
    "bad_grad": (1, None),
    "no_fake": (0, None),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_through_a_spec(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    more = []
    if name == "bad_fake":  # one isolated run: the op travels to a worker by its name
        monkeypatch.setenv("GRADLAB_ISOLATE", "1")
        more = ["--no-variants"]  # the worker imports torch and AOTAutograd again: seconds
    code, out, err = run_cli(["check", str(CUSTOM / f"{name}.yaml"), "--report-dir",
                              str(tmp_path), *more], capsys)
    want_code, failing = SPECS[name]
    assert code == want_code, out + err
    (report,) = tmp_path.glob("check-*.json")
    rows = json.loads(report.read_text())["rows"]
    assert {r["op"] for r in rows} == {f"gradlab_cops::{name}"}
    opcheck_status = {r["variant"]: (r["status"], r["hint"]) for r in rows
                      if r["check"] == "opcheck"}
    assert sorted(opcheck_status) == sorted(OPCHECK_ROWS)
    if failing is not None:
        assert opcheck_status[failing[0]] == ("fail", failing[1]), opcheck_status
        assert "--variant base" in out  # the repro line re-runs the numerical item
    if name == "bad_grad":
        assert all(s == "pass" for s, _ in opcheck_status.values()), opcheck_status
        assert {(r["check"], r["hint"]) for r in rows if r["status"] == "fail"
                and r["variant"] == "base"} >= {("gradient", "constant_factor"),
                                                 ("jacobian", "constant_factor")}
    if name == "no_fake":
        assert opcheck_status["faketensor"] == ("warn", "fake_missing")


@pytest.mark.parametrize("ref", ["gl_custom_ops:gradlab_cops::scale_sin",
                                 "gl_custom_ops:scale_sin"])
def test_the_other_spec_forms_name_the_same_op(ref: str, tmp_path: Path) -> None:
    from gradlab.spec import load_file

    spec = tmp_path / "op.yaml"
    spec.write_text(f"function: {ref}\nargs: [{{shape: [3, 4]}}, {{shape: [3, 4]}}]\n")
    (target,) = load_file(spec)
    fn = target.op.function
    assert isinstance(fn, LibraryOp) and fn.qualname == "gradlab_cops::scale_sin"
    assert "gl_custom_ops" in fn.modules
    if "::" in ref:
        assert target.op.name == "gradlab_cops::scale_sin"


#: spec text -> the one-line error it must give (exit 2)
BAD_SPECS = {
    "function: 'mylib::'\nargs: [{shape: [2]}]\n":
        "function: expected 'package.module:attr' or a torch.library op",
    "function: gradlab_cops::scale_sin\nimport: [gl_custom_ops, 3]\nargs: [{shape: [2]}]\n":
        "import[1]: expected a module name (package.module), got 3",
    "function: gradlab_cops::scale_sin\nimport: no_such_module_i39a\nargs: [{shape: [2]}]\n":
        "import: cannot import 'no_such_module_i39a'",
    "function: gradlab_cops::scale_cos\nimport: gl_custom_ops\nargs: [{shape: [2]}]\n":
        "function: no torch.library op 'gradlab_cops::scale_cos' is registered after importing "
        "gl_custom_ops (did you mean gradlab_cops::scale_sin?",
    "function: nosuchns_i39a::op\nargs: [{shape: [2]}]\n":
        "function: no torch.library op 'nosuchns_i39a::op' is registered; name the module that "
        "registers it with `import: package.module`",
}


@pytest.mark.parametrize("text", list(BAD_SPECS), ids=range(len(BAD_SPECS)))
def test_a_bad_op_spec_is_one_line_naming_the_key(text: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"  # gl_custom_ops imports from sys.path (see above)
    spec.write_text(text)
    code, out, err = run_cli(["check", str(spec), "--report-dir", str(tmp_path)], capsys)
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert BAD_SPECS[text] in line, line
    assert str(spec) in line


# -- the pieces -----------------------------------------------------------------------------

def test_a_library_op_pickles_by_name_and_finds_the_op_again(cops: Any) -> None:
    op = library_op(cops.OPS["scale_sin"], ["gl_custom_ops"])
    assert op is not None and op.qualname == "gradlab_cops::scale_sin"
    back = pickle.loads(pickle.dumps(op))
    x, w = example()
    assert torch.equal(back(x, w), cops.scale_sin_reference(x, w))
    assert back.overload is torch.ops.gradlab_cops.scale_sin.default
    assert library_op(torch.ops.gradlab_cops.scale_sin.default).qualname == (  # type: ignore[union-attr]
        "gradlab_cops::scale_sin.default")
    assert library_op(torch.sin) is None and library_op(lambda x: x) is None


def test_the_ops_module_imported_again_under_another_name_registers_nothing_twice(
        cops: Any) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gl_custom_ops_again",
                                                  CUSTOM / "gl_custom_ops.py")
    assert spec is not None and spec.loader is not None
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)
    # the same ops, not registered again (torch 2.13 would replace them silently, leaving the
    # op objects the other tests hold stale)
    assert again.OPS["scale_sin"] is cops.OPS["scale_sin"]


def test_qualified_names() -> None:
    assert is_qualname("mylib::op") and is_qualname("mylib::op.default")
    assert not any(is_qualname(t) for t in ("mylib::", "::op", "mylib:op", "a::b::c", 3))


@pytest.mark.parametrize(("util", "text", "fake", "hint"), [
    ("test_schema", "Argument x is not defined as mutable but was mutated", None,
     "undeclared_mutation"),
    ("test_schema", "Argument x is not defined to alias output but was aliasing", None,
     "undeclared_alias"),
    ("test_schema", "Outputs 0 and 1 alias unexpectedly", None, "schema_violation"),
    ("test_faketensor", "There was no fake impl registered for <CustomOpDef(a::b)>", None,
     "fake_missing"),
    ("test_faketensor", "found mismatched tensor metadata: Dtypes", None, "fake_mismatch"),
    ("test_aot_dispatch_dynamic", "The size of tensor a (s49 + 1) must match", "fake_mismatch",
     "fake_mismatch"),
    ("test_aot_dispatch_dynamic", "The size of tensor a (s49 + 1) must match", None,
     "aot_dispatch"),
    ("test_aot_dispatch_static", "Trying to backward through a.b.default but no autograd "
     "formula was registered", None, "autograd_missing"),
    ("test_autograd_registration", "a.b: at least one output of this operator has "
     "requires_grad=True", None, "autograd_registration"),
])
def test_an_opcheck_failure_is_read_into_a_hint(util: str, text: str, fake: str | None,
                                               hint: str) -> None:
    assert opcheck.cause(util, RuntimeError(text), fake) == hint


def test_an_older_torch_gives_declared_skips_naming_the_release(
        cops: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opcheck, "has", lambda name: name != "library_opcheck")
    r = gradlab.check(torch.ops.gradlab_cops.scale_sin, example(),
                      reference=cops.scale_sin_reference, checks=["opcheck"])
    rows = opcheck_rows(r)
    assert sorted(rows) == sorted(OPCHECK_ROWS)
    assert all((row.status, row.declared, row.reason) == ("skip", True, "old_torch")
               for row in rows.values())
    assert "torch.library.opcheck (torch 2.4 or newer)" in rows["schema"].note


def test_a_utility_this_torch_lacks_is_a_declared_skip(cops: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opcheck, "opcheck_utils", lambda: opcheck.UTILS[:-1])
    r = gradlab.check(torch.ops.gradlab_cops.scale_sin, example(),
                      reference=cops.scale_sin_reference, checks=["opcheck"])
    static = opcheck_rows(r)["aot_dispatch_static"]
    assert (static.status, static.declared, static.reason) == ("skip", True, "old_torch")
    assert "has no test_aot_dispatch_static" in static.note


def test_under_the_triton_interpreter_a_triton_ops_fake_rows_are_declared_skips(
        cops: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # measured with a real triton_op under TRITON_INTERPRET=1: faketensor and both AOT rows
    # fail whatever the op ("Attempted to set the storage of a tensor on device meta ...")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(LibraryOp, "is_triton", property(lambda self: True))
    r = gradlab.check(torch.ops.gradlab_cops.scale_sin, example(),
                      reference=cops.scale_sin_reference, checks=["opcheck"])
    rows = opcheck_rows(r)
    assert {v: (row.status, row.reason) for v, row in rows.items()} == {
        "schema": ("pass", ""), "autograd_registration": ("pass", ""),
        **dict.fromkeys(OPCHECK_ROWS[2:], ("skip", "triton_interpreted"))}, table(r.rows)
    assert all(rows[v].declared for v in OPCHECK_ROWS[2:])


def test_a_triton_op_is_a_custom_op() -> None:
    """torch.library.triton_op makes a custom_op: recognised as one (running it on the CPU
    needs TRITON_INTERPRET=1, under which its fake and AOT rows are declared skips)."""
    triton = pytest.importorskip("triton")
    if not hasattr(torch.library, "triton_op"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.triton_op")
    import triton.language as tl

    @triton.jit
    def double(x_ptr: Any, y_ptr: Any, n: Any, block: tl.constexpr) -> None:
        offs = tl.program_id(0) * block + tl.arange(0, block)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    name = "gradlab_cops::triton_double"
    from torch._library.custom_ops import OPDEFS

    if name not in OPDEFS:
        @torch.library.triton_op(name, mutates_args=())
        def triton_double(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            torch.library.wrap_triton(double)[(triton.cdiv(x.numel(), 16),)](
                x, y, x.numel(), block=16)
            return y
    op = library_op(OPDEFS[name])
    assert isinstance(op, LibraryOp) and op.qualname == name and op.is_triton
    assert not library_op(torch.ops.gradlab_cops.scale_sin).is_triton  # type: ignore[union-attr]


def test_a_value_dependent_output_shape_is_a_declared_skip_under_static_shapes(
        cops: Any) -> None:
    # torch's own custom_op_db ops (numpy_nonzero, numpy_nms) failed aot_dispatch_static,
    # which torch.library.opcheck does not run by default: no op with a value-dependent output
    # size can be traced with static shapes.  Dynamic shapes trace it, and it passes there.
    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4).requires_grad_()
    w = example()[1]
    r = gradlab.check(torch.ops.gradlab_cops.positives, [x, w],
                      reference=cops.positives_reference)
    rows = opcheck_rows(r)
    assert rows["aot_dispatch_static"].status == "skip", table(list(rows.values()))
    assert rows["aot_dispatch_static"].reason == "data_dependent_shape"
    assert rows["aot_dispatch_dynamic"].status == "pass", table(list(rows.values()))
    assert r.passed, table(r.failures)

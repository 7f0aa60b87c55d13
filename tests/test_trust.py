"""A green run means verified: a raising reference, NaN, global state and gradlab's own bugs never
end in a pass, and the same inputs give the same rows.  Each broken Function has a correct twin
that passes."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torchguards import needs

import gradlab
from gradlab.checks.numeric import base
from gradlab.checks.run import driver
from gradlab.checks.run.options import Options
from gradlab.model import Case, OpDef, Target, TensorArg
from gradlab.render.words import message
from gradlab.results import CheckRow, Report

F64 = torch.float64


def rand(*shape: int, seed: int = 0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (2 * torch.rand(shape, generator=gen, dtype=F64) - 1).requires_grad_()


def table(rows: list[CheckRow]) -> list[tuple[str, str, str, str, str]]:
    return [(r.variant, r.check, r.status, r.hint, message(r)) for r in rows]


def raising_reference(x: Tensor) -> Tensor:
    raise ValueError("reference cannot do this case")


class Exp(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


def test_a_raising_reference_is_an_error_not_a_pass() -> None:
    r = gradlab.check(Exp, [rand(3, 4)], reference=raising_reference)
    assert not r.passed
    errors = [row for row in r.rows if row.reason == "reference_failed"]
    assert {row.check for row in errors} >= {"forward", "gradient"}, table(r.rows)
    assert all(row.status == "error" for row in errors)
    assert "reference cannot do this case" in message(errors[0])
    assert "the reference failed" in message(errors[0])


def test_twin_with_a_working_reference_passes() -> None:
    assert gradlab.check(Exp, [rand(3, 4)], reference=torch.exp).passed


class NanForward(Function):
    """BROKEN: forward returns NaN for every element (0/0), backward is the identity."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 0 / 0

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g


class InfGradient(Function):
    """BROKEN: y = x, but backward divides by (x - x): an infinite gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / (x - x)


class Identity(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g


def test_a_nan_forward_fails_with_its_hint() -> None:
    r = gradlab.check(NanForward, [rand(3, 4)], reference=lambda x: x.clone())
    rows = [row for row in r.failures if row.check == "forward" and row.variant == "base"]
    assert rows and rows[0].hint == "non_finite", table(r.rows)


def test_a_nan_forward_fails_the_numerical_check_without_a_reference() -> None:
    """torch's gradcheck raises on NaN; a check that compares NaN with NaN must not pass."""
    r = gradlab.check(NanForward, [rand(3, 4)], checks=["jacobian"])
    (row,) = r.rows
    assert row.status == "fail" and row.hint == "non_finite", table(r.rows)
    r = gradlab.check(NanForward, [rand(3, 4)], checks=["jacobian"], mode="fast")
    (row,) = r.rows
    assert row.status == "fail", table(r.rows)


def test_an_infinite_gradient_fails_with_its_hint() -> None:
    r = gradlab.check(InfGradient, [rand(3, 4)], reference=lambda x: x.clone())
    rows = [row for row in r.failures if row.check == "gradient" and row.variant == "base"]
    assert rows and rows[0].hint == "non_finite", table(r.rows)
    assert "non-finite" in message(rows[0])


def test_nan_twin_passes() -> None:
    r = gradlab.check(Identity, [rand(3, 4)], reference=lambda x: x.clone())
    assert r.passed, table(r.failures)


def test_nan_where_the_reference_is_nan_too_is_its_domain() -> None:
    """log of a negative number: NaN in both is not the Function's fault."""
    x = torch.tensor([-1.0, 0.5, 2.0], dtype=F64, requires_grad=True)
    r = gradlab.check(torch.log, [x], reference=torch.log, checks=["forward", "gradient"])
    assert r.passed, table(r.failures)


class FlipsDefaultDtype(Function):
    """BROKEN: forward switches the default dtype to float64 and never switches it back."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        torch.set_default_dtype(F64)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


class TurnsOnAnomalyMode(Function):
    """BROKEN: forward turns anomaly detection on (slowing every later step) for good."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        torch.autograd.set_detect_anomaly(True)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


class Double(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


def float32_default_op() -> Target:
    """A correct op that relies on torch's defaults (as code in a training script does): it
    raises if a Function before it left a setting changed."""

    def scale_by_ones(x: Tensor) -> Tensor:
        if torch.get_default_dtype() != torch.float32 or torch.is_anomaly_enabled():
            raise RuntimeError("global settings leaked from an earlier op")
        return x * torch.ones(x.shape, dtype=x.dtype)

    op = OpDef(name="scale_by_ones", summary="", function=scale_by_ones,
               reference=lambda x: x * 1.0, second_order=True,
               cases=(Case("c", (TensorArg((3, 4)),)),), dtypes=("float32",))
    return Target(op=op)


@pytest.mark.parametrize(("broken", "setting"), [(FlipsDefaultDtype, "default_dtype"),
                                                 (TurnsOnAnomalyMode, "anomaly_mode")])
def test_a_function_that_changes_global_state_fails_and_later_ops_do_not(
        broken: type[Function], setting: str) -> None:
    before = (torch.get_default_dtype(), torch.is_anomaly_enabled())
    bad = Target(op=OpDef(name="bad", summary="", function=broken.apply,
                          reference=lambda x: x * 2, second_order=True,
                          cases=(Case("c", (TensorArg((3, 4)),)),), dtypes=("float32",)))
    report = driver.run([bad, float32_default_op()], Options(variants=False))
    flagged = [r for r in report.failures if r.hint == "global_state"]
    assert flagged and all(r.op == "bad" for r in flagged), table(report.rows)
    assert setting in message(flagged[0])
    later = [r for r in report.rows if r.op == "scale_by_ones"]
    assert later and all(r.status == "pass" for r in later), table(later)
    # the caller gets its settings back
    assert (torch.get_default_dtype(), torch.is_anomaly_enabled()) == before


def test_state_twin_passes() -> None:
    r = gradlab.check(Double, [rand(3, 4)], reference=lambda x: x * 2)
    assert r.passed, table(r.failures)
    assert not [row for row in r.rows if row.hint == "global_state"]


def test_the_api_gives_back_the_callers_settings() -> None:
    torch.set_num_threads(2)
    with torch.no_grad():
        gradlab.check(FlipsDefaultDtype, [rand(3, 4)], reference=lambda x: x * 2)
        assert not torch.is_grad_enabled()
    assert torch.get_default_dtype() == torch.float32
    assert torch.get_num_threads() == 2


def test_a_gradlab_bug_is_an_internal_error_not_the_functions_crash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a gradlab function called the wrong way from gradlab's own code: only gradlab's frames
    # are on the traceback (a lambda defined here would count as the user's code)
    from gradlab.model import canonical_check

    monkeypatch.setattr(base, "compare_runs", canonical_check)  # the base rows' comparison
    r = gradlab.check(Double, [rand(3, 4)], reference=lambda x: x * 2, variants=False)
    internal = r.internal_errors
    assert internal and internal[0].status == "error", table(r.rows)
    assert "TypeError" in internal[0].traceback and "runner.py" in internal[0].traceback
    assert "gradlab bug" in message(internal[0])
    assert not r.passed


def test_a_crash_in_user_code_is_the_functions_error() -> None:
    class Crashes(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            raise RuntimeError("user bug")

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            return g

    r = gradlab.check(Crashes, [rand(3, 4)], reference=lambda x: x)
    assert not r.internal_errors
    assert any(row.status == "error" and "user bug" in row.note for row in r.rows)


def rows_without_timings(rows: list[CheckRow]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(dataclasses.replace(r, seconds=0.0)) for r in rows]


def test_the_same_inputs_give_identical_rows_run_after_run() -> None:
    """Dense or probes is decided from sizes, not timings: numbers do not move between runs."""
    x, w = rand(6, 40, seed=1), rand(30, 40, seed=2)
    runs = [gradlab.check(lambda a, b: a @ b.t(), [x, w], reference=lambda a, b: a @ b.t())
            for _ in range(3)]
    modes = {r.mode for r in runs[0].rows if r.mode}
    assert modes, table(runs[0].rows)
    assert rows_without_timings(runs[0].rows) == rows_without_timings(runs[1].rows)
    assert rows_without_timings(runs[1].rows) == rows_without_timings(runs[2].rows)


class BiasSqueeze(Function):
    """BROKEN: y = x + b for a [1] bias, backward returns the bias gradient as [1, 1] (autograd
    sums it back to [1] silently, so only the raw return value shows it)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, b: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return (x + b) * scale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        return g * ctx.scale, (g * ctx.scale).sum().reshape(1, 1), None


class Bias(Function):
    """Correct twin of BiasSqueeze."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, b: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return (x + b) * scale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        return g * ctx.scale, (g * ctx.scale).sum().reshape(1), None


def bias_reference(x: Tensor, b: Tensor, scale: float) -> Tensor:
    return (x + b) * scale


@pytest.mark.parametrize("how", ["direct", "wrapped", "kwargs"])
def test_the_contract_sees_the_raw_return_however_the_function_is_called(how: str) -> None:
    if how == "wrapped":  # a Function inside other ops: its node's own metadata
        needs("node_metadata")
    x, b = rand(3, 4), rand(1, seed=1)
    for fn, broken in ((BiasSqueeze, True), (Bias, False)):
        if how == "direct":
            r = gradlab.check(fn, [x, b, 0.5], reference=bias_reference, variants=False)
        elif how == "wrapped":
            def wrapped(x: Tensor, b: Tensor, scale: float, fn: Any = fn) -> Tensor:
                return fn.apply(x, b, scale).relu() + 0  # the Function inside other ops
            r = gradlab.check(wrapped, [x, b, 0.5],
                              reference=lambda x, b, s: bias_reference(x, b, s).relu(),
                              variants=False)
        else:
            r = gradlab.check(fn, [x, b], kwargs={"scale": 0.5}, reference=bias_reference,
                              variants=False)
        (row,) = [row for row in r.rows if row.check == "contract"]
        if broken:
            # [1, 1] for a [1] bias: autograd sums it down, the user's gradient is right; the
            # contract leans on the engine: a warn (summed_shape), not a failure
            assert (row.status, row.hint) == ("warn", "summed_shape"), table(r.rows)
            assert "shape [1, 1], expected [1]" in message(row)
            if how == "wrapped":
                assert "of BiasSqueeze" in message(row)
        else:
            assert row.status == "pass" and not row.reason, table(r.rows)


def test_autograd_fixes_a_summed_shape_for_the_gradient_row_while_the_contract_warns() -> None:
    # the direct call's return value breaks the contract: the gradient a user sees is autograd's
    # (summed to [1]), compared on a run of its own
    r = gradlab.check(BiasSqueeze, [rand(3, 4), rand(1, seed=1), 0.5],
                      reference=bias_reference, variants=["noncontiguous"])
    rows = {(row.variant, row.check): row for row in r.rows}
    assert rows["base", "contract"].status == "warn", table(r.rows)
    assert rows["base", "gradient"].status == "pass", table(r.rows)
    assert rows["noncontiguous[0]", "gradient"].status == "pass", table(r.rows)


class Counted(Function):
    """x * y, counting forward and backward calls."""

    calls: ClassVar[dict[str, int]] = {"forward": 0, "backward": 0}

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        Counted.calls["forward"] += 1
        ctx.save_for_backward(x, y)
        ctx.scale = 1.0
        return x * y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        Counted.calls["backward"] += 1
        x, y = ctx.saved_tensors
        return g * y * ctx.scale, g * x * ctx.scale


@pytest.mark.parametrize("how", ["direct", "wrapped"])
def test_one_forward_and_backward_serve_the_gradient_and_the_contract(how: str) -> None:
    needs("node_metadata")  # the direct call that saves the second backward
    fn = Counted.apply if how == "direct" else (lambda x, y: Counted.apply(x, y))
    Counted.calls.update(forward=0, backward=0)
    r = gradlab.check(fn, [rand(3, 4), rand(3, 4, seed=1)], reference=lambda x, y: x * y,
                      checks=["forward", "gradient", "contract"], variants=["noncontiguous"])
    assert r.passed, table(r.failures)
    assert {row.check for row in r.rows if row.variant == "noncontiguous[1]"} == {
        "forward", "gradient"}
    # the base run (its backward run a second time on its graph for the re-entrancy check,
    # and a third after one more forward for state kept outside ctx), then one run per
    # variant (two): one forward each, and one backward
    assert Counted.calls == {"forward": 4, "backward": 5}


class CountedOnce(Counted):
    """Counted whose backward changes ctx: a second backward on one graph is wrong."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        grads = Counted.backward(ctx, g)
        ctx.scale *= 2
        return grads


@pytest.mark.parametrize("fn", [Counted, CountedOnce], ids=["reentrant", "not_reentrant"])
def test_grad_output_variants_run_backward_again_only_on_a_reentrant_graph(fn: Any) -> None:
    needs("node_metadata")  # the calls counted are those of the direct call
    Counted.calls.update(forward=0, backward=0)
    r = gradlab.check(fn, [rand(3, 4), rand(3, 4, seed=1)], reference=lambda x, y: x * y,
                      checks=["forward", "gradient", "contract"], variants=["grad_output"])
    variants = {"grad_output:noncontiguous", "grad_output:transposed", "grad_output:expanded"}
    rows = [row for row in r.rows if row.variant in variants]
    # no variant inherits the base's broken backward: each gradient is right on its own graph
    assert {row.variant for row in rows} == variants
    assert all(row.status == "pass" for row in rows), table(r.rows)
    contract = next(row for row in r.rows if row.check == "contract")
    if fn is Counted:
        # forwards: the base's and the state check's; backwards on the base graph: its own,
        # the re-entrancy and state checks', the 3 variants'
        assert contract.status == "pass" and Counted.calls == {"forward": 2, "backward": 6}
    else:
        # the base graph answers a second backward wrongly: each variant gets a forward
        assert contract.hint == "not_reentrant" and Counted.calls == {"forward": 4,
                                                                        "backward": 5}


def _input_twice(x: Tensor) -> Tensor:
    return Counted.apply(x, x)


def _op_before(x: Tensor) -> Tensor:
    return Counted.apply(x, x * 2)


@pytest.mark.parametrize(("wrapper", "ref"), [(_input_twice, lambda x: x * x),
                                              (_op_before, lambda x: 2 * x * x)],
                         ids=["input_twice", "op_before"])
def test_gradients_summed_over_paths_are_autograds_not_one_edges(wrapper: Any, ref: Any) -> None:
    # the node's return value is only part of the gradient here: autograd sums both paths
    r = gradlab.check(wrapper, [rand(3, 4)], reference=ref,
                      variants=["noncontiguous", "grad_output"])
    assert r.passed, table(r.failures)


def test_the_contract_checks_torch_library_ops() -> None:
    needs("library_custom_op")
    lib_name = "gradlab_test::bad_sin"
    if not hasattr(torch.ops.gradlab_test, "bad_sin"):
        @torch.library.custom_op(lib_name, mutates_args=())
        def bad_sin(x: Tensor) -> Tensor:
            return x.sin()

        @bad_sin.register_fake
        def _(x: Tensor) -> Tensor:
            return torch.empty_like(x)

        def setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
            ctx.save_for_backward(inputs[0])

        def backward(ctx: Any, g: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            return (g * x.cos()).mT  # BROKEN: [4, 1] for a [1, 4] input (no sum makes it fit)

        bad_sin.register_autograd(backward, setup_context=setup)
    r = gradlab.check(torch.ops.gradlab_test.bad_sin, [rand(1, 4)], reference=torch.sin,
                      variants=False)
    (row,) = [row for row in r.rows if row.check == "contract"]
    assert (row.status, row.hint) == ("fail", "wrong_shape"), table(r.rows)


def test_plain_autograd_says_only_in_place_writes_were_checked() -> None:
    r = gradlab.check(torch.exp, [rand(3)], reference=torch.exp, variants=False)
    (row,) = [row for row in r.rows if row.check == "contract"]
    assert (row.status, row.reason) == ("pass", "no_custom_function")
    assert "only in-place writes were checked" in message(row)


class RawBackwardRaises(Function):
    """Correct under autograd, but its backward cannot be called on its own (it reads state
    that only autograd's hooks set): the raw check cannot run, which is not a pass."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.calls = 0
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        ctx.calls += 1
        if ctx.calls == 1:
            raise RuntimeError("first call of backward refused")
        return g * 2


def test_a_contract_that_cannot_run_is_an_undeclared_skip_not_a_pass() -> None:
    from gradlab.cases import Inputs
    from gradlab.checks.numeric.rawbackward import raw_backward

    res = raw_backward(RawBackwardRaises.apply, Inputs([rand(3)], {}),
                       [torch.ones(3, dtype=F64)], "contiguous")
    assert res.unavailable and not res.checked
    report = Report(rows=[CheckRow("op", "c", "float64", "cpu", "base", "contract", "skip",
                                   reason="raw_backward_unavailable"),
                          CheckRow("op", "c", "float64", "cpu", "base", "forward", "pass")])
    assert not report.passed and report.unverified


class RefusesExpanded(Function):
    """Refuses stride-0 inputs in forward (it needs to view them): a capability missing."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        if 0 in x.stride():
            raise ValueError("expanded inputs are not supported")
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


def test_refusing_expanded_inputs_warns_when_the_reference_accepts_them() -> None:
    r = gradlab.check(RefusesExpanded, [rand(3, 4)], reference=lambda x: x * 2,
                      variants=["expanded"])
    assert r.passed, table(r.failures)
    # forward_ad's warn (no jvp) is another capability
    warned = [row for row in r.rows if row.status == "warn" and row.check != "forward_ad"]
    assert warned and all(row.hint == "expanded_refused" for row in warned)
    assert "declare variants: {expanded: false}" in message(warned[0])


def test_refusing_expanded_inputs_like_the_reference_is_a_declared_skip() -> None:
    def ref(x: Tensor) -> Tensor:
        if 0 in x.stride():
            raise ValueError("no")
        return x * 2

    r = gradlab.check(RefusesExpanded, [rand(3, 4)], reference=ref, variants=["expanded"])
    assert r.passed, table(r.failures)
    skipped = [row for row in r.rows if row.status == "skip"]
    assert skipped and all(row.declared for row in skipped)


def test_non_finite_tolerances_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        gradlab.check(Exp, [rand(3)], reference=torch.exp,
                      tolerances={"float64": (float("nan"), 1e-3)})

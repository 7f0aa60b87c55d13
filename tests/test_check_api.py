"""API-level behaviour of `gradlab.check`: row columns, check/variant selection, modes, errors,
second-order claims.  Tiny float64 shapes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.render.words import location, message
from gradlab.results import COLUMNS, CheckRow
from gradlab.results.capabilities import NO, WRONG, capability_matrix

F64 = torch.float64
CHECKS = {"forward", "gradient", "contract", "jacobian", "second_order", "forward_ad", "autocast",
          "capabilities", "edges"}


def rand(*shape: int, seed: int = 0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (2 * torch.rand(shape, generator=gen, dtype=F64) - 1).requires_grad_()


def table(rows: list[CheckRow]) -> list[tuple[str, str, str, str, str]]:
    return [(r.variant, r.check, r.status, r.hint, message(r)) for r in rows]


class Square(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class SquareOnce(Function):
    """First order only, and says so."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


def square_ref(x: Tensor) -> Tensor:
    return x**2


class ExpNoChain(Function):
    """BROKEN: backward forgets to multiply by grad_output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y


class MulHalfB(Function):
    """BROKEN: f(a, b) = a * b**2 with the gradient of b off by a factor 1/2 (a's is right)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a * b * b

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return grad * b * b, grad * a * b


class RaisesInBackward(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 3

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        raise ValueError("boom in backward")


def test_check_stays_callable_after_a_run() -> None:
    """`gradlab.check` stays the function once the engine modules are loaded (a submodule named
    `check` would replace the package attribute on its first import)."""
    import gradlab.spec

    assert callable(gradlab.check), type(gradlab.check)
    for _ in range(2):
        r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, checks=["forward"])
        assert r.passed
        assert callable(gradlab.check), type(gradlab.check)
    assert callable(gradlab.spec.as_callable)


def test_rows_carry_the_table_columns() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref)
    assert r.passed, table(r.failures)
    for row in r.rows:
        for column in COLUMNS:
            assert hasattr(row, column), column
        assert row.op == "Square"  # the Function's name by default
        # autocast computes in bfloat16 on the CPU; everything else in the example's dtype
        # edges/float16 runs the case in float16 (its graph)
        dtype = {"autocast": "bfloat16", "float16": "float16"}.get(
            row.check if row.check == "autocast" else row.variant, "float64")
        assert (row.case, row.dtype, row.device) == ("example", dtype, "cpu")
        # Square has no jvp: forward_ad warns (a capability the reference has)
        assert row.status in {"pass", "fail", "error", "skip"} or (
            row.check, row.status) == ("forward_ad", "warn")
        assert isinstance(row.seconds, float) and row.seconds >= 0
    assert {row.check for row in r.rows} == CHECKS
    base = {row.check: row for row in r.rows if row.variant == "base"}
    for check in ("forward", "gradient", "jacobian"):
        err = base[check].max_abs_err
        assert isinstance(err, float) and err < 1e-6, (check, err)
        assert isinstance(base[check].max_rel_err, float)
    frame = r.to_frame()
    assert list(frame.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert len(frame) == len(r.rows)


def test_name_overrides_the_op_column() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, name="square",
                      checks=["forward"])
    assert {row.op for row in r.rows} == {"square"}


def test_variants_false_runs_only_the_base_case() -> None:
    x = rand(3, 4)
    everything = gradlab.check(Square, [x], reference=square_ref)
    assert {row.variant for row in everything.rows} > {"base"}
    r = gradlab.check(Square, [x], reference=square_ref, variants=False)
    assert r.passed, table(r.failures)
    # capability rows are named after the capability, whatever the variants
    assert {row.variant for row in r.rows if row.check != "capabilities"} == {"base"}


def test_variants_subset() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, variants=["grad_output"])
    variants = {row.variant for row in r.rows if row.check != "capabilities"}
    assert variants == {"base", "grad_output:noncontiguous", "grad_output:transposed",
                        "grad_output:expanded"}


def test_checks_selects_the_checks() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, checks=["jacobian"])
    assert r.passed, table(r.failures)
    assert [row.check for row in r.rows] == ["jacobian"]
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, checks=["forward", "contract"])
    assert {row.check for row in r.rows} == {"forward", "contract"}


def test_fast_mode_flags_and_localises_a_missing_chain_rule() -> None:
    r = gradlab.check(ExpNoChain, [rand(3, 4)], reference=torch.exp, checks=["jacobian"],
                      mode="fast")
    assert not r.passed
    (row,) = r.rows
    assert (row.check, row.status) == ("jacobian", "fail"), table(r.rows)
    assert message(row).startswith("fast mode"), message(row)
    assert "input 0" in message(row)
    assert row.hint == "no_chain_rule", table(r.rows)
    assert location(row), "fast mode should localise the wrong elements"
    assert "dx0[" in location(row)
    assert [(f.subject, f.index) for f in row.findings] == [("input", 0)], row.findings
    probes = row.findings[0].probes
    assert probes is not None and probes.n_bad > 0 and probes.located > 0
    assert row.findings[0].stats is not None and row.findings[0].stats.of == "probes"


def test_former_check_names_are_accepted() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref,
                      checks=["gradcheck", "gradgradcheck"])
    assert r.passed, table(r.failures)
    assert [row.check for row in r.rows if row.variant == "base"] == ["jacobian",
                                                                       "second_order"]


def test_fast_mode_passes_a_correct_function() -> None:
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, checks=["jacobian"],
                      mode="fast")
    assert r.passed, table(r.failures)
    assert message(r.rows[0]) == "fast mode"


def test_dense_mode_gives_per_input_details() -> None:
    r = gradlab.check(MulHalfB, [rand(3, 4, seed=1), rand(3, 4, seed=2)],
                      checks=["jacobian"], mode="dense")
    (row,) = r.rows
    assert row.status == "fail" and message(row).startswith("dense mode"), table(r.rows)
    assert row.hint == "constant_factor"
    assert "input 1" in message(row) and "input 0" not in message(row)
    assert [(f.subject, f.index) for f in row.findings] == [("input", 1)], row.findings
    stats = row.findings[0].stats
    assert stats is not None and stats.of == "jacobian entries"
    assert abs(stats.ratio - 0.5) < 1e-4
    assert abs(stats.cosine - 1.0) < 1e-6
    assert 0 < stats.frac_wrong <= 1
    assert location(row)


def test_crash_in_backward_is_an_error_row_and_the_run_goes_on() -> None:
    r = gradlab.check(RaisesInBackward, [rand(3, 4)], reference=lambda x: x * 3)
    assert not r.passed
    errors = [row for row in r.rows if row.status == "error"]
    assert errors, table(r.rows)
    assert any("boom in backward" in message(row) for row in errors), table(errors)
    assert any(location(row).endswith("in backward") and "test_check_api.py" in location(row)
               for row in errors), table(errors)
    # the other checks still ran
    forward = [row for row in r.rows if (row.variant, row.check) == ("base", "forward")]
    assert forward and forward[0].status == "pass", table(r.rows)
    assert {"forward", "gradient", "jacobian"} <= {row.check for row in r.rows}


class SquareKept(Square):
    """First order right; 2x kept from forward as a plain attribute, so double backward runs
    and misses the x-share of the second derivative (zero instead of 2)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.twice = (2 * x).detach()
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad * ctx.twice


def test_second_order_false_but_double_backward_works_and_is_right_passes() -> None:
    # declaring less than the Function has is no bug: it passes, the reason says so
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, second_order=False)
    assert r.passed, table(r.rows)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.reason) == ("pass", "runs_undeclared"), table(r.rows)


class SquareRaisesLater(Square):
    """Double backward runs once, then raises (as qpth's does: an in-place write to what its
    backward saved, seen on the next run through the graph)."""

    calls = 0

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        if torch.is_grad_enabled():
            SquareRaisesLater.calls += 1
            if SquareRaisesLater.calls > 1:
                raise RuntimeError("modified by an inplace operation")
        (x,) = ctx.saved_tensors
        return grad * 2 * x


def test_second_order_false_raising_on_a_later_probe_is_as_declared() -> None:
    SquareRaisesLater.calls = 0
    r = gradlab.check(SquareRaisesLater, [rand(3, 4)], reference=square_ref, second_order=False,
                      variants=False)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.reason) == ("pass", "raises_as_declared"), table(r.rows)


@pytest.mark.parametrize("strict", [False, True])
def test_second_order_false_but_double_backward_silently_wrong_warns(strict: bool) -> None:
    r = gradlab.check(SquareKept, [rand(3, 4)], reference=square_ref, second_order=False,
                      strict=strict)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    # a warn; --strict makes it a failure
    assert (row.status, row.hint) == ("fail" if strict else "warn", "second_order_claimed"), \
        table(r.rows)
    assert "once_differentiable" in message(row)
    assert r.passed is not strict
    (line,) = capability_matrix(r.rows)
    assert line.cell("second_order").state == WRONG  # measured and wrong, not "raises"
    # undeclared (the default), the same Function fails second order outright
    r = gradlab.check(SquareKept, [rand(3, 4)], reference=square_ref)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert row.status == "fail" and not r.passed, table(r.rows)


def test_second_order_false_once_differentiable_passes() -> None:
    r = gradlab.check(SquareOnce, [rand(3, 4)], reference=square_ref, second_order=False)
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert row.status == "pass"


def test_second_order_true_on_a_once_differentiable_function_says_so() -> None:
    # declared second order, backward once_differentiable: the fix is the declaration (or a
    # differentiable backward), never "add @once_differentiable", which it already has
    r = gradlab.check(SquareOnce, [rand(3, 4)], reference=square_ref, second_order=True,
                      variants=False)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.hint) == ("fail", "once_differentiable"), table(r.rows)
    assert "second_order: false" in message(row)
    assert "decorate backward" not in message(row)
    # its twin with a differentiable backward passes, and a wrong double backward is still
    # second_order_only (its fix is once_differentiable)
    assert gradlab.check(Square, [rand(3, 4)], reference=square_ref, second_order=True).passed
    r = gradlab.check(SquareKept, [rand(3, 4)], reference=square_ref, second_order=True,
                      variants=False)
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.hint) == ("fail", "second_order_only"), table(r.rows)


@pytest.mark.parametrize("strict", [False, True])
def test_second_order_unknown_once_differentiable_is_information_where_the_reference_can(
        strict: bool) -> None:
    # the reference can be differentiated twice, the Function raises as once_differentiable
    # makes it: a capability it lacks, shown in the matrix (2nd: no), no warn row, not even
    # under --strict (gradlab.checks.diagnosis.policy: raising is the declared, safe way to lack it)
    r = gradlab.check(SquareOnce, [rand(3, 4)], reference=square_ref, strict=strict)
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]
    assert not [x for x in r.rows if x.status == "warn"]
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.reason) == ("pass", "second_order_missing")
    (line,) = capability_matrix(r.rows)
    assert line.cell("second_order").state == NO


def test_a_required_missing_second_order_fails() -> None:
    r = gradlab.check(SquareOnce, [rand(3, 4)], reference=square_ref, requires=["second_order"])
    assert not r.passed
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.hint) == ("fail", "second_order_missing")
    assert "declare second_order: false" in message(row)


def test_second_order_unknown_without_a_reference_is_a_declared_skip() -> None:
    r = gradlab.check(SquareOnce, [rand(3, 4)])
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]
    (row,) = [row for row in r.rows if row.check == "second_order"]
    assert (row.status, row.declared, row.reason) == ("skip", True, "second_order_unsupported")


def test_a_twice_differentiable_function_has_no_warning() -> None:
    # every check but forward_ad: Square has no jvp (a warn, failing under strict)
    r = gradlab.check(Square, [rand(3, 4)], reference=square_ref, strict=True,
                      checks=[c for c in CHECKS if c != "forward_ad"])
    assert r.passed and not [x for x in r.rows if x.status == "warn"]


class ScaleUnreduced(Function):
    """y = x * l with l of shape [1, 1]; backward returns l's gradient at the output's shape
    [5, 4], unreduced: autograd's engine sums it to [1, 1] itself (gpytorch's covariance
    Functions do this), so the gradient is right."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, lengthscale: Tensor) -> Tensor:
        ctx.save_for_backward(x, lengthscale)
        return x * lengthscale

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, lengthscale = ctx.saved_tensors
        return g * lengthscale, g * x


class ScaleTransposedGrad(ScaleUnreduced):
    """The same, with x's gradient transposed: [4, 5] for a [5, 4] input, which no sum fixes."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, lengthscale = ctx.saved_tensors
        return (g * lengthscale).mT, g * x


def test_a_gradient_the_engine_sums_to_the_input_shape_is_not_a_wrong_shape() -> None:
    args = [rand(5, 4), rand(1, 1)]
    r = gradlab.check(ScaleUnreduced, args, reference=lambda x, s: x * s)
    assert r.passed, table(r.rows)
    assert not [x for x in r.rows if x.hint == "wrong_shape"], table(r.rows)
    bad = gradlab.check(ScaleTransposedGrad, [rand(5, 4), rand(1, 1)],
                        reference=lambda x, s: x * s)
    assert not bad.passed
    assert any(x.hint == "wrong_shape" for x in bad.rows if x.status in ("fail", "error")), \
        table(bad.rows)


class DistinctRowsOnly(Function):
    """2x, for a matrix whose rows must be distinct (as a Cholesky solve needs a definite
    matrix): the expanded variant repeats a row, which this refuses in any layout."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        if len({tuple(r.tolist()) for r in x.detach()}) < x.shape[0]:
            raise ValueError("rows must be distinct")
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * 2


def test_an_expanded_input_refused_for_its_values_is_not_a_layout_finding() -> None:
    r = gradlab.check(DistinctRowsOnly, [rand(3, 4)], reference=lambda x: x * 2)
    assert r.passed, table(r.rows)
    # the expanded and ties variants repeat a row: refused in any layout, a warn
    refused = {x.variant for x in r.rows if x.reason == "values_refused"}
    assert any(v.startswith("expanded") for v in refused), table(r.rows)
    assert any(v.startswith("ties") for v in refused), table(r.rows)
    assert all(x.status == "warn" for x in r.rows if x.reason == "values_refused")
    assert not [x for x in r.rows if x.hint == "expanded_refused"], table(r.rows)
    assert not gradlab.check(DistinctRowsOnly, [rand(3, 4)], reference=lambda x: x * 2,
                             strict=True).passed


def test_arguments_neither_the_function_nor_the_reference_accepts_are_the_callers() -> None:
    # both raise alike on the case's own inputs: one error row saying the arguments are wrong
    # (the run stops there), not the Function's crash on every check
    r = gradlab.check(Square, [rand(3, 4)], reference=lambda x: x @ x, variants=False)
    # the reference alone raising is its failure on this case, as before
    assert {x.reason for x in r.rows if x.status == "error"} == {"reference_failed"}, \
        table(r.rows)
    r = gradlab.check(torch.mm, [rand(2, 3), rand(4, 5)], reference=torch.mm)
    assert [(x.check, x.status, x.reason) for x in r.rows] == [
        ("forward", "error", "spec_inputs")], table(r.rows)
    # a float64 constant of the case's, which neither multiplies with float32 values: the
    # reference's float64 run works, its float32 one raises as the Function does (cal9)
    w = rand(3, 2).detach()

    def times_w(x: torch.Tensor) -> torch.Tensor:
        return x @ w

    r = gradlab.check(times_w, [rand(4, 3)], reference=times_w, dtypes=["float32"],
                      checks=["forward", "gradient"])
    assert [(x.check, x.status, x.reason) for x in r.rows] == [
        ("forward", "error", "spec_inputs")], table(r.rows)
    assert "arguments are wrong" in message(r.rows[0]) and not r.passed

"""Issue 28: the ecosystem's tolerances, low precision judged against the reference's own error
(gradlab.tolerances, gradlab.checks.numeric.lowprec), finite differences at the step a
float32-accurate forward permits (gradlab.checks.numeric.fdstep), one warn for a precision
observation.  Each behaviour has a broken Function that must be flagged beside a correct twin that
must pass."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.cases import Inputs
from gradlab.checks.numeric import fdstep
from gradlab.model import DEFAULT_TOLERANCES
from gradlab.render.words import message
from gradlab.results import CheckRow, Report
from gradlab.tolerances import readme_table

ROOT = Path(__file__).resolve().parents[1]


def bad(r: Report, dtype: str | None = None) -> list[tuple[str, str, str, str]]:
    return [(x.dtype, x.variant, x.check, message(x)[:300]) for x in r.rows
            if x.status in ("fail", "error") and (dtype is None or x.dtype == dtype)]


def base_row(r: Report, check: str, dtype: str) -> CheckRow:
    return next(x for x in r.rows if x.variant == "base" and x.check == check
                and x.dtype == dtype)


# --- the table -----------------------------------------------------------------------------

def test_the_default_table_is_torch_testing_assert_closes() -> None:
    from torch.testing._comparison import _DTYPE_PRECISIONS  # the one place torch keeps them

    for name, tol in DEFAULT_TOLERANCES.items():
        rtol, atol = _DTYPE_PRECISIONS[getattr(torch, name)]
        assert (tol.atol, tol.rtol) == (atol, rtol), name


def test_the_readme_table_is_the_modules() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- tolerances:begin -->\n(.*?)\n<!-- tolerances:end -->", text, re.S)
    assert found, "README.md: no <!-- tolerances:begin --> ... <!-- tolerances:end --> block"
    assert found.group(1).strip() == readme_table().strip()


# --- a logsumexp computed in float32 inside a float64 Function ---------------------------------

def make_lse(factor: float = 1.0) -> type[torch.autograd.Function]:
    class LogSumExp32(torch.autograd.Function):
        """A fused kernel's choice: compute in float32, return the input's dtype."""

        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def, override]
            x32 = x.float()
            y = torch.logsumexp(x32, dim=-1)
            ctx.save_for_backward(x32, y)
            return y.to(x.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):  # type: ignore[no-untyped-def, override]
            x32, y = ctx.saved_tensors
            gx = g.float().unsqueeze(-1) * torch.exp(x32 - y.unsqueeze(-1))
            return (factor * gx).to(g.dtype)

    return LogSumExp32


def lse_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x, dim=-1)


def lse_example() -> list[torch.Tensor]:
    return [torch.randn(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))]


def test_a_float32_inside_logsumexp_passes_in_float64() -> None:
    r = gradlab.check(make_lse(), lse_example(), reference=lse_reference)
    assert not bad(r), bad(r)
    warns = [x for x in r.rows if x.status == "warn" and x.hint == "precision_loss"]
    assert len(warns) <= 1, warns
    jacobian = next(x for x in r.rows if x.check == "jacobian")
    assert jacobian.status == "pass" and "finite-difference step" in jacobian.note, jacobian


def test_the_users_tolerances_leave_its_jacobian_green() -> None:
    r = gradlab.check(make_lse(), lse_example(), reference=lse_reference,
                      tolerances={"float64": (1e-6, 1e-5), "finite_differences": (1e-3, 1e-2)})
    assert not bad(r), bad(r)


def test_a_wrong_backward_of_a_float32_inside_forward_still_fails_its_jacobian() -> None:
    r = gradlab.check(make_lse(1.5), lse_example(), reference=lse_reference)
    jacobian = next(x for x in r.rows if x.check == "jacobian")
    assert jacobian.status == "fail", jacobian
    assert base_row(r, "gradient", "float64").hint == "constant_factor", bad(r)


def test_strict_tolerances_keep_the_former_float64_table() -> None:
    r = gradlab.check(make_lse(), lse_example(), reference=lse_reference,
                      strict_tolerances=True, checks=["forward", "gradient"], variants=False)
    assert base_row(r, "gradient", "float64").status == "fail", bad(r)


def test_a_step_dependent_error_is_the_steps_own() -> None:
    assert fdstep.step_dependent(1e-2, 4e-2) and fdstep.step_dependent(1e-2, 5e-3)
    assert not fdstep.step_dependent(0.5, 0.51)  # a wrong derivative: the same at every step
    assert fdstep.output_format([torch.randn(10, dtype=torch.float64)]) == 2.0 ** -52
    cast = torch.randn(10).double()
    assert fdstep.output_format([cast]) == 2.0 ** -23
    assert fdstep.output_format([torch.arange(10.0, dtype=torch.float64)]) == 2.0 ** -52
    # float32-exact inputs copied in float64 (a sort) are no float32 forward: they move with
    # a nudge of the inputs, a float32 forward rounds it away
    x = Inputs([torch.randn(3, 10).double().requires_grad_()])
    sort = lambda t: torch.sort(t).values  # noqa: E731
    assert fdstep.forward_noise(sort, x, [sort(x.args[0])]) == 2.0 ** -52
    lse = make_lse().apply
    assert fdstep.forward_noise(lse, x, [lse(x.args[0])]) == 2.0 ** -23


# --- a row softmax with fp32 accumulation, checked in bfloat16 -------------------------------

def make_softmax(factor: float) -> type[torch.autograd.Function]:
    class RowSoftmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def, override]
            y = torch.softmax(x.float(), dim=-1)
            ctx.save_for_backward(y)
            return y.to(x.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):  # type: ignore[no-untyped-def, override]
            (y,) = ctx.saved_tensors
            g32 = g.float()
            return (factor * y * (g32 - (g32 * y).sum(-1, keepdim=True))).to(g.dtype)

    return RowSoftmax


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def softmax_example() -> list[torch.Tensor]:
    return [torch.randn(16, 1024, generator=torch.Generator().manual_seed(0))]


def test_a_bfloat16_backward_wrong_by_1_5x_fails_its_base_gradient_row() -> None:
    r = gradlab.check(make_softmax(1.5), softmax_example(), reference=softmax_reference,
                      dtypes=["bfloat16"], checks=["forward", "gradient"])
    row = base_row(r, "gradient", "bfloat16")
    assert row.status == "fail" and row.hint == "constant_factor", bad(r)
    assert "the reference's own in bfloat16" in message(row)


def test_its_correct_twin_passes_every_variant_in_bfloat16() -> None:
    r = gradlab.check(make_softmax(1.0), softmax_example(), reference=softmax_reference,
                      dtypes=["bfloat16"])
    assert not bad(r, "bfloat16"), bad(r, "bfloat16")
    assert len({x.variant for x in r.rows if x.dtype == "bfloat16"}) > 5
    # the float64 finite-difference checks do not fail the correct fp32-accumulating kernel
    assert not [x for x in bad(r) if x[2] == "jacobian"], bad(r)


# --- torch's scaled_dot_product_attention against softmax(QK^T / sqrt(d)) V -----------------

def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def sdpa_wrong_scale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, scale=1.02 / math.sqrt(q.shape[-1]))


def qkv() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 8, 16, generator=gen) for _ in range(3)]


ATTENTION_CHECKS = ["forward", "gradient", "autocast"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_scaled_dot_product_attention_passes(dtype: str) -> None:
    r = gradlab.check(sdpa, qkv(), reference=attention, dtypes=[dtype],
                      checks=ATTENTION_CHECKS)
    assert not bad(r), bad(r)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_a_2_percent_wrong_scale_fails_forward_and_gradient(dtype: str) -> None:
    r = gradlab.check(sdpa_wrong_scale, qkv(), reference=attention, dtypes=[dtype],
                      checks=["forward", "gradient"], variants=False)
    for check in ("forward", "gradient"):
        row = base_row(r, check, dtype)
        assert row.status == "fail", (check, bad(r))
        words = message(row)
        assert f"the reference's own in {dtype}" in words and "allowed 2x" in words, words


def test_the_factor_k_is_the_users() -> None:
    r = gradlab.check(sdpa_wrong_scale, qkv(), reference=attention, dtypes=["bfloat16"],
                      checks=["forward"], variants=False, precision_factor=1000)
    assert base_row(r, "forward", "bfloat16").status == "pass", bad(r)
    with pytest.raises(ValueError, match="precision_factor"):
        gradlab.check(sdpa, qkv(), reference=attention, precision_factor=0.5)


def test_without_a_reference_in_float64_the_table_applies() -> None:
    """A reference that refuses float64 cannot give a gold: the rows take the table."""
    def float32_only(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if q.dtype == torch.float64:
            raise TypeError("float32 only")
        return attention(q, k, v)

    r = gradlab.check(sdpa_wrong_scale, qkv(), reference=float32_only, dtypes=["float32"],
                      checks=["forward"], variants=False)
    row = base_row(r, "forward", "float32")
    assert row.status == "fail" and "reference's own" not in message(row), bad(r)
    assert "no float64 run of the reference" in row.note
    good = gradlab.check(sdpa, qkv(), reference=float32_only, dtypes=["float32"],
                         checks=["forward", "gradient"], variants=False)
    assert good.passed and "no float64 run" in base_row(good, "forward", "float32").note


# --- the API's numerical dtype ------------------------------------------------------------

def test_the_api_takes_a_numerical_dtype() -> None:
    r = gradlab.check(make_lse(), [x.float() for x in lse_example()], reference=lse_reference,
                      numerical_dtype="float32", checks=["jacobian"])
    jac = next(x for x in r.rows if x.check == "jacobian")
    assert jac.dtype == "float32"


def test_assert_gradients_in_float32_passes_the_correct_fp32_accumulating_kernel() -> None:
    """Its float64 jacobian differences a forward that rounds through float32: at the step that
    noise permits it passes, where gradcheck's 1e-6 reported precision_loss (issue 28)."""
    from gradlab.testing import assert_gradients

    x = [torch.randn(4, 64, generator=torch.Generator().manual_seed(1))]
    assert_gradients(make_softmax(1.0), x, reference=softmax_reference, dtypes=["float32"])
    with pytest.raises(AssertionError, match="constant_factor"):
        assert_gradients(make_softmax(1.5), x, reference=softmax_reference, dtypes=["float32"])


def test_second_order_never_advises_marking_an_input_constant() -> None:
    """A float32-accurate Function's second_order row with a missing gradient (its backward is
    not differentiable) is no constant the spec should not differentiate: the likely-cause words
    every output prints for it carry no requires_grad: false advice."""
    from gradlab.render.diagnosis import hint_words
    from gradlab.results import Finding

    f = Finding("input", 0, "missing", shape=(4, 64))
    row = CheckRow("op", "c", "float64", "cpu", "base", "second_order", "fail", hint="missing",
                   findings=[f])
    assert "requires_grad: false" not in hint_words(row)
    assert "requires_grad: false" not in message(row)


def make_bf16_exp(factor: float) -> type[torch.autograd.Function]:
    class Bf16Exp(torch.autograd.Function):
        """exp computed in bfloat16 inside a float64 Function (noise 2**-8 relative)."""

        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def, override]
            ctx.save_for_backward(x)
            return torch.exp(x.bfloat16()).to(x.dtype)

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def, override]
            (x,) = ctx.saved_tensors
            return factor * g * torch.exp(x)

    return Bf16Exp


def test_a_bfloat16_forward_is_differenced_at_its_own_step() -> None:
    """gradcheck's step would difference bfloat16 rounding (errors of ~1e4); at the step its
    noise permits the exact backward is not red, and a 1.5x one still is (the same error at
    twice the step: the derivative's, not the step's)."""
    x = [torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))]
    r = gradlab.check(make_bf16_exp(1.0), x, reference=torch.exp, checks=["jacobian"],
                      mode="dense")
    (row,) = [x for x in r.rows if x.check == "jacobian"]
    assert row.status in ("pass", "skip") and "finite-difference step" in row.note, row
    assert row.status == "pass" or (row.declared and row.reason == "fd_unresolved")
    r = gradlab.check(make_bf16_exp(1.5), x, reference=torch.exp, checks=["jacobian"],
                      mode="dense")
    (row,) = [x for x in r.rows if x.check == "jacobian"]
    assert row.status == "fail", row


# A smoother's solve (I + lam D^T D) z = y: SPD, condition number ~1e4 at these sizes, solved
# in float32 by Cholesky in the Function and by LU in the reference.  Both are right; their
# errors differ by the algorithms' constants, a few times over, since rounding is amplified
# (the reference tens of ulps off: tolerances.AMPLIFIED_ULPS).
SMOOTH_T, SMOOTH_LAMBDA = 40, 1e3


def smoothing_matrix(dtype: torch.dtype) -> torch.Tensor:
    d = torch.diff(torch.eye(SMOOTH_T, dtype=torch.float64), n=3, dim=0)
    return (torch.eye(SMOOTH_T, dtype=torch.float64) + SMOOTH_LAMBDA * d.T @ d).to(dtype)


class CholeskySmooth(torch.autograd.Function):
    """z = A^-1 y by Cholesky (A symmetric: the backward is the same solve)."""

    scale = 1.0

    @classmethod
    def forward(cls, ctx: Any, y: torch.Tensor) -> torch.Tensor:
        chol = torch.linalg.cholesky(smoothing_matrix(y.dtype))
        ctx.save_for_backward(chol)
        return torch.cholesky_solve(y.T, chol).T

    @classmethod
    def backward(cls, ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (chol,) = ctx.saved_tensors
        return cls.scale * torch.cholesky_solve(g.T, chol).T


class CholeskySmoothOff(CholeskySmooth):
    scale = 1.01  # BROKEN: a 1% wrong gradient


def lu_smooth(y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.solve(smoothing_matrix(y.dtype), y.T).T


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_ill_conditioned_solve_by_another_algorithm_passes_in_float32(seed: int) -> None:
    y = torch.randn(4, SMOOTH_T, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64).requires_grad_()
    r = gradlab.check(CholeskySmooth.apply, [y], reference=lu_smooth, dtypes=["float32"],
                      checks=["forward", "gradient"], variants=False)
    assert not bad(r), bad(r)
    off = gradlab.check(CholeskySmoothOff.apply, [y], reference=lu_smooth, dtypes=["float32"],
                        checks=["gradient"], variants=False)
    row = base_row(off, "gradient", "float32")
    assert row.status == "fail" and "allowed 8x" in message(row), message(row)

"""The default `edges` check: each kind of edge input with a Function broken only there, which
gradlab must flag, beside its correct twin, which must pass (gradlab.checks.families.edges)."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from bug_catalogue.empty import AddColumn, AddColumnFixed
from bug_catalogue.shapes import BatchStepLinear, BatchStepLinearFixed
from bug_catalogue.values import (
    Elu,
    RsqrtBackward,
    RsqrtFixed,
    SincNorm,
    SincNormFixed,
    safe_inverse,
    safe_inverse_fixed,
)
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable
from typer.testing import CliRunner

import gradlab
from gradlab.checks.families.edges import edge_points
from gradlab.checks.families.inputspace import base_point
from gradlab.checks.families.pointjudge import judge
from gradlab.cli import app
from gradlab.model import Case
from gradlab.render.words import message
from gradlab.tolerances import table

F64 = torch.float64
PASSED = ("pass", "")


def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (low + (high - low) * torch.rand(shape, generator=gen, dtype=F64)).requires_grad_()


def explored(fn: Any, args: list[Any], ref: Any) -> tuple[str, str]:
    """(status, hint) of the explore row (the judge it shares with the edges)."""
    report = gradlab.check(fn, args, reference=ref, checks=["explore"], explore=2.0)
    (row,) = [r for r in report.rows if r.check == "explore"]
    return row.status, row.hint


def edges(fn: Any, args: list[Any], ref: Any) -> dict[str, tuple[str, str]]:
    """variant -> (status, hint) of the edges rows of one check."""
    report = gradlab.check(fn, args, reference=ref, checks=["edges"])
    return {r.variant: (r.status, r.hint) for r in report.rows if r.check == "edges"}


class RowMean(Function):
    """x.sum(0); BROKEN: backward sizes a launch by the row count (1 // rows), a
    ZeroDivisionError for zero rows."""

    guard = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.rows = x.shape[0]
        ctx.shape = x.shape
        return x.sum(0)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        if not (cls.guard and ctx.rows == 0):
            _ = 1 // ctx.rows  # a launch sized by the row count
        return g.expand(ctx.shape).clone()


class RowMeanFixed(RowMean):
    guard = True


def test_a_backward_crashing_only_on_an_empty_batch_fails() -> None:
    # forward accepted the empty batch and the reference differentiates it: certain
    got = edges(RowMean, [rand(4, 3)], lambda x: x.sum(0))
    assert got["empty"] == ("fail", "edge_empty")
    assert {s for k, (s, _) in got.items() if k != "empty"} == {"pass"}
    assert edges(RowMeanFixed, [rand(4, 3)], lambda x: x.sum(0))["empty"] == ("pass", "")


class LastSum(Function):
    """x.sum(-1); BROKEN: backward sizes a launch by the last dim (1 // cols): a crash where
    x has no columns, which is no empty batch (a shape the case lacks: uncertain)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return x.sum(-1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        _ = 1 // ctx.shape[-1]
        return g[..., None].expand(ctx.shape).clone()


def test_a_backward_crashing_only_without_columns_or_on_an_empty_vector_warns() -> None:
    got = edges(LastSum, [rand(4, 3)], lambda x: x.sum(-1))
    assert got["empty"] == ("warn", "edge_reshaped")
    # a 1-d input's only dim may be features or parameters as well as a batch
    assert edges(RowMean, [rand(4)], lambda x: x.sum(0))["empty"] == ("warn", "edge_reshaped")


def test_a_gradient_of_the_wrong_shape_on_an_empty_input_fails() -> None:
    def ref(a: Tensor, b: Tensor) -> Tensor:
        return a + b[:, None]

    got = edges(AddColumn, [rand(4, 3), rand(4, seed=1)], ref)
    assert got["empty"] == ("fail", "edge_wrong")
    assert edges(AddColumnFixed, [rand(4, 3), rand(4, seed=1)], ref)["empty"] == ("pass", "")


class Pool(Function):
    """2x2 average pooling; BROKEN: backward swaps the output's rows and columns."""

    swapped = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return torch.nn.functional.avg_pool2d(x, 2)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        oh, ow = g.shape[-2:]
        rows, cols = (ow, oh) if cls.swapped else (oh, ow)
        out = torch.zeros(ctx.shape, dtype=g.dtype)
        block = g[..., :rows, :cols].repeat_interleave(2, -2).repeat_interleave(2, -1) / 4
        out[..., :2 * rows, :2 * cols] = block
        return out


class PoolFixed(Pool):
    swapped = False


def test_a_square_only_backward_fails_on_the_non_square_edge() -> None:
    ref = lambda x: torch.nn.functional.avg_pool2d(x, 2)  # noqa: E731
    assert edges(Pool, [rand(1, 2, 4, 4)], ref)["non_square"] == ("fail", "edge_wrong")
    assert edges(PoolFixed, [rand(1, 2, 4, 4)], ref)["non_square"] == ("pass", "")


def test_a_nan_at_an_all_zero_input_fails_and_a_kink_there_does_not() -> None:
    # sin(|w|)/|w| per row, the bug catalogue's kornia3275 (its formula is 0/0 at w = 0)
    got = edges(SincNorm, [rand(4, 3)], SincNorm.value)
    assert got["zero[0]"] == ("fail", "edge_wrong")
    assert edges(SincNormFixed, [rand(4, 3)], SincNorm.value)["zero[0]"] == ("pass", "")
    # relu at 0: its derivative is a convention there (0 or 1), never judged
    # (no row when no point of the kind could be judged)
    assert edges(torch.relu, [rand(4, 3)], torch.relu).get("zero[0]", PASSED) == PASSED
    assert edges(lambda x: (x.abs() + x) / 2, [rand(4, 3)], torch.relu).get(
        "zero[0]", PASSED) == PASSED


class PaddedRows(Function):
    """2 x, whose all-zero rows are padding: backward gives them no gradient (a convention no
    reference states: helper-18's tad-mctc eighb takes an all-zero matrix as padding);
    BROKEN when `nan_at_zero`: backward computes 2 x / x * g, NaN at 0."""

    nan_at_zero = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return 2 * x

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        if cls.nan_at_zero:
            return 2 * x / x * g
        return torch.where((x != 0).any(1, keepdim=True), 2 * g, 0.0)


class PaddedRowsNaN(PaddedRows):
    nan_at_zero = True


def test_a_finite_convention_at_an_all_zero_input_warns_and_a_nan_fails() -> None:
    # helper-18's tad-mctc eighb: an all-zero matrix is padding by design
    got = edges(PaddedRows, [rand(4, 3)], lambda x: 2 * x)
    assert got["zero[0]"] == ("warn", "edge_domain"), got
    assert edges(PaddedRowsNaN, [rand(4, 3)], lambda x: 2 * x)["zero[0]"] == (
        "fail", "edge_wrong")


class CumProdRows(Function):
    """cumprod over the last dim, backward from the reverse cumulative sum of g * y over x:
    NaN where x is 0 (pytensor 1911) when `divides`, else the zero's gradient dropped
    (tensorflow 119430's div_no_nan) when `drops`; the twin sums the products of the others."""

    divides = drops = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        y = x.cumprod(-1)
        ctx.save_for_backward(x, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        x, y = ctx.saved_tensors
        if cls.divides or cls.drops:
            s = (g * y).flip(-1).cumsum(-1).flip(-1)
            return s / x if cls.divides else torch.where(x == 0, 0.0, s / x)
        n = x.shape[-1]
        out = torch.zeros_like(x)
        for i in range(n):
            others = torch.cat([x[..., :i], torch.ones_like(x[..., i:i + 1]), x[..., i + 1:]], -1)
            out[..., i] = (g[..., i:] * others.cumprod(-1)[..., i:]).sum(-1)
        return out


class CumProdDivides(CumProdRows):
    divides = True


class CumProdDrops(CumProdRows):
    drops = True


def test_a_nan_at_a_zero_beyond_the_case_s_values_fails_a_finite_error_there_warns() -> None:
    # positive case values: 0 lies beyond them, yet cumprod takes it and the reference is
    # finite there; NaN is certain, a finite wrong value only likely (a domain x > 0)
    x = rand(3, 4, low=0.5, high=1.5)
    ref = lambda t: t.cumprod(-1)  # noqa: E731
    assert edges(CumProdDivides, [x], ref)["zero[0]"] == ("fail", "edge_wrong")
    assert edges(CumProdDrops, [x], ref)["zero[0]"] == ("warn", "edge_domain")
    assert all(v == PASSED for v in edges(CumProdRows, [x], ref).values())


class MeanOver(Function):
    """x.mean(dims); backward divides g by the product of the reduced dims' sizes, BROKEN for
    dims () (every dim to torch.mean, a product of no sizes: 1) unless `counts_all`."""

    counts_all = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, dims: tuple[int, ...]) -> Tensor:
        ctx.shape, ctx.dims = x.shape, tuple(d % x.dim() for d in dims)
        return x.mean(dims)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        dims = ctx.dims or (tuple(range(len(ctx.shape))) if cls.counts_all else ())
        n = 1
        for d in dims:
            n *= ctx.shape[d]
        for d in sorted(dims or range(len(ctx.shape))):
            g = g.unsqueeze(d)
        return g.expand(ctx.shape) / n, None


class MeanOverAll(MeanOver):
    counts_all = True


class Pow(Function):
    """a ** b; d/db = a ** b * log(a), NaN at a base of 0 (0 * -inf) unless `masked`, where the
    limit is 0 (pytorch 27134); d/da = b a ** (b - 1), infinite there for b < 1."""

    masked = False

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        y = a ** b
        ctx.save_for_backward(a, b, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b, y = ctx.saved_tensors
        db = y * a.log()
        if cls.masked:
            db = torch.where(a == 0, 0.0, db)
        return g * b * a ** (b - 1), g * db


class PowMasked(Pow):
    masked = True


def test_a_nan_gradient_beside_another_s_pole_fails() -> None:
    # at a base all 0 the reference's d/da is infinite where b < 1 (a pole: judged by its
    # sign), while its d/db is finite (0): a NaN there is judged, and wrong
    a, b = rand(3, 4, low=0.5, high=1.5), rand(3, 4, seed=1, low=0.5, high=2.0)
    assert edges(Pow, [a, b], torch.pow)["zero[0]"] == ("fail", "edge_wrong")
    assert edges(PowMasked, [a, b], torch.pow).get("zero[0]", PASSED) == PASSED


class ChunkSum(Function):
    """The last dim cut into k chunks, summed: backward repeats g k times; BROKEN: a single
    chunk takes a fast path that sums g over the row (unless `one_ok`)."""

    one_ok = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, k: int) -> Tensor:
        ctx.k, ctx.shape = k, x.shape
        return x.reshape(*x.shape[:-1], k, x.shape[-1] // k).sum(-2)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        if ctx.k == 1 and not cls.one_ok:
            return g.sum(-1, keepdim=True).expand(ctx.shape).clone(), None
        return g.repeat(*([1] * (g.dim() - 1)), ctx.k), None


class ChunkSumFixed(ChunkSum):
    one_ok = True


def chunk_sum(x: Tensor, k: int) -> Tensor:
    return x.reshape(*x.shape[:-1], k, x.shape[-1] // k).sum(-2)


def test_an_int_argument_at_one_is_an_edge() -> None:
    x = rand(3, 4)
    assert edges(ChunkSum, [x, 2], chunk_sum)["int_one[1]"] == ("fail", "edge_wrong")
    assert edges(ChunkSumFixed, [x, 2], chunk_sum).get("int_one[1]") == PASSED


def test_an_int_tuple_argument_empty_is_an_edge() -> None:
    x = rand(3, 4)
    assert edges(MeanOver, [x, (1,)], torch.mean)["tuple_empty[1]"] == ("fail", "edge_wrong")
    assert all(v == PASSED for v in edges(MeanOverAll, [x, (1,)], torch.mean).values())


def test_a_nan_gradient_where_the_reference_is_finite_but_steep_fails() -> None:
    # torch.where(|z| > eps, 1 / z, 1): the untaken branch's gradient is NaN at z = 0 (the
    # bug catalogue's kornia367); the reference there is steep (1/z² under a nudge), which
    # excuses a finite difference, not a NaN
    z = rand(5)
    assert explored(safe_inverse, [z], safe_inverse_fixed) == ("fail", "explored_wrong")
    assert edges(safe_inverse, [z], safe_inverse_fixed)["zero[0]"] == ("fail", "edge_wrong")
    assert explored(safe_inverse_fixed, [z], safe_inverse_fixed) == PASSED
    assert edges(safe_inverse_fixed, [z], safe_inverse_fixed).get("zero[0]", PASSED) == PASSED


def test_a_nan_where_the_reference_is_singular_at_every_scale_is_not_judged() -> None:
    # the polar factor of the zero matrix is not unique: the correct Function's (H - H^T) /
    # (s_i + s_j) is 0/0 there and the reference's SVD gives a finite convention; any nudge
    # moves the reference's polar factor by O(1), so neither is right or wrong
    from test_domain import NearestRotation, matrix_args, rotation_reference

    got = edges(NearestRotation.apply, matrix_args(), rotation_reference)
    assert got["one"] == PASSED, got
    # the search judges no value there either (what it may warn of is a raise at an empty
    # batch of matrices, a shape the case lacks)
    assert explored(NearestRotation.apply, matrix_args(), rotation_reference) in (
        PASSED, ("warn", "explored_reshaped"))


class Softsign(Function):
    """x / (1 + |x|), or with `squared` x / (1 + x²); BROKEN: backward always uses the first
    formula's derivative (a flag forward honours and backward ignores: the bug catalogue's
    triton5660, an attention backward that masks whether causal or not)."""

    honours = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, squared: bool) -> Tensor:
        ctx.save_for_backward(x)
        ctx.squared = squared
        return x / (1 + x * x) if squared else x / (1 + x.abs())

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        if cls.honours and ctx.squared:
            return g * (1 - x * x) / (1 + x * x) ** 2, None
        return g / (1 + x.abs()) ** 2, None


class SoftsignFixed(Softsign):
    honours = True


def softsign(x: Tensor, squared: bool) -> Tensor:
    return x / (1 + x * x) if squared else x / (1 + x.abs())


def noisy(x: Tensor, training: bool) -> Tensor:
    """Correct: dropout when training (the case checks it off); its draws are its own."""
    return torch.nn.functional.dropout(x, 0.5, training) * 2


def noisy_reference(x: Tensor, training: bool) -> Tensor:
    """The same in distribution, drawn another way: the values differ draw by draw."""
    keep = (torch.rand(x.shape, dtype=x.dtype) >= 0.5) if training else torch.ones_like(x)
    return x * keep * 4 if training else x * 2


def test_a_flag_backward_ignores_fails_at_its_other_setting() -> None:
    x = rand(3, 4)
    assert edges(Softsign.apply, [x, False], softsign)["flag[1]"] == ("fail", "edge_wrong")
    assert edges(SoftsignFixed.apply, [x, False], softsign)["flag[1]"] == PASSED
    # a setting that turns random draws on compares nothing (the Function's and the
    # reference's draws differ): not judged, no row
    assert "flag[1]" not in edges(noisy, [x, False], noisy_reference)


class Leaky(Function):
    """leaky relu with slope 0.1; BROKEN: backward uses 0.01 for negative inputs."""

    slope = 0.01

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.where(x > 0, torch.ones_like(x), torch.full_like(x, cls.slope))


class LeakyFixed(Leaky):
    slope = 0.1


def test_a_sign_only_bug_beyond_the_cases_values_warns() -> None:
    # the case's values are all positive: the only evidence of the domain, so a failure at
    # negative values is likely, not certain
    ref = lambda x: torch.nn.functional.leaky_relu(x, 0.1)  # noqa: E731
    positive = [rand(3, 4, low=0.5, high=1.0)]
    assert explored(Leaky, positive, ref) == ("warn", "explored_domain")
    assert explored(LeakyFixed, positive, ref) == ("pass", "")


class AllNegative(Function):
    """x * 2; BROKEN: a fast path for an all-negative input returns a zero gradient."""

    fast_path = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.negative = bool((x < 0).all())
        return x * 2

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        return torch.zeros_like(g) if cls.fast_path and ctx.negative else g * 2


class AllNegativeFixed(AllNegative):
    fast_path = False


def test_a_bug_only_when_every_value_has_one_sign_fails_within_the_cases_range() -> None:
    ref = lambda x: x * 2  # noqa: E731
    both = [rand(3, 4)]  # within [-1, 1): one sign stays in the case's range
    assert explored(AllNegative, both, ref) == ("fail", "explored_wrong")
    assert explored(AllNegativeFixed, both, ref) == ("pass", "")


class Scale(Function):
    """x * n for an int n; BROKEN: backward uses max(n, 1) (a count's guard in the wrong
    place): wrong only at n = 0."""

    guard_count = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, n: int) -> Tensor:
        ctx.n = n
        return x * n

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g * (max(ctx.n, 1) if cls.guard_count else ctx.n), None


class ScaleFixed(Scale):
    guard_count = False


def test_an_int_argument_at_zero_is_an_edge() -> None:
    ref = lambda x, n: x * n  # noqa: E731
    assert edges(Scale, [rand(3, 4), 3], ref)["int_zero[1]"] == ("fail", "edge_wrong")
    assert edges(ScaleFixed, [rand(3, 4), 3], ref)["int_zero[1]"] == ("pass", "")


class LastDimNorm(Function):
    """x / (number of elements per row), rows being dim 0; BROKEN: backward counts the last
    dim only (right for 2-d, wrong for 3-d)."""

    flatten = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return x / x[0].numel()

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        count = torch.Size(ctx.shape[1:]).numel() if cls.flatten else ctx.shape[-1]
        return g / count


class LastDimNormFixed(LastDimNorm):
    flatten = True


def test_a_rank_more_is_an_edge() -> None:
    ref = lambda x: x / x[0].numel()  # noqa: E731
    assert edges(LastDimNorm, [rand(3, 4)], ref)["rank"] == ("fail", "edge_wrong")
    assert edges(LastDimNormFixed, [rand(3, 4)], ref)["rank"] == ("pass", "")


def test_a_batch_past_a_step_is_an_edge() -> None:
    # x @ w over a batch of BATCH_STEP rows at a time, the catalogue's mmcv565
    args = [rand(2, 3), rand(3, 2, seed=1)]
    assert edges(BatchStepLinear, args, torch.matmul)["grown"] == ("fail", "edge_wrong")
    assert edges(BatchStepLinearFixed, args, torch.matmul)["grown"] == ("pass", "")


def half_detached(x: Tensor) -> Tensor:
    """exp(x); BROKEN: the float16 path goes through .detach()."""
    return (x.detach() if x.dtype == torch.float16 else x).exp()


def test_a_graph_cut_in_float16_fails() -> None:
    assert edges(half_detached, [rand(3, 4)], torch.exp)["float16"] == ("fail", "graph_cut")
    assert edges(torch.exp, [rand(3, 4)], torch.exp)["float16"] == ("pass", "")


def test_a_failing_edge_says_its_input_as_a_spec_case() -> None:
    report = gradlab.check(Scale, [rand(3, 4), 3], reference=lambda x, n: x * n,
                           checks=["edges"])
    (row,) = [r for r in report.rows if r.variant == "int_zero[1]"]
    assert "{name: edge_int_zero[1], set: {1: 0}}" in message(row)


class RowsLinear(Function):
    """x @ w over a batch of rows; BROKEN (`bug`): for an empty batch, backward sizes a launch
    by the row count ("crash": 1 // rows) or w's gradient is a mean over no rows times their
    count ("nan"), where no element reaches a loss and it must be zero."""

    bug = ""

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        rows = x.shape[0]
        if cls.bug == "crash":
            _ = 1 // rows
        gw = x.t() @ g
        return g @ w.t(), gw / rows * rows if cls.bug == "nan" else gw


@pytest.mark.parametrize("bug", ["crash", "nan"])
def test_without_a_reference_an_empty_output_is_judged(bug: str) -> None:
    # where every output is empty the gradient is zero whatever the math: no reference needed
    broken = type("Broken", (RowsLinear,), {"bug": bug})
    args = [rand(4, 3), rand(3, 2, seed=1)]
    assert edges(broken, args, None) == {"empty": ("fail", "edge_empty")}
    assert edges(RowsLinear, args, None) == {"empty": ("pass", "")}


class ColScale(Function):
    """2x; BROKEN: backward sizes a launch by the column count (1 // cols), a crash for no
    columns: without a reference too, a shape the case lacks, not an empty batch."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.cols = x.shape[-1]
        return 2 * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        _ = 1 // ctx.cols
        return 2 * g


def test_without_a_reference_a_crash_without_columns_warns() -> None:
    assert edges(ColScale, [rand(4, 3)], None) == {"empty": ("warn", "edge_reshaped")}


class AllSum(Function):
    """x.sum(): a 0-d output, never empty."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return x.sum()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g.expand(ctx.shape).clone()


def test_without_a_reference_and_no_empty_output_edges_is_a_declared_skip() -> None:
    report = gradlab.check(AllSum, [rand(3, 4)], checks=["edges"])
    (row,) = [r for r in report.rows if r.check == "edges"]
    assert (row.status, row.declared, row.reason) == ("skip", True, "edges_no_reference")


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3), (5,)])
def test_the_edge_points_are_few(shape: tuple[int, ...]) -> None:
    # a handful per argument, not a search: the default check stays cheap
    case = Case("c", (rand(*shape),))
    points = list(edge_points(case))
    assert 3 <= len(points) <= 4 + 2 * len(shape) + 4


class LogAbsRight(Function):
    """log|x| with backward g / x: +inf at +0 (the right side's limit)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return x.abs().log()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g / x


class LogAbs(LogAbsRight):
    """log|x| whose backward takes the left side's limit at 0 (-inf) where torch's 1/x gives
    +inf (the right side's): a pole whose sides disagree, not judged."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.where(x == 0, torch.full_like(x, -float("inf")), 1 / x)


def test_an_infinity_of_the_wrong_sign_fails_only_where_both_sides_agree() -> None:
    positive = [rand(3, 4, low=0.5, high=2.0)]
    # 0 is beyond the case's values, yet the other infinity is a value written for 0, and
    # wrong (arithmetic written for x away from 0 gives the limit's sign or a NaN there)
    assert edges(RsqrtBackward, positive, torch.rsqrt)["zero[0]"] == ("fail", "edge_wrong")
    # shown at the simpler input that fails too: zeros planted among the case's values
    report = gradlab.check(RsqrtBackward, positive, reference=torch.rsqrt, checks=["edges"])
    (row,) = [r for r in report.rows if r.variant == "zero[0]"]
    assert row.findings[0].want["set"] == {0: {"special": [0.0]}}
    assert edges(RsqrtFixed, positive, torch.rsqrt).get("zero[0]", PASSED) == PASSED
    # (abs's derivative at 0 is 0, so torch's own log|x| gives NaN there: a Function for the
    # reference, whose gradient is +inf at +0)
    case = [rand(3, 4)]
    assert edges(LogAbs, case, LogAbsRight.apply).get("zero[0]", PASSED) == PASSED


class RowScale(Function):
    """x * 2 for a matrix; its backward is written for 2-d (a matrix's rows): a rank more
    raises there, where forward ran.  Not certain: the Function may be meant for matrices."""

    any_rank = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.shape = x.shape
        return x * 2

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        rows, cols = (g.shape[0], -1) if cls.any_rank else ctx.shape  # unpacks 2 dims
        return (g.reshape(rows, cols) * 2).reshape(ctx.shape)


class RowScaleAnyRank(RowScale):
    any_rank = True


def test_a_backward_raising_only_at_a_rank_more_warns() -> None:
    ref = lambda x: x * 2  # noqa: E731
    assert edges(RowScale, [rand(3, 4)], ref)["rank"] == ("warn", "edge_reshaped")
    assert edges(RowScaleAnyRank, [rand(3, 4)], ref)["rank"] == ("pass", "")


EDGE_BUG = '''
import torch


class LastDimNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x / x[0].numel()

    @staticmethod
    def backward(ctx, g):
        return g / ctx.shape[-1]  # right for 2-d only


def reference(x):
    return x / x[0].numel()
'''


def test_an_edge_rows_repro_line_reruns_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    (tmp_path / "edgebug.py").write_text(EDGE_BUG)
    (tmp_path / "edge.yaml").write_text("function: edgebug:LastDimNorm\n"
                                        "reference: edgebug:reference\n"
                                        "args: [{shape: [3, 4]}]\n")
    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(app, ["check", "edge.yaml", "--no-isolate"])
    assert first.exit_code == 1, first.output
    (line,) = [ln.strip() for ln in first.output.splitlines()
               if ln.strip().startswith("gradlab check edge.yaml")]
    assert "--variant" not in line and "--show edges" in line, line
    again = CliRunner().invoke(app, [*shlex.split(line)[1:], "--no-isolate"])
    assert again.exit_code == 1, again.output
    assert "edge_wrong" in again.output and "rank" in again.output, again.output


def _judged(fn: Any, ref: Any, args: tuple[Any, ...], sizes: dict[int, int]) -> str:
    """pointjudge's verdict on `fn` at the case of `args` with the size axes in `sizes` moved."""
    case = Case("c", args)
    base = base_point(case)
    point = replace(base, sizes=tuple((n, sizes.get(n, m)) for n, m in base.sizes))
    return judge(fn, ref, case, point, "cpu", table(False)["float64"]).verdict


class IndexFill(Function):
    """x.index_fill(0, idx, value), correct: value's gradient sums each filled row once."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, value: Tensor, idx: Tensor) -> Tensor:
        ctx.save_for_backward(idx)
        return x.index_fill(0, idx, value)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        (idx,) = ctx.saved_tensors
        return g.index_fill(0, idx, 0), g.index_select(0, torch.unique(idx)).sum(), None


def index_fill_ref(x: Tensor, value: Tensor, idx: Tensor) -> Tensor:
    hit = torch.zeros(x.shape[0], dtype=torch.bool).index_fill(0, idx, True)
    return torch.where(hit[:, None], value.expand_as(x), x)


def test_indices_into_an_empty_tensor_are_not_judged() -> None:
    # torch's index_fill skips the bounds check on an empty x (forward and the reference run),
    # index_select does not: rows [1, 3] of nothing is no valid call, so no failure
    args = (rand(4, 3), rand(), torch.tensor([1, 3]))
    assert _judged(IndexFill.apply, index_fill_ref, args, {4: 0, 3: 0}) == "unjudgeable"
    assert _judged(IndexFill.apply, index_fill_ref, args, {}) == "pass"


class FirstSteps(Function):
    """h_t = f_t * x_t over x's steps (f may hold more, unused); BROKEN outside the case's
    equal lengths: f's gradient comes back at x's length, which autograd refuses."""

    @staticmethod
    def forward(ctx: Any, f: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(f, x)
        return f[..., :x.shape[-1]] * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        f, x = ctx.saved_tensors
        return g * x, g * f[..., :x.shape[-1]]


def test_a_failure_that_an_empty_batch_only_carries_is_not_named_empty() -> None:
    # f [0, 3] against x [0, 2]: it fails as much with the batch back at 2, so it is the
    # lengths that disagree (uncertain), not the empty batch (certain)
    ref = lambda f, x: f[..., :x.shape[-1]] * x  # noqa: E731
    args = (rand(2, 8), rand(2, 8, seed=1))
    case = Case("c", args)
    base = base_point(case)
    tol = table(False)["float64"]
    apart = replace(base, sizes=((8, 3), (2, 0)), dims=((1, 1, 2),))
    assert judge(FirstSteps.apply, ref, case, apart, "cpu", tol).verdict == "reshaped"
    empty = replace(base, sizes=((8, 8), (2, 0)))
    assert judge(FirstSteps.apply, ref, case, empty, "cpu", tol).verdict == "pass"


def test_a_recorded_tensor_of_fixed_values_can_be_made_empty() -> None:
    # a recorded call's tensors hold fixed values (no other shape can be drawn), yet an empty
    # tensor holds none: the empty points, judged without a reference, reach recorded specs
    from gradlab.cases import fixed_values, materialize
    from gradlab.checks.families.inputspace import resized
    from gradlab.model import TensorArg

    x = rand(4, 3)
    idx = torch.tensor([2, 0, 1, 3])
    case = Case("c", (TensorArg((4, 3), values=fixed_values(x.detach())),
                      TensorArg((4,), dtype="int64", requires_grad=False,
                                values=fixed_values(idx))))
    base = base_point(case)
    empty = resized(case, replace(base, sizes=tuple((n, 0 if n == 4 else m)
                                                    for n, m in base.sizes)))
    assert empty is not None
    args = materialize(empty, "float64", "cpu", 0).args
    assert [tuple(a.shape) for a in args] == [(0, 3), (0,)]
    # any other size keeps the recorded values out of reach
    assert resized(case, replace(base, sizes=tuple((n, 2 if n == 4 else m)
                                                   for n, m in base.sizes))) is None


class ColumnStack(Function):
    """x.sum(-1), whose backward stacks one gradient per column: it raises without columns
    (torch.stack of nothing), whatever the values."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.n = x.shape[-1]
        return x.sum(-1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return torch.stack([g] * ctx.n, -1)


def test_a_failure_the_values_do_not_need_is_named_for_its_shape() -> None:
    # no columns and every value zero, where the case's values are all positive: the raise
    # is the shape's (it raises at the case's own values too), not the values' region
    case = Case("c", (rand(3, 4, low=0.1, high=1.0).requires_grad_(),))
    base = base_point(case)
    point = replace(base, sizes=((4, 0), (3, 3)), values=((0, "zero"),))
    out = judge(ColumnStack.apply, lambda x: x.sum(-1), case, point, "cpu",
                table(False)["float64"])
    assert out.verdict == "reshaped", out
    # where the values are what it needs, the region names it
    out = judge(Elu.apply, lambda x, a: torch.nn.functional.elu(x, a),
                Case("c", (rand(3, 4, low=0.1, high=1.0).requires_grad_(), 1.0)),
                replace(base, values=((0, "negative"),)), "cpu", table(False)["float64"])
    assert out.verdict == "domain", out


class Twice(Function):
    """2x, right at every shape."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return 2 * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return 2 * g


def twice_or_nothing(x: Tensor) -> Tensor:
    """The reference, which returns a fresh zero tensor for an empty signal (no graph: its
    gradient is None, the same zero as the Function's empty one)."""
    return 2 * x if x.numel() else torch.zeros_like(x)


def test_an_empty_gradient_where_the_reference_has_none_passes() -> None:
    x = torch.rand(2, 5, dtype=torch.float64).requires_grad_()
    report = gradlab.check(Twice.apply, [x], reference=twice_or_nothing)
    assert [r for r in report.rows if r.status in ("fail", "error")] == [], report.rows


class Lagged(Function):
    """x[..., d:] - x[..., :-d] for a lag d; one_lag: BROKEN, backward assumes d = 1, the
    lag the case passes."""

    one_lag = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, d: int) -> Tensor:
        ctx.shape, ctx.d = x.shape, 1 if cls.one_lag else d
        return x[..., d:] - x[..., :-d]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        gx = g.new_zeros(ctx.shape)
        n = ctx.shape[-1]
        gx[..., ctx.d:ctx.d + g.shape[-1]] += g[..., :n - ctx.d]
        gx[..., :g.shape[-1]] -= g
        return gx, None


class LaggedOneLag(Lagged):
    one_lag = True


def lagged_ref(x: Tensor, d: int) -> Tensor:
    return x[..., d:] - x[..., :-d]


class Strided(Function):
    """x[::a, ::b] for steps (a, b); same_steps: BROKEN, backward scatters with a along both
    dims, right for square steps only."""

    same_steps = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, steps: tuple[int, int]) -> Tensor:
        ctx.shape = x.shape
        ctx.steps = (steps[0], steps[0]) if cls.same_steps else steps
        return x[::steps[0], ::steps[1]]

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        gx = g.new_zeros(ctx.shape)
        a, b = ctx.steps
        view = gx[::a, ::b]
        rows, cols = min(view.shape[0], g.shape[0]), min(view.shape[1], g.shape[1])
        view[:rows, :cols] += g[:rows, :cols]
        return gx, None


class StridedSameSteps(Strided):
    same_steps = True


def test_an_int_argument_one_more_and_a_per_dim_setting_made_non_square() -> None:
    x = torch.rand(3, 6, dtype=torch.float64).requires_grad_()
    assert red(LaggedOneLag, [x, 1], lagged_ref) == {("edges", "int_more[1]", "edge_wrong")}
    assert red(Lagged, [x, 1], lagged_ref) == set()
    y = torch.rand(6, 6, dtype=torch.float64).requires_grad_()
    strided_ref = lambda t, s: t[::s[0], ::s[1]]  # noqa: E731
    assert red(StridedSameSteps, [y, (1, 1)], strided_ref) == {("edges", "tuple[1]",
                                                                "edge_wrong")}
    assert red(Strided, [y, (1, 1)], strided_ref) == set()


def red(fn: type[Function], args: list[Any], ref: Any) -> set[tuple[str, str, str]]:
    report = gradlab.check(fn.apply, args, reference=ref)
    return {(r.check, r.variant, r.hint) for r in report.rows if r.status in ("fail", "error")}


class Centre(Function):
    """(x minus its mean over the last dim) * w; flat: BROKEN, backward views grad_output as
    [rows, rest], right for 2-d inputs only (a batch [2, 3, 4] is centred over 12).  A
    trailing dim more is refused (w no longer matches): only a batch of x shows it."""

    flat = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        c = x - x.mean(-1, keepdim=True)
        ctx.save_for_backward(c, w)
        return c * w

    @classmethod
    @once_differentiable  # a kernel's backward: first order only
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        c, w = ctx.saved_tensors
        gw = g * w
        rows = gw.reshape(gw.shape[0], -1) if cls.flat else gw
        gx = (rows - rows.mean(-1, keepdim=True)).reshape(g.shape)
        return gx, (g * c).reshape(-1, w.shape[0]).sum(0)


class CentreFlat(Centre):
    flat = True


def centre_ref(x: Tensor, w: Tensor) -> Tensor:
    return (x - x.mean(-1, keepdim=True)) * w


class ScaleRows(Function):
    """x * s[:, None], written for a 2-d x: at a batch of x, s broadcasts along its rows and
    backward's row sums come back at the wrong shape (autograd refuses: a raise, a warn)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, s: Tensor) -> Tensor:
        ctx.save_for_backward(x, s)
        return x * s[:, None]

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, s = ctx.saved_tensors
        return g * s[:, None], (g * x).sum(1)  # the columns of a 2-d x


def test_a_batch_of_the_case_input_is_an_edge() -> None:
    x = torch.rand(3, 4, dtype=torch.float64).requires_grad_()
    w = torch.rand(4, dtype=torch.float64).requires_grad_()
    assert ("edges", "rank", "edge_wrong") in red(CentreFlat, [x, w], centre_ref)
    assert red(Centre, [x, w], centre_ref) == set()
    s = torch.rand(3, dtype=torch.float64).requires_grad_()
    report = gradlab.check(ScaleRows.apply, [x, s], reference=lambda a, b: a * b[:, None])
    assert [(r.check, r.variant, r.status, r.hint) for r in report.rows if r.status != "pass"
            ] == [("edges", "rank", "warn", "edge_reshaped")]


def test_a_keyword_int_is_moved_one_more_never_to_zero() -> None:
    # a keyword int is configuration (a block size): 0 can be a loop that never ends
    x = torch.rand(3, 4, dtype=torch.float64).requires_grad_()
    kinds = {e.kind: e.point.ints for e in edge_points(Case("c", (x, 2), {"block": 3,
                                                                          "dims": (1, 1)}))}
    assert kinds["int_zero[1]"] == ((1, 0),) and kinds["int_more[1]"] == ((1, 3),)
    assert kinds["int_more[block]"] == (("block", 4),) and "int_zero[block]" not in kinds
    assert kinds["tuple[dims]"] == (("dims", (2, 1)),)
    from gradlab.checks.families.explore import space
    plain = dict(space(Case("c", (x, 2), {"block": 3})).plain)
    assert plain[1] == [0, 1, 3] and plain["block"] == [1, 4]


def test_a_float_argument_at_its_inverse_is_an_edge() -> None:
    # softplus' threshold tested on the output: at the case's 20 a band of 2e-9 differs, at
    # the inverse 0.05 every x below it
    from test_explore import soft_threshold
    x = rand(3, 4)
    broken = edges(lambda x, t: soft_threshold(x, t, on_output=True), [x, 20.0],
                   soft_threshold)
    assert broken["float[1]"] == ("fail", "edge_wrong")
    twin = edges(soft_threshold, [x, 20.0], soft_threshold)
    assert all(status == "pass" for status, _ in twin.values()), twin


def test_a_setting_refused_at_the_case_s_shapes_is_an_edge_at_shapes_that_fit_it() -> None:
    # groups 1 -> 2 against w [3, 4]: refused; with w's out-channels doubled and its
    # in-channels halved it runs, and the broken weight gradient shows
    from test_explore import grouped_matmul
    x, w = rand(2, 4), rand(3, 4, seed=1)
    broken = edges(lambda x, w, g: grouped_matmul(x, w, g, first_group_only=True), [x, w, 1],
                   grouped_matmul)
    assert broken["int_more[2]"] == ("fail", "edge_wrong")
    twin = edges(grouped_matmul, [x, w, 1], grouped_matmul)
    assert twin["int_more[2]"] == ("pass", "")


def nearest_up(x: Tensor, size: int, window: int = 0) -> Tensor:
    """x's last dim resampled to `size` by nearest neighbour; window: BROKEN when > 0, each
    input's gradient sums the first `window` outputs that read it only (a fixed window, right
    while size / n stays at most `window`)."""
    n = x.shape[-1]
    src = torch.arange(size) * n // size
    out = x[..., src]
    if not window:
        return out
    first = torch.searchsorted(src, src)  # the first output reading the same input
    return torch.where(torch.arange(size) - first < window, out, out.detach())


def test_an_int_argument_one_more_at_the_least_sizes_is_an_edge() -> None:
    # 16 outputs of 8 inputs read each twice; 17 of 2 read each 8 or 9 times, past a window
    # of 4
    x = rand(2, 8)
    broken = edges(lambda x, s: nearest_up(x, s, window=4), [x, 16], nearest_up)
    assert broken["int_more[1]"] == ("fail", "edge_wrong")
    twin = edges(nearest_up, [x, 16], nearest_up)
    assert twin["int_more[1]"] == ("pass", "")


def test_an_epsilon_stays_at_the_case_s_value() -> None:
    # an eps of 1e-5 at 1e5 tests a value no caller passes; a factor of 0.5 goes to 2
    def floats(v: float) -> list[Any]:
        points = edge_points(Case("c", (rand(3, 4), v)))
        return [dict(e.point.ints)[1] for e in points if e.kind == "float[1]"]

    assert floats(1e-5) == []
    assert floats(0.5) == [2.0]


class CumSum(Function):
    """cumsum along `dim`; BROKEN (`off_by_one`): backward turns a negative dim into a
    non-negative one off by one (dim + rank - 1), so dim=-1 on a matrix reverses along 0."""

    off_by_one = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, dim: int) -> Tensor:
        ctx.dim = dim + x.dim() - int(cls.off_by_one) if dim < 0 else dim
        return x.cumsum(dim)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g.flip(ctx.dim).cumsum(ctx.dim).flip(ctx.dim), None


class CumSumFixed(CumSum):
    off_by_one = False


def test_an_int_argument_at_minus_one_is_an_edge() -> None:
    # dim=-1 on [4, 5] is the case's own dim 1 written from the end: a certain failure
    x = torch.rand(4, 5, dtype=torch.float64).requires_grad_()
    assert red(CumSum, [x, 1], torch.cumsum) == {("edges", "int_negative[1]", "edge_wrong")}
    assert red(CumSumFixed, [x, 1], torch.cumsum) == set()
    # a lag of -1 (x[..., -1:] - x[..., :1], which slicing lets through) means something
    # else to the reference than the case's lag 1: a Function written for lags >= 1 warns
    report = gradlab.check(Lagged.apply, [torch.rand(3, 6, dtype=torch.float64)
                                          .requires_grad_(), 1], reference=lagged_ref)
    (row,) = [r for r in report.rows if r.variant == "int_negative[1]"]
    assert (row.status, row.hint) == ("warn", "edge_negative"), message(row)


class FirstRowGrad(Function):
    """cumsum along the last dim of [B, T]; BROKEN (`first_row`): backward computes row 0's
    gradient and repeats it for every row, right for a batch of one only."""

    first_row = True

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        return x.cumsum(-1)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        gx = g.flip(-1).cumsum(-1).flip(-1)
        return gx[:1].expand_as(gx).clone() if cls.first_row else gx


class FirstRowGradFixed(FirstRowGrad):
    first_row = False


def test_a_batch_of_one_at_two_is_an_edge() -> None:
    x = torch.rand(1, 5, dtype=torch.float64).requires_grad_()
    ref = lambda t: t.cumsum(-1)  # noqa: E731
    assert ("edges", "batch", "edge_wrong") in red(FirstRowGrad, [x], ref)
    assert red(FirstRowGradFixed, [x], ref) == set()


def test_a_repaired_setting_where_forward_disagrees_is_not_judged() -> None:
    # groups 1 -> 2 is refused at the case's shapes and repaired; there this Function's
    # forward differs from the reference's (twice it): shapes made to fit a setting may be no
    # valid call for the Function (a B-spline of one degree more given twice the knots), so
    # only a gradient wrong where forward agrees is judged
    from test_explore import grouped_matmul
    x, w = rand(2, 4), rand(3, 4, seed=1)
    other = edges(lambda x, w, g: grouped_matmul(x, w, g) * (1.0 if g == 1 else 2.0),
                  [x, w, 1], grouped_matmul)
    assert other.get("int_more[2]", ("pass", ""))[0] == "pass", other


class NewtonSqrt(Function):
    """sqrt(x) by `iters` Newton steps from x (converged to float64's rounding at 30), the
    exact derivative in backward.  `iters` is an iteration count the reference (torch.sqrt)
    does not read: at 0 or 1 the value is less converged by design."""

    scale = 1.0

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, iters: int) -> Tensor:
        y = x.clone()
        for _ in range(iters):
            y = 0.5 * (y + x / y)
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        return cls.scale * g / (2 * y), None


class NewtonSqrtHalfGrad(NewtonSqrt):
    scale = 0.5


def test_an_iteration_count_the_reference_does_not_read_warns_at_its_edges() -> None:
    # cal9: pytorch-toolbelt's tempered-softmax normaliser failed edge_wrong at num_iters 0
    # and 1, where its value is the starting iterate by design
    x = torch.rand(3, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64) + 0.5
    r = gradlab.check(NewtonSqrt, [x.requires_grad_(), 30], reference=lambda t, n: t.sqrt())
    bad = {(row.variant, row.status, row.hint) for row in r.rows if row.status != "pass"}
    assert bad and all(s == "warn" and h == "edge_unread" for _, s, h in bad), bad
    assert {v for v, _, _ in bad} <= {"int_zero[1]", "int_one[1]", "int_negative[1]"}
    # the same Function with a wrong gradient at the case's own count still fails
    wrong = gradlab.check(NewtonSqrtHalfGrad, [x, 30], reference=lambda t, n: t.sqrt())
    assert any(row.variant == "base" and row.status == "fail" for row in wrong.rows)

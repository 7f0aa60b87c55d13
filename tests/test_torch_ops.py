"""torch's own ops checked as Functions (benchmarks/opinfo: every OpInfo op with float64
autograd, wrapped in a correct recomputing Function, the op itself the reference): what that
sweep found gradlab doing wrong on correct code, each pinned here on the op that showed it."""

from __future__ import annotations

import torch

import gradlab
from gradlab.render.words import message


def f64(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(*shape, generator=gen, dtype=torch.float64) * (high - low) + low
    return x.requires_grad_()


def not_passing(report: gradlab.Report) -> list[tuple[str, str, str, str]]:
    return [(r.check, r.variant, r.status, message(r)[:160]) for r in report.rows
            if r.status not in ("pass", "skip")]


def test_an_efficient_zero_gradient_is_compared_as_zeros() -> None:
    # sgn's backward, and l1_loss' double backward, return autograd's efficient zero tensor,
    # which numpy refuses: "gradlab itself failed" on the forward row before
    x = f64(4, 5)
    assert torch.autograd.grad(torch.sgn(x).sum(), x)[0]._is_zerotensor()
    report = gradlab.check(torch.sgn, [x], reference=torch.sgn)
    assert report.passed, not_passing(report)
    t = f64(4, 5, seed=1)
    report = gradlab.check(torch.nn.functional.l1_loss, [x, t],
                           reference=torch.nn.functional.l1_loss)
    assert report.passed, not_passing(report)


def split_with_an_empty_piece(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.split_with_sizes([1, 4, 0], 1)


def test_an_empty_output_beside_others_is_checked() -> None:
    # the broadcast grad_output variant had no value to take from an empty output
    x = f64(3, 5)
    report = gradlab.check(split_with_an_empty_piece, [x], reference=split_with_an_empty_piece)
    assert report.passed, not_passing(report)


class Eigvecs(torch.autograd.Function):
    """The eigenvectors of a real matrix (complex), backward by eig's own formula: right, and it
    raises where the loss depends on each eigenvector's phase, as eig's does."""

    @staticmethod
    def forward(ctx, a: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        ctx.save_for_backward(a)
        return torch.linalg.eig(a)[1]

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        (a,) = ctx.saved_tensors
        with torch.enable_grad():
            a = a.detach().requires_grad_()
            return torch.autograd.grad(torch.linalg.eig(a)[1], a, g)[0]


def eigvecs(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eig(a)[1]


def test_a_backward_raising_where_the_reference_s_raises_too_is_not_the_function_s_crash() -> None:
    report = gradlab.check(Eigvecs, [f64(4, 4)], reference=eigvecs, checks=["gradient"])
    (row,) = [r for r in report.rows if r.check == "gradient" and r.variant == "base"]
    assert row.reason == "reference_failed" and row.hint != "crash", message(row)


def rpow(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    return base ** x


def test_a_second_order_the_reference_shares_past_its_domain_passes() -> None:
    # a negative base: NaN forward, gradients and double backward alike in the reference; the
    # finite differences of the gradient fail for both, and the two double backwards agree
    x, base = f64(3, 4), f64(3, 4, seed=2, low=-2.0, high=2.0)
    report = gradlab.check(rpow, [x, base], reference=rpow, checks=["second_order"])
    (row,) = [r for r in report.rows if r.check == "second_order" and r.variant == "base"]
    assert row.status == "pass" and row.reason == "reference_surrogate", message(row)


def rpow_wrong_twice(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    return RpowDetached.apply(x, base)


class RpowDetached(torch.autograd.Function):
    """base ** x with a backward that is right once and not differentiable (its factors are
    detached): its double backward differs from the reference's, so it still fails."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        y = base ** x
        ctx.save_for_backward(x, base, y)
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[no-untyped-def]
        x, base, y = (t.detach() for t in ctx.saved_tensors)
        return g * y * base.log(), g * x * base ** (x - 1)


def test_a_wrong_second_order_is_not_excused_by_the_reference() -> None:
    x, base = f64(3, 4), f64(3, 4, seed=2, low=0.5, high=2.0)
    report = gradlab.check(rpow_wrong_twice, [x, base], reference=rpow, checks=["second_order"])
    (row,) = [r for r in report.rows if r.check == "second_order" and r.variant == "base"]
    assert row.status == "fail", message(row)


class ToSparse(torch.autograd.Function):
    """A dense matrix as a sparse COO one; `scale` its backward's factor (1 is right)."""

    scale = 1.0

    @classmethod
    def forward(cls, ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        return x.to_sparse()

    @classmethod
    def backward(cls, ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        return g.to_dense() * cls.scale


class ToSparseWrong(ToSparse):
    scale = 1.5


def test_a_sparse_output_is_compared_as_its_dense_values() -> None:
    # to_sparse's and masked ops' sparse outputs: "gradlab itself failed" on the forward row
    # (numpy and torch.equal refuse a sparse tensor) before
    x = f64(3, 4)
    report = gradlab.check(ToSparse.apply, [x], reference=torch.Tensor.to_sparse)
    assert report.passed, not_passing(report)
    bad = gradlab.check(ToSparseWrong.apply, [x], reference=torch.Tensor.to_sparse)
    assert any(r.check == "gradient" and r.status == "fail" and r.hint == "constant_factor"
               for r in bad.rows), not_passing(bad)


def to_chalf(x: torch.Tensor) -> torch.Tensor:
    return torch.complex(x, -x).to(torch.complex32)


def test_a_complex32_output_is_compared() -> None:
    # torch.equal is not implemented for complex32 (chalf): an internal error before
    x = f64(3, 4)
    report = gradlab.check(to_chalf, [x], reference=to_chalf)
    assert not any(r.status in ("fail", "error") for r in report.rows), not_passing(report)
    assert any(r.check == "gradient" and r.status == "pass" for r in report.rows)


class SortTiesLastFirst(torch.autograd.Function):
    """Values sorted along the last dim, ties ordered last index first (torch's sort orders
    them its own way): right, and a gradient at ties shared otherwise than the reference's."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        # ascending value, descending index: a stable sort of the reversed row, mapped back
        order = x.shape[-1] - 1 - torch.flip(x, [-1]).argsort(dim=-1, stable=True)
        ctx.save_for_backward(order)
        return x.gather(-1, order)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        (order,) = ctx.saved_tensors
        return torch.zeros_like(g).scatter_add(-1, order, g)


class SortTiesFirstSlot(SortTiesLastFirst):
    """BROKEN: backward finds each element's slot by its value (searchsorted), so every tied
    element takes the first tied slot's gradient."""

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        (order,) = ctx.saved_tensors
        x = ctx.saved_x
        slot = torch.searchsorted(x.gather(-1, order).contiguous(), x.contiguous())
        return g.gather(-1, slot)

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
        ctx.saved_x = x.detach()
        return SortTiesLastFirst.forward(ctx, x)


def sorted_values(x: torch.Tensor) -> torch.Tensor:
    return x.sort(-1).values


def test_ties_the_special_variant_plants_are_judged_by_their_totals() -> None:
    # torch's custom_op_db sort (numpy's argsort) failed `special` (special_only): the planted
    # zeros tie, and a tied group's gradient is shared by each sort's own order.  The kink
    # convention, taken element by element, had split the group's total.
    x = f64(1, 15)  # one row: the planted zeros tie
    report = gradlab.check(SortTiesLastFirst.apply, [x], reference=sorted_values)
    assert report.passed, not_passing(report)
    assert any(r.variant == "special" and r.status == "pass" for r in report.rows)
    bad = gradlab.check(SortTiesFirstSlot.apply, [x], reference=sorted_values)
    assert any(r.hint == "ties_only" and r.status == "fail" for r in bad.rows), not_passing(bad)


def cat_rows(xs: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(xs, 0)


def test_tensors_in_a_list_are_said_not_checked() -> None:
    # torch's custom_op_db numpy_cat (a Tensor[] argument) passed on its forward and opcheck
    # rows alone: no gradient row said that its gradients were never checked
    xs = [f64(2, 3), f64(1, 3, seed=1)]
    report = gradlab.check(cat_rows, [xs], reference=cat_rows)
    assert not report.passed
    (row,) = [r for r in report.rows if r.reason == "tensor_list_input"]
    assert row.status == "skip" and not row.declared
    assert "lambda a, b, *rest" in message(row)
    def spread_cat(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return cat_rows([a, b])

    spread = gradlab.check(spread_cat, xs, reference=spread_cat)
    assert spread.passed and any(r.check == "gradient" for r in spread.rows)

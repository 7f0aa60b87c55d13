"""What a Function's own code says about its inputs (gradlab.checks.families.codefacts): the
other settings of a string argument and the thresholds values are compared with, fed by the
edges check (`choice[i]`) and `--explore` (the `thresholds` value kind); each broken Function
beside a correct twin."""

from __future__ import annotations

from typing import Any, Literal

import pytest
import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.checks.families.codefacts import THRESHOLD_SIDE, code_facts, threshold_values
from gradlab.render.words import message

#: Below this a value is dropped (a dead zone), module-level as real code keeps it.
DEAD = 0.02


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> Tensor:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low
    return x.requires_grad_()


def squares(x: Tensor, reduction: str) -> Tensor:
    """x**2 reduced by `reduction` (the reference)."""
    y = x * x
    return {"mean": y.mean(), "sum": y.sum()}.get(reduction, y)


class Squares(Function):
    """x**2 reduced by 'mean', 'sum' or 'none'; BROKEN: backward always divides by the element
    count, right only for 'mean'."""

    by_reduction = False

    @classmethod
    def forward(cls, ctx: Any, x: Tensor, reduction: str) -> Tensor:
        ctx.save_for_backward(x)
        ctx.reduction = reduction
        return squares(x, reduction)

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        if cls.by_reduction and ctx.reduction != "mean":
            return 2 * x * g, None
        return 2 * x * g / x.numel(), None


class SquaresFixed(Squares):
    by_reduction = True


class DeadZone(Function):
    """x where x >= DEAD, else 0; BROKEN: backward passes the gradient wherever x > 0, so
    values in (0, DEAD) get a gradient their output never had."""

    bound = 0.0

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.where(x >= DEAD, x, torch.zeros_like(x))

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return torch.where(x > cls.bound, g, torch.zeros_like(g))


class DeadZoneFixed(DeadZone):
    bound = DEAD


def dead_zone(x: Tensor) -> Tensor:
    return torch.where(x >= DEAD, x, torch.zeros_like(x))


def rows(report: gradlab.Report, check: str) -> dict[str, tuple[str, str]]:
    return {r.variant: (r.status, r.hint) for r in report.rows if r.check == check}


def test_a_string_arguments_other_settings_come_from_the_code_and_torchs_own() -> None:
    facts = code_facts(Squares.apply, squares, (rand(2), "mean"))
    # 'sum' from the code's own comparisons and dict keys, 'none' from torch's reductions
    assert facts.choices == ((1, ("sum", "none")),)

    def modes(x: Tensor, how: Literal["fast", "exact"]) -> Tensor:
        match how:
            case "exact":
                return x
        return x * 2 if how in ("fast", "approx") else x

    assert code_facts(modes, None, (rand(2), "exact")).choices == ((1, ("fast", "approx")),)
    # a string no code compares and torch does not enumerate has no other setting
    assert code_facts(modes, None, (rand(2), "x")).choices[0][1] == ("fast", "exact",
                                                                      "approx")
    assert code_facts(lambda x, s: x, None, (rand(2), "x")).choices == ()


def test_thresholds_are_the_non_integer_numbers_the_code_compares_values_with() -> None:
    assert code_facts(DeadZone.apply, dead_zone, (rand(2),)).thresholds == (DEAD,)

    def clipped(x: Tensor, k: int) -> Tensor:
        if x.dim() == 2 or k > 3:  # sizes and counts: integers, not thresholds
            pass
        return torch.where(x.abs() < 1 / 255, torch.zeros_like(x), x) * (x > 0)

    assert code_facts(clipped, None, (rand(2), 1)).thresholds == (1 / 255,)
    # either side of each, clear of the threshold itself
    below, above = threshold_values((DEAD,))
    assert below == pytest.approx(DEAD * (1 - THRESHOLD_SIDE)) and above > DEAD
    # code without source says nothing
    assert code_facts(torch.sin, torch.sin, (rand(2),)).thresholds == ()


def test_a_backward_right_only_for_the_cases_setting_fails_at_another() -> None:
    x = rand(3, 4)
    report = gradlab.check(Squares.apply, [x, "mean"], reference=squares)
    assert rows(report, "edges")["choice[1]"] == ("fail", "edge_wrong"), report.rows
    (row,) = [r for r in report.rows if r.variant == "choice[1]"]
    assert row.findings[0].want["set"][1] in ("sum", "none")
    report = gradlab.check(SquaresFixed.apply, [x, "mean"], reference=squares)
    assert rows(report, "edges")["choice[1]"][0] == "pass"
    assert report.passed


def test_a_setting_the_reference_refuses_is_not_judged() -> None:
    def mean_or_sum(x: Tensor, reduction: str) -> Tensor:
        if reduction not in ("mean", "sum"):
            raise ValueError(reduction)
        return squares(x, reduction)

    class NoneBroken(SquaresFixed):
        @classmethod
        def backward(cls, ctx: Any, g: Tensor) -> tuple[Tensor, None]:
            (x,) = ctx.saved_tensors
            if ctx.reduction == "none":
                return 3 * x * g, None  # wrong, at a setting the reference refuses
            return super().backward(ctx, g)

    report = gradlab.check(NoneBroken.apply, [rand(3, 4), "mean"], reference=mean_or_sum)
    assert rows(report, "edges")["choice[1]"][0] == "pass"


def test_explore_plants_values_either_side_of_a_threshold_and_shrinks_to_them() -> None:
    x = rand(3, 4, low=0.1, high=1.0)  # the case's values never near the dead zone
    report = gradlab.check(DeadZone.apply, [x], reference=dead_zone, checks=["explore"],
                           explore=3.0)
    (row,) = [r for r in report.rows if r.check == "explore"]
    assert (row.status, row.hint) == ("fail", "explored_wrong"), message(row)
    case = row.findings[0].want["set"][0]
    assert case["special"] == pytest.approx(list(threshold_values((DEAD,))), rel=1e-5)
    assert "thresholds" in message(row)
    report = gradlab.check(DeadZoneFixed.apply, [x], reference=dead_zone,
                           checks=["explore"], explore=3.0)
    (row,) = [r for r in report.rows if r.check == "explore"]
    assert row.status == "pass", message(row)
    assert "thresholds" in row.findings[0].got["values"]


def test_explore_says_which_settings_it_tried() -> None:
    report = gradlab.check(SquaresFixed.apply, [rand(3, 4), "mean"], reference=squares,
                           checks=["explore"], explore=1.0)
    (row,) = [r for r in report.rows if r.check == "explore"]
    assert row.status == "pass", message(row)
    assert "arguments 1 -> none, sum" in message(row)


def test_a_string_passed_by_keyword_is_set_by_its_name() -> None:
    def by_keyword(x: Tensor, *, reduction: str = "mean") -> Tensor:
        return Squares.apply(x, reduction)

    def fixed_by_keyword(x: Tensor, *, reduction: str = "mean") -> Tensor:
        return SquaresFixed.apply(x, reduction)

    # the wrapper's code names the Function: its comparisons count
    facts = code_facts(by_keyword, squares, (rand(2),), {"reduction": "mean"})
    assert facts.choices == (("reduction", ("sum", "none")),)
    x = rand(3, 4)
    report = gradlab.check(by_keyword, [x], kwargs={"reduction": "mean"}, reference=squares)
    assert rows(report, "edges")["choice[reduction]"] == ("fail", "edge_wrong"), report.rows
    (row,) = [r for r in report.rows if r.variant == "choice[reduction]"]
    assert row.findings[0].want["set"]["reduction"] in ("sum", "none")
    report = gradlab.check(fixed_by_keyword, [x], kwargs={"reduction": "mean"},
                           reference=squares)
    assert rows(report, "edges")["choice[reduction]"][0] == "pass"

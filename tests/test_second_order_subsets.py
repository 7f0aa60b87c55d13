"""Second order with one differentiable input at a time (second_order.subset_rows): a double
backward that unpacks the first backward's packed gradients by position goes wrong only when
an operand does not require grad (the held-out bug catalogue's cueq264); correct Functions,
in-place ones too, pass every subset."""

from __future__ import annotations

from bug_catalogue import BY_ID

import gradlab


def subset_rows(fn: object, entry: str) -> list[tuple[str, str, str]]:
    e = BY_ID[entry]
    r = gradlab.check(fn, e.inputs(), reference=e.reference, checks=["second_order"])
    return [(x.variant, x.status, x.hint) for x in r.rows
            if x.check == "second_order" and x.variant != "base"]


def test_a_double_backward_unpacking_by_position_fails_at_its_subset() -> None:
    e = BY_ID["cueq264-packed-bwd-bwd"]
    got = subset_rows(e.buggy.apply, e.id)
    assert ("requires_grad=[1]", "fail", "requires_grad_subset") in got, got
    assert subset_rows(e.twin.apply, e.id) == [("requires_grad=[0]", "pass", ""),
                                               ("requires_grad=[1]", "pass", "")]


def test_an_in_place_function_passes_every_subset() -> None:
    # its forward writes into its first input: each probe runs on copies of its own
    e = BY_ID["pt5871-slice-add-no-mark-dirty"]
    assert subset_rows(e.twin.apply, e.id) == [("requires_grad=[0]", "pass", ""),
                                               ("requires_grad=[1]", "pass", "")]


def test_one_differentiable_input_has_no_subset_rows() -> None:
    e = BY_ID["kornia367-where-division-nan"]
    assert subset_rows(e.twin, e.id) == []

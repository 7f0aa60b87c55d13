"""The ties, repeated_index and sentinel variants (gradlab.checks.families.repeats): bugs
that live only at repeated values (or at an index equal to an int argument), each caught with
its `*_only` hint beside a correct twin, through the API and through a spec; a valid other
convention at a tie passes (reason tie_convention)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cases import Inputs
from gradlab.checks.families.repeats import (
    groups_agree,
    paired,
    planted,
    repeat_variants,
    repeated_index_inputs,
    sentinel_inputs,
    tied_inputs,
    untied,
)
from gradlab.cli import app
from gradlab.model import Tolerance
from gradlab.render.words import message

REPEATS = DATA / "repeats"
sys.path.insert(0, str(REPEATS))
import repeat_functions as rf  # noqa: E402


def said(r: Any) -> list[tuple[str, str, str, str]]:
    return [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


def matrix(*shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()


def embedding_args() -> list[torch.Tensor]:
    # distinct indices: the base case passes, only repeats show the bug
    return [matrix(10, 3), torch.tensor([0, 3, 5, 1, 7, 2])]


def gather_args() -> list[torch.Tensor]:
    return [matrix(4, 6), torch.tensor([[0, 3], [5, 1], [2, 4], [1, 0]])]


#: (broken, twins, reference, example inputs, the failing variant's family, its hint)
CASES = {
    "max": (rf.MaxAllTies, (rf.MaxOneIndex, rf.MaxSplit), rf.amax_reference,
            lambda: [matrix(4, 6)], "ties", "ties_only"),
    "embedding": (rf.EmbeddingAssign, (rf.Embedding,), rf.embedding_reference, embedding_args,
                  "repeated_index", "repeated_index_only"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_broken_function_fails_only_at_repeats_with_its_hint(name: str) -> None:
    broken, _, ref, example, family, hint = CASES[name]
    r = gradlab.check(broken, example(), reference=ref)
    assert not r.passed
    assert {(x.variant.split("[")[0], x.check, x.hint) for x in r.failures} == {
        (family, "gradient", hint)}, said(r)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_correct_twins_pass(name: str) -> None:
    _, twins, ref, example, family, _ = CASES[name]
    for twin in twins:
        r = gradlab.check(twin, example(), reference=ref)
        assert r.passed, said(r)
        assert any(x.variant.startswith(family) for x in r.rows)


def test_one_index_at_a_tie_is_another_valid_convention() -> None:
    """torch.max's one-hot beside amax's even split: the elements differ, each tied group's
    total agrees: a pass that says why."""
    r = gradlab.check(rf.MaxOneIndex, [matrix(4, 6)], reference=rf.amax_reference,
                      checks=["forward", "gradient"])
    (row,) = [x for x in r.rows if x.variant.startswith("ties") and x.check == "gradient"]
    assert (row.status, row.reason) == ("pass", "tie_convention")
    split = gradlab.check(rf.MaxSplit, [matrix(4, 6)], reference=rf.amax_reference,
                          checks=["forward", "gradient"])
    assert all(x.reason == "" for x in split.rows if x.variant.startswith("ties"))


def test_a_gather_with_a_correct_backward_passes_with_repeated_indices() -> None:
    r = gradlab.check(rf.Gather, gather_args(), reference=rf.gather_reference)
    assert r.passed, said(r)
    assert [x.status for x in r.rows if x.variant == "repeated_index[1]"] == ["pass", "pass"]


def test_a_reference_refusing_repeated_indices_is_a_declared_skip() -> None:
    def distinct_only(weight: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        if idx.unique().numel() < idx.numel():
            raise ValueError("indices must be distinct")
        return weight[idx]

    r = gradlab.check(rf.Embedding, embedding_args(), reference=distinct_only,
                      checks=["forward", "gradient"])
    assert r.passed, said(r)
    (row,) = [x for x in r.rows if x.variant.startswith("repeated_index")]
    assert (row.status, row.declared, row.reason) == ("skip", True,
                                                      "reference_refused_function_accepts")


@pytest.mark.parametrize("spec, twin, hint", [("max_all_ties", "max_one_index", "ties_only"),
                                              ("embedding_assign", "embedding",
                                               "repeated_index_only"),
                                              (None, "gather", None)])
def test_through_a_spec(spec: str | None, twin: str, hint: str | None,
                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPEATS)

    def run(name: str) -> Any:
        return CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate",
                                        "--report-dir", str(tmp_path)])

    if spec is not None:
        broken = run(spec)
        assert broken.exit_code == 1 and f"likely cause: {hint}" in broken.output, broken.output
    ok = run(twin)
    assert ok.exit_code == 0, ok.output


# --- what the variants feed a Function -------------------------------------------------------


def test_pairing_ties_along_every_dim_with_the_case_s_own_values() -> None:
    x = torch.arange(15.0).reshape(3, 5)
    p = paired(x)
    assert torch.equal(p[:, 0], p[:, 1]) and torch.equal(p[0], p[1])
    assert set(p.unique().tolist()) <= set(x.unique().tolist())
    assert paired(torch.tensor([2.0])).tolist() == [2.0]  # nothing to tie


def test_ties_touch_only_floating_differentiable_inputs() -> None:
    base = Inputs([matrix(3, 4), torch.rand(3, 4, dtype=torch.float64), torch.tensor([1, 2])])
    changed, tied = tied_inputs(base)  # type: ignore[misc]
    assert changed == [0] and tied.args[0].requires_grad
    assert tied.args[1] is not base.args[1] and torch.equal(tied.args[1], base.args[1])
    back = untied(tied, base)
    assert not torch.equal(back.args[0], tied.args[0])
    assert back.args[0].unique().numel() == base.args[0].numel()  # no ties left


def test_indices_are_redrawn_with_repeats_within_their_own_values() -> None:
    idx = torch.tensor([4, 9, 2, 7, 5, 8], dtype=torch.int32)
    base = Inputs([matrix(3, 4), idx, torch.tensor([3]), torch.tensor([True, False, True]),
                   torch.tensor([1, 2, 3], dtype=torch.uint8)], {"target": torch.arange(4)})
    changed, rep = repeated_index_inputs(base)  # type: ignore[misc]
    assert changed == ["1", "target"]
    new = rep.args[1]
    assert new.dtype == torch.int32 and new.shape == idx.shape
    assert new.unique().numel() < new.numel()
    assert set(new.tolist()) <= set(idx.tolist())
    for i in (0, 2, 3, 4):  # floats, a count, a mask, bytes: kept
        assert torch.equal(rep.args[i], base.args[i])


def test_no_variant_without_a_reference_or_anything_to_repeat() -> None:
    base = Inputs([matrix(3, 4), torch.tensor([0, 1, 2])])
    fams = {"ties", "repeated_index"}
    assert [n for n, _, _ in repeat_variants(fams, base, True)] == ["ties[0]",
                                                                   "repeated_index[1]"]
    assert list(repeat_variants(fams, base, False)) == []
    assert list(repeat_variants(fams, Inputs([matrix(1), 3]), True)) == []


def test_tied_groups_conserved_or_not() -> None:
    values = torch.tensor([1.0, 1.0, 2.0, 3.0])
    want = torch.tensor([0.5, 0.5, 1.0, 1.0], dtype=torch.float64)
    tol = Tolerance(1e-7, 1e-7)
    assert groups_agree(values, torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64), want,
                        tol)
    # every tie given the whole gradient: twice the group's total
    assert not groups_agree(values, torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64),
                            want, tol)
    # moved between groups of different values: wrong
    assert not groups_agree(values, torch.tensor([0.5, 0.5, 0.0, 2.0], dtype=torch.float64),
                            want, tol)


def test_sorted_indices_stay_sorted() -> None:
    """Segment ids or offsets that must not decrease: the redrawn ones do not either."""
    base = Inputs([matrix(3, 4), torch.tensor([0, 1, 2, 4, 6, 7])])
    _, rep = repeated_index_inputs(base)  # type: ignore[misc]
    new = rep.args[1]
    assert bool((new[1:] >= new[:-1]).all()) and new.unique().numel() < new.numel()


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_ties_reach_a_max_over_any_dim(dim: int) -> None:
    """Every dim is paired: a max over the batch, the points or the channels of a point cloud
    ties in the ties variant (the expanded one repeats dim 0's first slice: it ties there too,
    and says the values are to blame)."""
    r = gradlab.check(rf.MaxOverDimAllTies, [matrix(2, 6, 4), dim],
                      reference=rf.amax_dim_reference, checks=["forward", "gradient"])
    failed = {(x.variant, x.hint) for x in r.failures}
    expanded = {("expanded[0]", "value_dependent")} if dim == 0 else set()
    assert failed == {("ties[0]", "ties_only")} | expanded, said(r)


def test_ties_reach_a_max_pool_window() -> None:
    r = gradlab.check(rf.MaxPool2dAllTies, [matrix(1, 2, 4, 6)],
                      reference=rf.max_pool2d_reference, checks=["forward", "gradient"])
    assert {(x.variant, x.hint) for x in r.failures} == {("ties[0]", "ties_only")}, said(r)


def test_ties_only_in_short_dtypes_too() -> None:
    """bfloat16's tolerance times VALUE_LEVEL_FACTOR exceeds a tied max's 100% error: the ties
    moved apart, where the Function passes, decide (not the distance to the bound)."""
    r = gradlab.check(rf.MaxAllTies, [matrix(4, 6)], reference=rf.amax_reference,
                      dtypes=["float32", "bfloat16", "float16"], checks=["forward", "gradient"])
    assert {(x.dtype, x.hint) for x in r.failures} == {
        ("float32", "ties_only"), ("bfloat16", "ties_only"), ("float16", "ties_only")}, said(r)


class PaddedEmbedding(torch.autograd.Function):
    """w[idx] whose padding row gets no gradient (F.embedding's padding_idx); BROKEN when
    `skip_pad` is False: backward accumulates into every row, the padding row's included."""

    skip_pad = False

    @classmethod
    def forward(cls, ctx: Any, idx: torch.Tensor, w: torch.Tensor, padding_idx: int):
        ctx.save_for_backward(idx)
        ctx.rows, ctx.pad = w.shape[0], padding_idx
        return w[idx]

    @classmethod
    def backward(cls, ctx: Any, g: torch.Tensor):
        (idx,) = ctx.saved_tensors
        gw = g.new_zeros(ctx.rows, g.shape[-1]).index_add(0, idx.reshape(-1),
                                                          g.reshape(-1, g.shape[-1]))
        if cls.skip_pad:
            gw[ctx.pad] = 0
        return None, gw, None


class PaddedEmbeddingFixed(PaddedEmbedding):
    skip_pad = True


def embedding_ref(idx: torch.Tensor, w: torch.Tensor, padding_idx: int) -> torch.Tensor:
    return torch.nn.functional.embedding(idx, w, padding_idx=padding_idx)


@pytest.mark.parametrize("pad", [0, 2])
def test_an_index_equal_to_an_int_argument_is_planted(pad: int) -> None:
    # the case's indices never hold the padding row: only the sentinel variant reaches it
    idx = torch.tensor([1, 3, 4]) if pad == 0 else torch.tensor([0, 1, 4])
    w = matrix(5, 3)
    broken = gradlab.check(PaddedEmbedding, [idx, w, pad], reference=embedding_ref)
    assert [(v, c, h) for v, c, h, _ in said(broken)] == [
        ("sentinel[0]", "gradient", "sentinel_only")], said(broken)
    twin = gradlab.check(PaddedEmbeddingFixed, [idx, w, pad], reference=embedding_ref)
    assert twin.passed and any(r.variant == "sentinel[0]" for r in twin.rows), said(twin)


def test_the_planted_value_takes_the_nearest_position_and_keeps_sorted_order() -> None:
    assert planted(torch.tensor([1, 2, 4]), [0]).tolist() == [0, 2, 4]
    assert planted(torch.tensor([0, 2, 5, 9]), [6, 3]).tolist() == [0, 3, 6, 9]
    # present already, or past the largest position (a count, a size): nothing planted
    assert planted(torch.tensor([0, 2, 5]), [2, 7]) is None
    unsorted = planted(torch.tensor([4, 0, 3]), [1])
    assert unsorted is not None and unsorted.tolist() == [4, 1, 3]
    inputs = Inputs([torch.tensor([1, 2]), matrix(3, 2), 0, True], {"ignore": 2})
    changed, out = sentinel_inputs(inputs)
    assert changed == ["0"] and out.args[0].tolist() == [0, 2]  # a bool is not an int here


class WeightedColumnSum(torch.autograd.Function):
    """(x * c[:, None]).sum(0) for fixed unequal weights c; BROKEN when `mean_weight`: backward
    gives every element the mean weight, which totals right over any column of equal values."""

    mean_weight = True

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return (x * WEIGHTS[:, None]).sum(0)

    @classmethod
    def backward(cls, ctx: Any, g: torch.Tensor) -> torch.Tensor:
        c = WEIGHTS.mean().expand(WEIGHTS.shape) if cls.mean_weight else WEIGHTS
        return c[:, None] * g


WEIGHTS = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)


def test_ties_of_a_smooth_function_are_judged_element_by_element() -> None:
    # an input expanded along dim 0 ties each column's values; a smooth function's gradient
    # there is defined, so the share among the ties is no convention (cal's torchdiffeq on a
    # matrix of equal rows had passed as tie_convention)
    x = torch.rand(4, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    r = gradlab.check(WeightedColumnSum, [x.requires_grad_()],
                      reference=lambda t: (t * WEIGHTS[:, None]).sum(0), variants=["expanded"])
    rows = {row.variant: row for row in r.rows if row.check == "gradient"}
    assert rows["expanded[0]"].status == "fail", [(v, x.status, x.reason) for v, x in rows.items()]


class MaxSharedAtTies(torch.autograd.Function):
    """max over the last dim, its gradient shared evenly among tied maxima (amax's
    convention): right, where torch.max(dim) gives it all to the first."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.amax(-1)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        top = (x == x.amax(-1, keepdim=True)).to(x.dtype)
        return g[..., None] * top / top.sum(-1, keepdim=True)


def test_a_tie_is_a_kink_when_the_reference_jumps_either_way() -> None:
    # torch.max(dim) keeps the first tied index: a nudge that makes the first one larger
    # leaves its gradient where it was, the other way moves it (cal7's qpth at duplicated
    # constraints: an active-set reference keeps one constraint's side)
    x = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    r = gradlab.check(MaxSharedAtTies, [x.requires_grad_()],
                      reference=lambda t: t.max(-1).values, variants=["ties"])
    (row,) = [row for row in r.rows if row.check == "gradient" and row.variant.startswith("ties")]
    assert row.status == "pass" and row.reason == "tie_convention", (row.status, row.reason)

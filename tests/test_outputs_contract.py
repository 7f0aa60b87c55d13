"""Outputs that do not require grad, an input written through `.data`, and backward state kept
outside ctx (issue 21): each broken Function flagged with its hint, each correct twin passing,
through `gradlab.check` with defaults and through `gradlab check SPEC`.

- outputs marked non-differentiable, integer or detached have no Jacobian rows (gradcheck's
  rule): a correct batch norm returning its statistics passes; one leaving them
  differentiable where the reference detaches them fails the contract, the reverse warns;
- a forward that doubles its input through `.data` and returns it without ctx.mark_dirty fails
  the contract; the marked one, a clone and no write at all pass;
- backward reading state from the Function class or a global fails the contract after a
  second forward; the same with ctx.save_for_backward, or a global constant, passes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.render.words import HINTS, message

OUTPUTS = DATA / "outputs"
sys.path.insert(0, str(OUTPUTS))
import outputs_functions as of  # noqa: E402

#: broken: (spec, Function, reference, shape, hint) - the contract row fails with the hint
BROKEN = {
    "bn_stats_leaky": (of.BatchStatsLeaky, of.batch_stats_reference, (6, 4),
                       "output_differentiable"),
    "data_write": (of.DoubleDataWrite, of.double_reference, (3, 4), "inplace_input"),
    "state_class": (of.SquareStateOnClass, of.square_reference, (3, 4), "state_outside_ctx"),
    "state_global": (of.SquareStateGlobal, of.square_reference, (3, 4), "state_outside_ctx"),
}
#: correct twins: (spec, Function, reference, shape)
TWINS = {
    "bn_stats": (of.BatchStats, of.batch_stats_reference, (6, 4)),
    "max_index": (of.MaxWithIndex, of.max_with_index_reference, (5, 6)),
    "detached_output": (of.tanh_with_norm, of.tanh_with_norm, (5, 6)),
    "data_write_marked": (of.DoubleDataWriteMarked, of.double_reference, (3, 4)),
    "data_write_clone": (of.DoubleClone, of.double_reference, (3, 4)),
    "data_write_none": (of.Double, of.double_reference, (3, 4)),
    "state_ctx": (of.Square, of.square_reference, (3, 4)),
    "state_shape_cache": (of.SquareShapeCache, of.square_reference, (3, 4)),
}


def example(shape: tuple[int, ...]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).add(0.2)
            .requires_grad_()]


def failing(report: gradlab.Report) -> list[tuple[str, str, str, str]]:
    return [(r.variant, r.check, r.hint, message(r)) for r in report.failures]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_broken_function_fails_the_contract_with_its_hint(name: str) -> None:
    fn, ref, shape, hint = BROKEN[name]
    r = gradlab.check(fn, example(shape), reference=ref)
    assert not r.passed
    base = [x for x in r.rows if x.variant == "base" and x.check == "contract"]
    assert [(x.status, x.hint) for x in base] == [("fail", hint)], failing(r)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_the_correct_twin_passes(name: str) -> None:
    fn, ref, shape = TWINS[name]
    r = gradlab.check(fn, example(shape), reference=ref)
    assert r.passed, failing(r)
    # no warning but forward_ad's (classic Functions without a jvp: tests/test_forward_ad.py)
    assert not [x for x in r.rows if x.status == "warn" and x.check != "forward_ad"], [
        message(x) for x in r.rows]


@pytest.mark.parametrize("name", sorted(BROKEN) + sorted(TWINS))
def test_through_the_cli(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the base rows only: the spec file and the CLI's path to the contract's hint are what
    # this adds; the variants of the same Functions run in the tests above (a full check
    # each here cost 12 runs of every variant again)
    monkeypatch.chdir(OUTPUTS)
    result = CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate", "--variant",
                                      "base", "--report-dir", str(tmp_path)])
    if name in BROKEN:
        assert result.exit_code == 1 and BROKEN[name][3] in result.output, result.output
    else:
        assert result.exit_code == 0, result.output


def test_outputs_the_reference_differentiates_and_the_function_does_not_warn(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A warning, not a failure: the gradients are compared without those outputs' share."""
    r = gradlab.check(of.BatchStats, example((6, 4)), reference=of.batch_stats_differentiable)
    assert r.passed, failing(r)
    warned = [x for x in r.rows if x.status == "warn"]  # (no jvp: information)
    assert [(x.variant, x.check, x.hint) for x in warned] == [
        ("base", "contract", "output_not_differentiable")]
    assert [(f.subject, f.index) for f in warned[0].findings] == [("output", 1), ("output", 2)]
    monkeypatch.chdir(OUTPUTS)
    result = CliRunner().invoke(app, ["check", "bn_stats_undifferentiated.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    # --strict: every warn fails (gradlab.checks.diagnosis.policy), this one too
    strict = gradlab.check(of.BatchStats, example((6, 4)),
                           reference=of.batch_stats_differentiable, strict=True)
    assert [(x.check, x.hint) for x in strict.failures] == [
        ("contract", "output_not_differentiable")]


def detached_tanh(x: torch.Tensor) -> torch.Tensor:
    """BROKEN: computed from detached data (a sparse tensor's `_values()`, say): no gradient."""
    return torch.tanh(x.detach())


def detached_round(x: torch.Tensor) -> torch.Tensor:
    """Correct: round's gradient is zero everywhere, so returning it detached loses nothing."""
    return torch.round(x).detach()


def test_a_function_with_no_differentiable_output_drops_the_gradient() -> None:
    """Every output detached where the reference's carry a nonzero gradient: a failure (the
    bug catalogue's pyg6635); where the reference's gradient through them is zero, a warn."""
    r = gradlab.check(detached_tanh, example((3, 4)), reference=torch.tanh)
    contract = [x for x in r.rows if x.variant == "base" and x.check == "contract"]
    assert [(x.status, x.hint) for x in contract] == [("fail", "gradient_dropped")]
    assert "gets none" in message(contract[0])
    twin = gradlab.check(detached_round, example((3, 4)), reference=torch.round)
    assert twin.passed, failing(twin)
    assert [(x.check, x.hint) for x in twin.rows if x.status == "warn"] == [
        ("contract", "output_not_differentiable")]


def test_a_function_whose_outputs_differ_in_shape_from_the_reference_is_judged() -> None:
    """The bug catalogue's pyg6635 (an uncoalesced sparse tensor's values: 4 where the
    reference merges duplicates into 3) once crashed gradlab itself in two places: the
    repeated-index variant's tolerance search and --explore's conditioning probe."""
    from bug_catalogue import BY_ID

    e = BY_ID["pyg6635-gcn-norm-detached"]
    for kw in ({}, {"checks": ["explore"], "explore": 2.0}):
        r = gradlab.check(e.buggy, e.inputs(), reference=e.reference, **kw)
        assert not [x for x in r.rows if x.reason == "internal_error"], failing(r)
        assert not r.passed


def test_the_differentiability_finding_names_the_output() -> None:
    r = gradlab.check(of.BatchStatsLeaky, example((6, 4)), reference=of.batch_stats_reference,
                      checks=["contract"], variants=False)
    (row,) = r.rows
    assert [(f.subject, f.index, f.hint) for f in row.findings] == [
        ("output", 1, "output_differentiable"), ("output", 2, "output_differentiable")]
    text = message(row)
    assert text.startswith("output 1: ") and "mark_non_differentiable" in text


@pytest.mark.parametrize("mode", ["dense", "fast"])
def test_jacobian_findings_keep_the_functions_own_output_numbers(mode: str) -> None:
    """The statistics come first and have no Jacobian rows; the wrong entries are output 2's."""
    r = gradlab.check(of.StatsFirstHalfGradient, example((6, 4)), checks=["jacobian"],
                      variants=False, mode=mode)
    (row,) = [x for x in r.rows if x.check == "jacobian"]
    assert row.status == "fail" and row.worst, message(row)
    assert {e.output for e in row.worst} == {2}
    assert row.hint == "constant_factor"


def test_the_harms_are_real() -> None:
    """What the contract findings name, shown on the Functions themselves."""
    # statistics left differentiable: a running buffer updated from them holds the graph
    x = example((6, 4))[0]
    _, mean, _ = of.BatchStatsLeaky.apply(x)
    running = torch.zeros(4, dtype=torch.float64)
    running = 0.9 * running + 0.1 * mean
    assert running.requires_grad
    _, mean, _ = of.BatchStats.apply(x)
    assert not (0.9 * running.detach() + 0.1 * mean).requires_grad
    # a .data write unmarked: another reader of the input gets a gradient of the old values
    base = torch.full((3,), 3.0, dtype=torch.float64, requires_grad=True)
    for fn, grad in ((of.DoubleDataWrite, 18.0), (of.DoubleDataWriteMarked, 24.0)):
        h = base.clone()
        y = fn.apply(h)
        # y * h is (2 base)^2: d/dbase = 8 base = 24; unmarked, autograd takes h for the
        # clone of base it was (6 * 2 + 6 * 1 = 18)
        (g,) = torch.autograd.grad((y * h).sum(), [base])
        assert float(g[0]) == grad
    # state on the class: a second forward before the first backward gives its gradient
    a, b = (torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True) for _ in "ab")
    ya = of.SquareStateOnClass.apply(a)
    of.SquareStateOnClass.apply(b * 3)
    (ga,) = torch.autograd.grad(ya.sum(), [a])
    assert torch.equal(ga, 2 * 3 * b.detach())  # b's doubled values, not a's


def test_every_new_hint_is_worded() -> None:
    for hint in ("output_differentiable", "output_not_differentiable", "gradient_dropped",
                 "state_outside_ctx"):
        assert HINTS[hint]


def test_a_second_forward_that_raises_skips_the_state_check() -> None:
    """The shifted values may leave a domain that is not elementwise: then nothing is said."""

    class SortedOnly(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            if not bool((x.diff() >= 0).all()):
                raise ValueError("x must be sorted")
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.linspace(0.1, 1.0, 8, dtype=torch.float64).requires_grad_()
    r = gradlab.check(SortedOnly, [x], reference=of.square_reference, checks=["contract"],
                      variants=False)
    assert [(x.check, x.status) for x in r.rows] == [("contract", "pass")]


class ExpGradInPlace(torch.autograd.Function):
    """exp whose backward writes its gradient into grad_output (a contract bug of its own)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g.mul_(y)


def test_a_grad_output_written_in_place_is_not_taken_for_state_outside_ctx() -> None:
    """The state check's backward gets grad_outputs copied before any backward wrote them."""
    r = gradlab.check(ExpGradInPlace, example((3, 4)), reference=torch.exp,
                      checks=["contract"], variants=False)
    (row,) = r.rows
    assert [f.hint for f in row.findings] == ["inplace_grad_output"], message(row)

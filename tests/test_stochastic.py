"""Stochastic Functions (issue 21, must-have 1): one RNG state per case.

The Function, its reference, each finite difference, the gradient function of second order and
every variant start from the same state of torch's generators, so a correct stochastic Function
(memory-lean dropout replaying its RNG state, dropout keeping its mask, additive noise) passes
with default options, and one whose backward does not replay forward's draws fails with hint
`rng_replay`, through the API and through a spec.  The caller's random stream is left alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.checks.diagnosis.hints import RNG_INDEPENDENT_HINTS, rng_hint
from gradlab.checks.numeric.execute import Run, rng_replayed
from gradlab.cli import app
from gradlab.render.words import HINTS, message
from gradlab.results import FAIL, CheckRow, Finding
from gradlab.torchstate import RngState, case_rng, preserved_rng, replay, rng_now

STOCHASTIC = DATA / "stochastic"
sys.path.insert(0, str(STOCHASTIC))
import stochastic_functions as sf  # noqa: E402

#: name: (Function, reference, number of inputs)
CORRECT: dict[str, tuple[Any, Callable[..., Any], int]] = {
    "lean_dropout": (sf.LeanDropout, sf.dropout_reference, 1),
    "masked_dropout": (sf.MaskedDropout, sf.dropout_reference, 1),
    "noisy_scale": (sf.NoisyScale, sf.noisy_scale_reference, 2),
}
BROKEN = {
    "fresh_mask": (sf.FreshMaskDropout, sf.dropout_reference, 1),
    "late_state": (sf.LateStateDropout, sf.dropout_reference, 1),
    "unmasked": (sf.UnmaskedDropout, sf.dropout_reference, 1),
}


def args(n: int, shape: tuple[int, ...] = (4, 6),
         dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
            .requires_grad_() for _ in range(n)]


def failures(report: gradlab.Report) -> list[tuple[str, str, str, str]]:
    return [(r.variant, r.check, r.hint, message(r)) for r in report.failures]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_correct_stochastic_function_passes(name: str, dtype: torch.dtype) -> None:
    fn, ref, n = CORRECT[name]
    report = gradlab.check(fn, args(n, dtype=dtype), reference=ref)
    assert report.passed, failures(report)
    ran = {(r.variant, r.check) for r in report.rows if r.status == "pass"}
    # every check that applies ran and passed, the layout and shape variants too
    assert {("base", c) for c in ("forward", "gradient", "contract", "jacobian",
                                  "second_order", "autocast")} <= ran
    variants = {r.variant for r in report.rows}
    assert {"transposed[0]", "expanded[0]", "noncontiguous[0]", "magnitude"} <= variants
    assert any(v.startswith("ragged") for v in variants)


def test_channels_last_and_size1_variants_pass_for_a_stochastic_function() -> None:
    """rand_like fills a channels_last tensor in memory order: the reference draws on the
    variant's own layout, so the masks agree."""
    (x,) = args(1, (2, 3, 4, 5), torch.float32)
    report = gradlab.check(sf.LeanDropout, [x], reference=sf.dropout_reference,
                           size1=[[(0, 0)]])
    assert report.passed, failures(report)
    variants = {r.variant for r in report.rows}
    assert "channels_last[0]" in variants and "size1[0.0]" in variants


@pytest.mark.parametrize("fn", [sf.LeanDropout, sf.MaskedDropout], ids=lambda f: f.__name__)
def test_without_a_reference_the_layout_variants_draw_alike(fn: Any) -> None:
    """The Function's own run is the expectation: on a transposed or channels_last input it
    is its run on that layout (rand_like draws in memory order), elsewhere its contiguous run."""
    (x,) = args(1, (2, 3, 4, 5), torch.float32)
    report = gradlab.check(fn, [x])
    assert report.passed, failures(report)
    assert {"transposed[0]", "channels_last[0]", "noncontiguous[0]"} <= {
        r.variant for r in report.rows}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_backward_that_does_not_replay_fails_with_rng_replay(name: str) -> None:
    fn, ref, n = BROKEN[name]
    report = gradlab.check(fn, args(n), reference=ref)
    assert not report.passed
    failed = {(r.variant, r.check): r.hint for r in report.failures}
    assert failed[("base", "gradient")] == "rng_replay"
    assert failed[("base", "jacobian")] == "rng_replay"
    # no other cause named: every failing row says rng_replay, no finding a chance pattern
    assert set(failed.values()) == {"rng_replay"}, failures(report)
    for r in report.failures:
        assert all(f.hint in ("", "rng_replay") and f.pattern is None for f in r.findings)
    assert "replay" in message(next(r for r in report.failures if r.check == "gradient"))


def test_a_stochastic_function_wrong_for_another_reason_gets_no_rng_hint(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Additive noise: neither its backward nor the right one needs the draws, so they cannot
    be what is wrong (a second run from another RNG state gives the same gradients)."""
    report = gradlab.check(sf.NoisyScaleWrongGrad, args(2), reference=sf.noisy_scale_reference)
    failed = {(r.variant, r.check): r.hint for r in report.failures}
    assert ("base", "gradient") in failed and ("base", "jacobian") in failed
    assert "rng_replay" not in failed.values(), failures(report)
    monkeypatch.chdir(STOCHASTIC)
    result = CliRunner().invoke(app, ["check", "noisy_wrong_grad.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    assert result.exit_code == 1 and "rng_replay" not in result.output, result.output


@pytest.mark.parametrize("name", sorted(CORRECT) + sorted(BROKEN))
def test_through_a_spec(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(STOCHASTIC)
    result = CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    if name in CORRECT:
        assert result.exit_code == 0, result.output
        assert "rng_replay" not in result.output
    else:
        assert result.exit_code == 1, result.output
        assert "rng_replay" in result.output


def test_the_callers_random_stream_is_unchanged_by_a_check() -> None:
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    for fn, ref, n in (*CORRECT.values(), *BROKEN.values()):
        gradlab.check(fn, args(n), reference=ref, variants=False)
    assert torch.equal(torch.rand(5), expected)


def test_a_case_draws_the_same_numbers_run_after_run() -> None:
    """The case's state comes from its seed, not from the caller's stream."""
    outs = []
    for caller_seed in (1, 2):
        torch.manual_seed(caller_seed)
        report = gradlab.check(sf.FreshMaskDropout, args(1), reference=sf.dropout_reference,
                               checks=["gradient"], variants=False)
        outs.append([r.max_abs_err for r in report.rows])
    assert outs[0] == outs[1]


def test_case_rng_replays_one_state_and_preserved_rng_gives_the_callers_back() -> None:
    torch.manual_seed(5)
    caller = torch.get_rng_state()
    replay()  # outside a case: nothing to replay
    assert torch.equal(torch.get_rng_state(), caller)
    with preserved_rng(), case_rng(42, "cpu") as state:
        first = torch.rand(3)
        assert not state.same(rng_now())  # drawing moved the generator
        replay()
        assert state.same(rng_now())
        assert torch.equal(torch.rand(3), first)
        with case_rng(7, "cpu"):  # an inner case replays its own state
            inner = torch.rand(3)
            replay()
            assert torch.equal(torch.rand(3), inner)
        replay()
        assert torch.equal(torch.rand(3), first)
    assert torch.equal(torch.get_rng_state(), caller)
    with preserved_rng(), case_rng(42, "cpu"):
        assert torch.equal(torch.rand(3), first)  # the same seed, the same numbers


def test_rng_state_compares_cpu_and_cuda_states() -> None:
    cpu = torch.get_rng_state()
    assert RngState(cpu).same(RngState(cpu.clone()))
    moved = cpu.clone()
    moved[-1] ^= 1
    assert not RngState(cpu).same(RngState(moved))
    # CUDA states, where both have them (logic only: tensors stand in for the states)
    a = RngState(cpu, [torch.tensor([1, 2], dtype=torch.uint8)])
    b = RngState(cpu, [torch.tensor([1, 3], dtype=torch.uint8)])
    assert not a.same(b) and a.same(a) and a.same(RngState(cpu))


@pytest.mark.cuda
def test_case_rng_replays_the_cuda_generator() -> None:
    with preserved_rng(), case_rng(3, "cuda") as state:
        assert state.cuda is not None
        first = torch.rand(4, device="cuda")
        replay()
        assert torch.equal(torch.rand(4, device="cuda"), first)


@pytest.mark.cuda
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_correct_stochastic_function_passes_on_a_gpu_machine(device: str) -> None:
    """On CUDA too; and the cuda capability (the Function on the CPU against CUDA) says its
    values were not compared: the two generators draw other numbers."""
    x = args(1)[0].detach().to(device).requires_grad_()
    report = gradlab.check(sf.LeanDropout, [x], reference=sf.dropout_reference)
    assert report.passed, failures(report)
    notes = [r.note for r in report.rows if r.variant == "cuda" and r.check == "capabilities"]
    assert all("not compared" in n for n in notes)


def row(hint: str, check: str = "gradient") -> CheckRow:
    f = Finding("input", 0, hint)
    return CheckRow("op", "case", "float64", "cpu", "base", check, FAIL, hint=hint,
                    findings=[f])


@pytest.mark.parametrize(("drew", "drew_backward", "hint", "want"), [
    (False, False, "", ""),                              # no random numbers: nothing to say
    (False, False, "index_range", "index_range"),
    (True, False, "", "rng_replay"),                     # forward drew, no other cause
    (True, False, "index_range", "rng_replay"),          # a chance pattern of two masks
    (True, False, "constant_factor", "constant_factor"),  # a cause a mask cannot imitate
    (True, False, "missing", "missing"),
    (True, True, "constant_factor", "rng_replay"),       # backward drew: decisive
    (False, True, "", "rng_replay"),
])
def test_the_rng_replay_decision(drew: bool, drew_backward: bool, hint: str,
                                 want: str) -> None:
    run = Run([], [], drew=drew, drew_backward=drew_backward)
    assert rng_hint(run, hint) == want
    r = row(hint)
    rng_replayed([r], run)
    assert r.hint == want
    # a finding keeps a hint a mask cannot imitate, and loses one it can
    chance = want == "rng_replay" and hint not in RNG_INDEPENDENT_HINTS
    assert r.findings[0].hint == ("" if chance else hint)


def test_draws_no_gradient_follows_are_no_cause() -> None:
    """Forward drew, but no gradient changes with the draws: the hint stays (asked once)."""
    asked: list[int] = []

    def follows() -> bool:
        asked.append(1)
        return False

    run = Run([], [], drew=True)
    assert rng_hint(run, "", follows) == "" and rng_hint(run, "index_range", follows) == \
        "index_range"
    rows = [row(""), row("")]
    rng_replayed(rows, run, follows)
    assert [r.hint for r in rows] == ["", ""] and len(asked) == 3
    # a backward that drew is decisive: nothing asked
    assert rng_hint(Run([], [], drew=True, drew_backward=True), "", follows) == "rng_replay"
    assert len(asked) == 3


def test_contract_findings_of_a_drawing_backward_are_rng_replay() -> None:
    r = row("state_outside_ctx", "contract")
    rng_replayed([r], Run([], [], drew=True))
    assert r.hint == "state_outside_ctx"  # backward drew nothing: another cause
    rng_replayed([r], Run([], [], drew=True, drew_backward=True))
    assert r.hint == "rng_replay" and r.findings[0].hint == "rng_replay"


def test_rng_replay_is_worded() -> None:
    assert "replay" in HINTS["rng_replay"]

"""The small and special value variants (gradlab.checks.families.values): a backward that cancels at
small magnitudes, a removable singularity at a planted zero, and a convention at a kink (relu'(0))
that is no bug; each through `gradlab.check` and through a spec, beside a correct twin."""

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
from gradlab.errors import SpecError
from gradlab.model import TensorArg
from gradlab.render.words import message
from gradlab.spec.tensors import parse_tensor

VALUES = DATA / "values"
sys.path.insert(0, str(VALUES))
import value_functions as vf  # noqa: E402

#: (broken, twin, reference, dtype, hint, broken spec, twin spec)
CASES = {
    "small": (vf.LogExpm1Naive, vf.LogExpm1, vf.log_expm1_reference, torch.float32,
              "small_only", "expm1_naive", "expm1_stable"),
    "special": (vf.SincNaive, vf.Sinc, vf.sinc_reference, torch.float64, "special_only",
                "sinc_naive", "sinc_safe"),
}


def example(dtype: torch.dtype, low: float = -1.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(5, 6, generator=gen, dtype=torch.float64) * (1.0 - low) + low
    return [x.to(dtype).requires_grad_()]


def failures(r: Any) -> list[tuple[str, str, str, str]]:
    return [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


#: The small case's fixed float32 tolerance (the strict table's 1e-3): the machinery that
#: tells a failure only at small values apart.  At the defaults (torch.testing's float32
#: table, 100x tighter) the naive backward still fails only in the small variant, but its
#: halfway run fails too, so the hint is value_dependent rather than small_only.
STRICT = {"small": True, "special": False}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_broken_function_fails_only_in_its_variant(name: str) -> None:
    broken, _, ref, dtype, hint, _, _ = CASES[name]
    r = gradlab.check(broken, example(dtype, 0.1 if name == "small" else -1.0), reference=ref,
                      strict_tolerances=STRICT[name])
    assert not r.passed
    assert [(x.variant, x.check, x.hint) for x in r.failures] == [(name, "gradient", hint)], \
        failures(r)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_correct_twin_passes(name: str) -> None:
    _, twin, ref, dtype, _, _, _ = CASES[name]
    r = gradlab.check(twin, example(dtype, 0.1 if name == "small" else -1.0), reference=ref,
                      special={0: [1.0, -1.0]})
    assert r.passed, failures(r)
    assert any(x.variant == name for x in r.rows)


@pytest.mark.parametrize("name", sorted(CASES))
def test_through_the_cli(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(VALUES)
    *_, hint, broken_spec, twin_spec = CASES[name]
    broken = CliRunner().invoke(app, ["check", f"{broken_spec}.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    assert broken.exit_code == 1 and hint in broken.output, broken.output
    twin = CliRunner().invoke(app, ["check", f"{twin_spec}.yaml", "--no-isolate",
                                    "--report-dir", str(tmp_path)])
    assert twin.exit_code == 0, twin.output


def test_a_convention_at_a_kink_passes_with_a_note(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """relu'(0) = 1 (x >= 0) against torch.relu's 0: the planted zeros are a kink of the
    reference, the Function's value lies between its one-sided slopes: left out, said so."""
    r = gradlab.check(vf.ReluAtZeroOne, example(torch.float64), reference=torch.relu)
    assert r.passed, failures(r)
    row = next(x for x in r.rows if x.variant == "special" and x.check == "gradient")
    assert row.reason == "special_kink" and "left out" in row.note
    # in bfloat16 the Function's g rounds by up to 0.4%: still between the slopes
    r = gradlab.check(vf.ReluAtZeroOne, example(torch.bfloat16), reference=torch.relu)
    assert r.passed, failures(r)
    monkeypatch.chdir(VALUES)
    out = CliRunner().invoke(app, ["check", "relu_convention.yaml", "--no-isolate",
                                   "--report-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output


def test_a_value_outside_the_kinks_slopes_still_fails() -> None:
    """A gradient at 0 outside [left, right] slope (relu'(0) = 2) is no convention."""
    class ReluTwoAtZero(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return g * ((x > 0).to(g.dtype) + 2 * (x == 0).to(g.dtype))

    r = gradlab.check(ReluTwoAtZero, example(torch.float64), reference=torch.relu)
    assert [(x.variant, x.hint) for x in r.failures] == [("special", "special_only")], \
        failures(r)


def test_the_variants_apply_only_where_they_change_something() -> None:
    """No floating differentiable input: neither variant; a fixed-values spec tensor is not
    planted."""
    idx = torch.tensor([0, 2, 1])
    r = gradlab.check(lambda x, i: x[i], [example(torch.float64)[0], idx],
                      reference=lambda x, i: x[i])
    assert {x.variant for x in r.rows} >= {"small", "special"}
    r = gradlab.check(lambda x: x * 2, [torch.zeros(3, dtype=torch.float64,
                                                    requires_grad=True)],
                      reference=lambda x: x * 2)
    assert "special" not in {x.variant for x in r.rows}  # every value is 0 already
    assert "small" not in {x.variant for x in r.rows}  # nothing to scale


def test_the_spec_key_and_the_api_argument_are_checked() -> None:
    assert parse_tensor({"shape": [3], "special": [0, 1.5]}, "args[0]").special == (0.0, 1.5)
    assert TensorArg((3,)).special == ()
    for bad, words in (([], "list of numbers"), (["a"], "expected a number"),
                       ([float("nan")], "finite")):
        with pytest.raises(SpecError, match=words):
            parse_tensor({"shape": [3], "special": bad}, "args[0]")
    with pytest.raises(SpecError, match="drawn floating"):
        parse_tensor({"shape": [3], "dtype": "int64", "high": 4, "special": [1]}, "args[0]")
    with pytest.raises(SpecError, match="drawn floating"):
        parse_tensor({"values": [1.0, 2.0], "special": [1]}, "args[0]")
    with pytest.raises(ValueError, match="no argument index"):
        gradlab.check(torch.exp, example(torch.float64), reference=torch.exp, special={3: [1]})
    with pytest.raises(ValueError, match="no floating tensor"):
        gradlab.check(lambda x, n: x * n, [example(torch.float64)[0], 2],
                      reference=lambda x, n: x * n, special={1: [1]})
    with pytest.raises(ValueError, match="finite"):
        gradlab.check(torch.exp, example(torch.float64), reference=torch.exp,
                      special={0: [float("inf")]})


def test_a_cancellation_a_few_tolerances_off_is_small_only_not_value_dependent() -> None:
    """Inputs in [0.7, 1] scale to [7e-7, 1e-6] in float32: the naive backward is 3% off there
    (30 tolerances, within VALUE_LEVEL_FACTOR), right at the halfway scale: small_only."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(5, 6, generator=gen, dtype=torch.float64) * 0.3 + 0.7
    r = gradlab.check(vf.LogExpm1Naive, [x.float().requires_grad_()],
                      reference=vf.log_expm1_reference, strict_tolerances=True)
    assert [(x.variant, x.hint) for x in r.failures] == [("small", "small_only")], failures(r)


def test_listed_values_are_planted_in_a_constant_input_too() -> None:
    """x / w with w constant: w is planted only with the values listed for it (no 0: w is no
    differentiated input), and a correct division passes."""
    x = example(torch.float64)[0]
    w = (torch.rand(5, 6, dtype=torch.float64) + 0.5)
    r = gradlab.check(lambda a, b: a / b, [x, w], reference=lambda a, b: a / b)
    assert "special" in {x.variant for x in r.rows}  # x gets its zeros
    from gradlab.cases import Inputs
    from gradlab.checks.families.values import special_inputs
    from gradlab.model import Case
    planted = special_inputs(Case("c", (x, w), special={1: (2.0,)}), Inputs([x, w]))
    assert planted is not None and int((planted.args[1] == 2.0).sum()) == 3
    assert not bool((planted.args[1] == 0).any()) and not planted.args[1].requires_grad
    r = gradlab.check(lambda a, b: a / b, [x, w], reference=lambda a, b: a / b,
                      special={1: [2.0]})
    assert r.passed, failures(r)


# --- scale_limited: an absolute constant by design warns, a cancellation fails ---------------

class DampedIdentity(torch.autograd.Function):
    """x -> x with a backward damped as a pseudo-inverse is (roma's 1 / (s_k + s_l), qpth's
    clamp): g * x^2 / (x^2 + EPS^2).  Right to 1e-10 at the user's values (|x| ~ 1); at the
    small variant's 1e-12 the gradient is ~0 instead of g, alike in float32 and float64."""

    EPS = 1e-5

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * x * x / (x * x + DampedIdentity.EPS ** 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_damping_constant_by_design_warns_at_the_small_variant(dtype: torch.dtype) -> None:
    x = (torch.rand(4, 5, dtype=torch.float64) + 0.5).to(dtype).requires_grad_()
    r = gradlab.check(DampedIdentity, [x], reference=lambda t: t.clone(),
                      checks=["forward", "gradient"])
    assert r.passed, failures(r)
    (row,) = [x for x in r.rows if x.variant == "small" and x.check == "gradient"]
    assert (row.status, row.reason) == ("warn", "scale_limited"), failures(r)
    assert "absolute scale by design" in message(row)
    # not rounding's (as far off in float64): no cancellation named (float64: the method's
    # constant; float32: the level measured, value_dependent)
    assert "cancellation" not in message(row)
    assert dtype == torch.float32 or "an absolute constant" in message(row)
    strict = gradlab.check(DampedIdentity, [x], reference=lambda t: t.clone(),
                           checks=["forward", "gradient"], strict=True)
    assert not strict.passed


def test_a_cancellation_at_the_small_variant_still_fails() -> None:
    # the naive 1 / (exp(x) - 1): 5-16% wrong in float32 at 1e-6, right in float64 there
    r = gradlab.check(vf.LogExpm1Naive, example(torch.float32, 0.1),
                      reference=vf.log_expm1_reference)
    (row,) = [x for x in r.rows if x.variant == "small" and x.check == "gradient"]
    assert row.status == "fail" and row.reason != "scale_limited", failures(r)

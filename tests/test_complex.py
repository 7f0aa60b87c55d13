"""Complex inputs and outputs checked as PyTorch's convention asks (issue 22 item 2): each
complex Function's broken version fails (the jacobian and gradient rows, with the `conjugate`
hint where one conjugation would fix it), its correct twin passes, through the API and through
a spec (`dtype: complex128`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.render.words import message

HERE = DATA / "complex"
sys.path.insert(0, str(HERE))
import complex_functions as cf  # noqa: E402


def complex_pair(dtype: torch.dtype = torch.complex128) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return [torch.randn(3, 4, dtype=dtype, generator=gen) for _ in range(2)]


def real_signal() -> list[torch.Tensor]:
    return [torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))]


def one_complex() -> list[torch.Tensor]:
    return complex_pair()[:1]


#: name: (broken, twin, reference, example, hint of the broken one's jacobian row)
CASES = {
    "mul_noconj": (cf.MulNoConj.apply, cf.Mul.apply, cf.mul_reference, complex_pair,
                   "conjugate"),
    "abs2_conj": (cf.Abs2Conj.apply, cf.Abs2.apply, cf.abs2_reference, one_complex,
                  "conjugate"),
    "rfft_wrong": (cf.RfftWrong.apply, cf.Rfft.apply, cf.rfft_reference, real_signal, ""),
}
#: each broken spec's correct twin
TWINS = {"mul_noconj": "mul", "abs2_conj": "abs2", "rfft_wrong": "rfft"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_broken_function_fails(name: str) -> None:
    broken, _, ref, example, hint = CASES[name]
    r = gradlab.check(broken, example(), reference=ref)
    rows = {(x.check, x.variant): x for x in r.rows}
    assert not r.passed
    assert rows["jacobian", "base"].status == "fail"
    assert rows["gradient", "base"].status == "fail"
    assert rows["jacobian", "base"].hint == hint, message(rows["jacobian", "base"])
    assert rows["gradient", "base"].hint == hint
    assert not [x for x in r.rows if x.status == "error"], [message(x) for x in r.rows]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_correct_twin_passes(name: str) -> None:
    _, twin, ref, example, _ = CASES[name]
    r = gradlab.check(twin, example(), reference=ref)
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]
    rows = {(x.check, x.variant): x for x in r.rows}
    assert rows["jacobian", "base"].status == "pass"
    assert rows["second_order", "base"].status == "pass"  # through the complex gradients
    assert rows["autocast", "base"].reason == ("autocast_complex" if name != "rfft_wrong"
                                               else "")


@pytest.mark.parametrize("mode", ["dense", "fast"])
def test_both_jacobian_modes_see_the_missing_conjugate(mode: str) -> None:
    for fn, passes in ((cf.MulNoConj.apply, False), (cf.Mul.apply, True)):
        r = gradlab.check(fn, complex_pair(), reference=cf.mul_reference, mode=mode,
                          checks=["jacobian"])
        assert r.passed is passes, [message(x) for x in r.rows]


def test_complex64_examples_run_in_their_dtype_and_are_checked_in_complex128() -> None:
    r = gradlab.check(cf.Mul.apply, complex_pair(torch.complex64), reference=cf.mul_reference)
    assert r.passed, [message(x) for x in r.failures]
    rows = {(x.check, x.variant): x for x in r.rows}
    assert rows["gradient", "base"].dtype == "float32"
    assert rows["jacobian", "base"].dtype == "complex128"
    bad = gradlab.check(cf.MulNoConj.apply, complex_pair(torch.complex64),
                        reference=cf.mul_reference)
    assert not bad.passed


def test_forward_mode_of_a_complex_function_is_checked() -> None:
    good = gradlab.check(cf.MulJvp.apply, complex_pair(), reference=cf.mul_reference)
    assert good.passed, [message(x) for x in good.failures]
    assert {x.check: x.status for x in good.rows}["forward_ad"] == "pass"
    bad = gradlab.check(cf.MulJvpWrong.apply, complex_pair(), reference=cf.mul_reference)
    row = next(x for x in bad.rows if x.check == "forward_ad")
    assert row.status == "fail" and row.hint == "forward_ad_only"


def test_a_complex_spec_dtype_is_accepted() -> None:
    from gradlab.model import TENSOR_DTYPES, canonical_dtype

    assert canonical_dtype("cdouble", TENSOR_DTYPES) == "complex128"
    assert canonical_dtype("complex64", TENSOR_DTYPES) == "complex64"
    with pytest.raises(ValueError):
        canonical_dtype("complex64")  # a run's dtype stays real


@pytest.mark.parametrize("name", sorted(TWINS))
def test_through_specs(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(HERE)
    broken = CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    assert broken.exit_code == 1, broken.output
    assert CASES[name][4] in broken.output
    twin = CliRunner().invoke(app, ["check", f"{TWINS[name]}.yaml", "--no-isolate",
                                    "--report-dir", str(tmp_path)])
    assert twin.exit_code == 0, twin.output


def test_real_and_complex_inputs_together_and_torch_ops_pass() -> None:
    """No false alarm on torch's own complex ops: a real scale times a complex tensor (the
    special variant plants in the real one only), an FFT, a function that is not
    holomorphic, a real and a complex output, a complex tensor made of two real ones."""
    gen = torch.Generator().manual_seed(7)
    z = torch.randn(4, 5, dtype=torch.complex128, generator=gen)
    s = torch.randn(4, 5, dtype=torch.float64, generator=gen)
    cases = [(lambda s, z: (s * z).exp(), [s, z]), (lambda z: torch.fft.fft(z), [z]),
             (lambda z, w: z.conj() * w + z.abs(), [z, z.flip(0)]),
             (lambda z: (z.real * 2, z * z), [z]),
             (lambda a, b: torch.complex(a, b) ** 2, [s, s.flip(1)])]
    for fn, args in cases:
        r = gradlab.check(fn, args, reference=fn)
        assert r.passed, [message(x) for x in r.failures]

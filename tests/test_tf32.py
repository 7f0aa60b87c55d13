"""TF32 named, not guessed (issue 28 item 3), on a CPU machine: the CUDA fakes
(tests/cuda_fakes.py) plus a fake TF32 that rounds float32 convolution and matmul inputs to
TF32's 10-bit mantissa when torch's TF32 setting is on, as cuDNN and cuBLAS do on a GPU.

A float32 CUDA failure that disappears with TF32 off gets the hint `tf32`; a real float32 bug
keeps failing with its own hint; the environment record and every CUDA report state the
settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import run_cli
from cuda_fakes import CudaOnCpu, FakeCuda, cuda_on_cpu, fake_tf32, round_to_tf32
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab import tf32
from gradlab.envinfo import environment
from gradlab.render.markdown import summary_markdown
from gradlab.render.words import message
from gradlab.results import FAIL


@pytest.fixture(autouse=True)
def settings_kept() -> Iterator[None]:
    saved = tf32.settings()
    yield
    assert tf32.settings() == saved  # every test (and gradlab) gives TF32's settings back


# -- the settings --------------------------------------------------------------------------------


def test_the_environment_record_states_the_tf32_settings() -> None:
    env = environment()
    assert env["tf32_cudnn"] is torch.backends.cudnn.allow_tf32
    assert env["tf32_matmul"] is torch.backends.cuda.matmul.allow_tf32
    assert env["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    if hasattr(torch.backends.cudnn, "conv"):  # torch 2.9's fp32_precision API
        assert env["fp32_precision_cudnn_conv"] == torch.backends.cudnn.conv.fp32_precision


SETUPS = {
    "defaults": lambda: None,
    "high matmul precision": lambda: torch.set_float32_matmul_precision("high"),
    "legacy flags": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
    "new api, mixed": lambda: setattr(torch.backends.cudnn.conv, "fp32_precision", "ieee"),
}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_disabled_turns_every_setting_off_and_gives_each_back(setup: str) -> None:
    if setup == "new api, mixed" and not hasattr(torch.backends.cudnn, "conv"):
        pytest.skip("torch has no fp32_precision settings")
    saved = tf32.settings()
    try:
        SETUPS[setup]()
        before = tf32.settings()
        assert tf32.enabled(before)
        with tf32.disabled():
            assert not tf32.enabled()
        assert tf32.settings() == before
    finally:
        tf32.restore(saved)


def test_the_fake_rounds_only_with_tf32_on() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 16, generator=gen), torch.randn(16, 4, generator=gen)
    exact = (a.double() @ b.double())
    assert (round_to_tf32(a) - a).abs().max() > 0
    with fake_tf32(on=True) as mode:
        rounded = a @ b
    assert mode.rounded == 1
    with fake_tf32(on=False) as mode:
        plain = a @ b
    assert mode.rounded == 0
    assert (rounded.double() - exact).abs().max() > 100 * (plain.double() - exact).abs().max()


# -- the tf32 hint: a broken Function beside its twin --------------------------------------------


class MatmulFunction(Function):
    """A correct matmul Function: cuBLAS (TF32 when allowed) in forward and backward."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return g @ b.T, a.T @ g


class MatmulFloat32Bug(MatmulFunction):
    """A real float32 bug: the float32 path of backward (a kernel of its own) drops the last
    row of a's gradient; float64 is right."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        ga = g @ b.T
        if ga.dtype == torch.float32:
            ga = torch.cat([ga[:-1], torch.zeros_like(ga[-1:])])
        return ga, a.T @ g


def elementwise_matmul(a: Tensor, b: Tensor) -> Tensor:
    """The reference: products summed elementwise (no cuBLAS, no TF32)."""
    return (a[:, :, None] * b[None, :, :]).sum(1)


def matmul_args() -> list[Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(6, 64, generator=gen, dtype=torch.float64).requires_grad_(),
            torch.randn(64, 5, generator=gen, dtype=torch.float64).requires_grad_()]


def check_on_cuda(fn: Any, **kw: Any) -> Any:
    return gradlab.check(fn, matmul_args(), reference=elementwise_matmul, devices=["cuda"],
                         dtypes=["float32"], checks=["forward", "gradient"], **kw)


def failing(report: Any) -> list[tuple[str, str, str]]:
    return [(r.variant, r.check, r.hint) for r in report.rows if r.status == FAIL]


def test_a_failure_that_tf32_off_removes_is_named_tf32(fake: FakeCuda,
                                                       on_cpu: CudaOnCpu) -> None:
    with fake_tf32(on=True) as mode:
        report = check_on_cuda(MatmulFunction)
    assert mode.rounded > 0
    rows = [r for r in report.rows if r.status == FAIL]
    assert rows, "TF32's rounding should exceed float32's tolerance here"
    assert {r.hint for r in rows} == {"tf32"}, failing(report)
    assert all(f.hint == "tf32" for r in rows for f in r.findings)
    words = message(rows[0])
    assert "torch.backends.cudnn.allow_tf32 = False" in words
    assert "torch.backends.cuda.matmul.allow_tf32 = False" in words


def test_the_twin_with_tf32_off_passes(fake: FakeCuda, on_cpu: CudaOnCpu) -> None:
    with fake_tf32(on=False) as mode:
        report = check_on_cuda(MatmulFunction)
    assert report.passed, failing(report)
    assert mode.rounded == 0


@pytest.mark.parametrize("on", [True, False])
def test_a_real_float32_bug_still_fails_and_is_not_blamed_on_tf32(
        fake: FakeCuda, on_cpu: CudaOnCpu, on: bool) -> None:
    with fake_tf32(on=on):
        report = check_on_cuda(MatmulFloat32Bug)
    rows = [r for r in report.rows if r.status == FAIL and r.check == "gradient"]
    assert rows, failing(report)
    base = next(r for r in rows if r.variant == "base")
    assert base.hint not in ("tf32", ""), failing(report)
    # a's gradient is wrong in every setting; with TF32 on, b's may be off too: the Function's
    # matmul rounds to TF32 where this elementwise reference does not, more than the criterion
    # allows (b's own finding, a TF32 deviation, not the planted bug's)
    indices = [f.index for f in base.findings]
    assert indices[0] == 0 and set(indices) <= ({0, 1} if on else {0}), indices


def test_a_cpu_failure_is_never_rerun_for_tf32() -> None:
    with fake_tf32(on=True):
        report = gradlab.check(MatmulFunction, matmul_args(), reference=elementwise_matmul,
                               dtypes=["float32"], checks=["forward", "gradient"])
    assert all(r.hint != "tf32" for r in report.rows)


# -- every CUDA report states the settings -------------------------------------------------------


def test_a_cuda_report_states_the_tf32_settings(fake: FakeCuda, on_cpu: CudaOnCpu,
                                                capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    code, out, _ = run_cli(["check", "exp", "--device", "cuda", "--no-isolate",
                            "--report-dir", str(tmp_path), "--summary-md",
                            str(tmp_path / "s.md")], capsys)
    assert code == 0, out
    said = (f"TF32: torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
            f"torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
            f"float32_matmul_precision={torch.get_float32_matmul_precision()}")
    assert said in " ".join(out.split()), out
    assert said in (tmp_path / "s.md").read_text()


def test_a_cpu_report_does_not(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = gradlab.check(torch.exp, [matmul_args()[0]], reference=torch.exp,
                           checks=["forward"])
    assert "TF32" not in summary_markdown(report)


# -- the bundled specs on the fake GPU with TF32 on ----------------------------------------------


@pytest.fixture(scope="module")
def bundled_on_tf32() -> Any:
    """`gradlab check specs/ --device cuda --dtype float32` on the fakes with TF32 on for
    convolutions and matmuls.  float32 only: TF32 rounds nothing else (the float64 jacobian
    and second_order rows still run), and the float64 cases are the CPU run's again: all 4,105
    calls TF32 rounds in the whole run are made here, in 60% of its time."""
    from gradlab.checks.run import driver
    from gradlab.checks.run.options import Options
    from gradlab.spec import resolve

    with pytest.MonkeyPatch.context() as mp:
        FakeCuda().install(mp)
        with cuda_on_cpu(), fake_tf32(on=True) as mode:
            report = driver.run(resolve("specs/"), Options(devices=("cuda",),
                                                           dtypes=("float32",)))
    assert mode.rounded > 0  # the convolutions and matmuls ran in (fake) TF32
    return report


@pytest.mark.xdist_group("bundled_tf32")
def test_every_bundled_failure_with_tf32_on_is_named_tf32(bundled_on_tf32: Any) -> None:
    """Whatever the low-precision criterion passes, what still fails is TF32's and says so
    (without the criterion, at float32's fixed tolerance: every float32 conv, modconv, blur
    and linear case, all `tf32`)."""
    rows = [r for r in bundled_on_tf32.rows if r.failed]
    assert all(r.hint == "tf32" for r in rows), failing(bundled_on_tf32)
    assert all(r.dtype == "float32" for r in rows)


@pytest.mark.xdist_group("bundled_tf32")
def test_the_bundled_specs_pass_on_the_fake_gpu_with_tf32_on(bundled_on_tf32: Any) -> None:
    assert bundled_on_tf32.passed, failing(bundled_on_tf32)[:20]


# -- the reference's own error in the Function's layout on a GPU ---------------------------------


@pytest.mark.parametrize("gpu", [True, False])
def test_on_a_gpu_the_reference_measures_its_own_error_in_the_functions_layout(
        monkeypatch: pytest.MonkeyPatch, gpu: bool) -> None:
    """cuDNN picks its algorithm per layout: on an H200 with TF32 on, conv2d's grad_input was
    1.9e-6 off the float64 gold contiguous and 3.5e-3 channels_last.  So on a GPU the reference
    runs in the variant's layout (a channels_last variant is not judged against a contiguous
    run's error); off a GPU on contiguous copies, as before."""
    from gradlab.cases import Inputs, plain_copy
    from gradlab.checks.numeric import lowprec

    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last).requires_grad_()
    assert plain_copy(Inputs([x]), keep_layout=True).args[0].stride() == x.stride()
    assert plain_copy(Inputs([x])).args[0].is_contiguous()

    seen: list[tuple[int, ...]] = []

    def reference(t: Tensor) -> Tensor:
        seen.append(t.stride())
        return t * 2

    monkeypatch.setattr(lowprec, "on_gpu", lambda inputs: gpu)
    op = gradlab.model.OpDef(name="twice", summary="2x", function=reference, reference=reference,
                             second_order=True)
    lowprec.reference_in_dtype(op, Inputs([x]), [torch.ones(2, 3, 4, 5, dtype=torch.float64)],
                               torch.Generator().manual_seed(0))
    assert seen == [x.stride() if gpu else x.contiguous().stride()]

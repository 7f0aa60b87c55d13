"""gradlab's CUDA-only branches, run on a CPU machine with a fake torch.cuda (tests/cuda_fakes.py).

Each branch that only a `cuda` device takes (RNG state of the case replay, synchronisation,
memory statistics, the environment's device name, device placement of inputs, grad_outputs and
references, the `cuda` capability, the CLI's device checks) runs here, so a NameError, a
misspelt torch.cuda attribute or a wrong call signature fails in the normal suite.  What fakes
cannot show is listed in docs/gpu.md ("Paths that cannot be covered with fakes").
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA, run_cli
from cuda_fakes import FAKE_CUDA_VERSION, FAKE_GPU_NAME, CudaOnCpu, FakeCuda

import gradlab
from gradlab import bench
from gradlab.bench.memory import cuda_peak
from gradlab.bench.phase import release
from gradlab.bench.runner import default_sync
from gradlab.bench.timing import Task
from gradlab.checks.numeric.capabilities import STOCHASTIC_CUDA
from gradlab.cli.app import parse_devices, require_devices
from gradlab.cli.check import auto_jobs
from gradlab.envinfo import environment
from gradlab.model import Case, OpDef, Target, TensorArg
from gradlab.results.status import PASS, SKIP
from gradlab.torchstate import (
    RngState,
    case_rng,
    preserved_rng,
    replay,
    rng_device,
    rng_now,
    seed_generators,
)

#: Bench settings that make a bench case take milliseconds (the numbers are not the point).
FAST = bench.BenchOptions(min_time=1e-4, min_samples=3, max_time=0.0, warmup_time=0.0,
                          resamples=50, steady_heap=False)


def x64(*shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.rand(shape, generator=gen, dtype=torch.float64).requires_grad_()


def failures(report: Any) -> list[str]:
    return [f"{r.variant}/{r.check}: {r.status} {r.reason} {r.hint} {r.note}"
            for r in report.rows if r.status != PASS]


# -- the CUDA generator state (issue 15's replay) ----------------------------------------------


def test_rng_state_on_cuda_reads_restores_and_compares_the_cuda_generators(
        fake: FakeCuda) -> None:
    state = RngState.now("cuda")
    assert state.cuda is not None and fake.count("get_rng_state_all") == 1
    fake.draw()
    assert not state.same(RngState.now("cuda"))
    state.restore()
    assert fake.count("set_rng_state_all") == 1 and state.same(RngState.now("cuda"))


def test_preserved_rng_gives_the_cuda_state_back(fake: FakeCuda) -> None:
    before = fake.rng[0].clone()
    with preserved_rng():
        fake.draw()
        torch.rand(3)
    assert torch.equal(fake.rng[0], before)


def test_case_rng_on_cuda_seeds_and_replays_the_cuda_generator(fake: FakeCuda) -> None:
    with preserved_rng(), case_rng(5, "cuda") as state:
        assert rng_device() == "cuda" and state.cuda is not None
        # torch.manual_seed reached the (fake) CUDA generators: an accelerator is available
        assert fake.count("manual_seed_all") == 1 and int(fake.rng[0][0]) == 5
        fake.draw()
        replay()
        assert int(fake.rng[0][0]) == 5
    assert rng_device() == "cpu"


def test_seed_generators_without_an_accelerator_seeds_the_cpu_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda().install(monkeypatch, accelerator=False)
    if not hasattr(torch, "accelerator"):
        pytest.skip("torch.accelerator arrived in torch 2.6")
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    seed_generators(3)
    assert fake.count("manual_seed_all") == 0


def test_rng_now_takes_the_cuda_state_once_cuda_is_started(fake: FakeCuda) -> None:
    assert rng_now().cuda is None
    fake.initialized = True
    assert rng_now().cuda is not None


# -- bench: synchronisation, memory statistics, cleanup, environment ---------------------------


def test_cuda_peak_is_the_peak_beyond_what_was_allocated_before(fake: FakeCuda) -> None:
    fake.alloc(1000)  # held before the call: not the call's

    def run(k: int) -> None:
        fake.alloc(300)
        fake.alloc(-300)

    peak = cuda_peak(Task(setup=lambda k: k, run=run), "cuda", torch.cuda.synchronize)
    assert peak == 300
    assert fake.calls == ["synchronize", "memory_allocated", "reset_peak_memory_stats",
                          "synchronize", "max_memory_allocated"]


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_default_sync_on_cuda_synchronizes(fake: FakeCuda, device: str) -> None:
    default_sync(device)()
    assert fake.count("synchronize") == 1


def test_release_on_cuda_empties_the_cache(fake: FakeCuda) -> None:
    release("cuda")
    assert fake.count("empty_cache") == 1


def test_environment_on_cuda_names_the_gpu(fake: FakeCuda) -> None:
    env = environment(seed=0, device="cuda")
    assert env["device_name"] == FAKE_GPU_NAME
    assert (env["cuda_version"], env["cudnn_version"]) == (FAKE_CUDA_VERSION, 90100)
    assert environment(device="cpu")["device_name"] != FAKE_GPU_NAME


def allocating_op(fake: FakeCuda, nbytes: int) -> OpDef:
    """exp whose every call 'allocates' nbytes on the fake GPU while it runs."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        fake.alloc(nbytes)
        out = x.exp()
        fake.alloc(-nbytes)
        return out

    return OpDef(name="alloc_exp", summary="", function=fn, reference=torch.exp, second_order=True,
                 cases=(), bench_cases=(Case("small", (TensorArg((4, 4)),)),),
                 dtypes=("float32",), devices=("cpu", "cuda"))


def test_bench_run_on_cuda_syncs_and_records_peak_memory(fake: FakeCuda,
                                                         on_cpu: CudaOnCpu) -> None:
    options = bench.BenchOptions(**{**FAST.__dict__, "devices": ("cuda",)})
    report = bench.run([Target(allocating_op(fake, 4096))], options)
    assert report.rows and all(r.status == PASS for r in report.rows), [
        (r.phase, r.impl, r.status, r.note) for r in report.rows]
    assert {r.device for r in report.rows} == {"cuda"}
    custom = [r for r in report.rows if r.impl == "custom"]
    # backward alone does not call the Function's forward: it allocates nothing there
    assert {r.phase: r.peak_mem_bytes for r in custom} == {
        "forward": 4096, "forward_grad": 4096, "backward": 0, "forward_backward": 4096}
    assert fake.count("synchronize") > 10 and fake.count("empty_cache") >= 1
    assert report.env["device_name"] == FAKE_GPU_NAME
    assert on_cpu.asked > 0  # the inputs were asked for on CUDA


def test_bench_on_cuda_without_cuda_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows = bench.bench_case(allocating_op(FakeCuda(), 0), Case("small", (TensorArg((4, 4)),)),
                            "float32", "cuda", FAST)
    assert rows and all(r.status == SKIP and "CUDA" in r.note for r in rows)


# -- check: placement of inputs, grad_outputs and references; the cuda capability --------------


def test_check_on_cuda_runs_every_check_there(fake: FakeCuda, on_cpu: CudaOnCpu) -> None:
    report = gradlab.check(lambda a: a.exp(), [x64(3, 4)], reference=torch.exp,
                           devices=["cuda"], name="exp_on_cuda")
    assert report.passed, failures(report)
    assert {r.device for r in report.rows} == {"cuda"}
    checks = {r.check for r in report.rows}
    assert {"forward", "gradient", "jacobian", "autocast", "capabilities"} <= checks
    (autocast,) = [r for r in report.rows if r.check == "autocast"]
    assert autocast.dtype == "float16"  # CUDA's autocast dtype (bfloat16 on the CPU)
    (cuda,) = [r for r in report.rows if r.variant == "cuda"]
    assert cuda.status == PASS and cuda.reason == "", cuda
    # every case ran in the CUDA generator state it replays
    assert fake.count("get_rng_state_all") >= 1 and fake.count("set_rng_state_all") >= 1


def test_the_cuda_capability_moves_a_cpu_case_to_cuda(fake: FakeCuda, on_cpu: CudaOnCpu) -> None:
    report = gradlab.check(lambda a: a.exp(), [x64(3, 4)], reference=torch.exp,
                           checks=["capabilities"], requires=["cuda"], name="exp_cpu")
    (row,) = [r for r in report.rows if r.variant == "cuda"]
    assert (row.status, row.device) == (PASS, "cpu"), row
    assert on_cpu.asked > 0  # inputs.clone(device="cuda")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_stochastic_function_on_cuda_is_run_not_compared(
        fake: FakeCuda, on_cpu: CudaOnCpu, device: str) -> None:
    if str(DATA / "stochastic") not in sys.path:
        sys.path.insert(0, str(DATA / "stochastic"))
    import stochastic_functions as sf

    report = gradlab.check(sf.LeanDropout, [x64(4, 6)], reference=sf.dropout_reference,
                           devices=[device], checks=["capabilities"])
    (row,) = [r for r in report.rows if r.variant == "cuda"]
    assert row.status == PASS and row.note == STOCHASTIC_CUDA, row


def test_a_cuda_item_without_cuda_is_an_undeclared_skip() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the no-CUDA row")
    report = gradlab.check(lambda a: a.exp(), [x64(3)], reference=torch.exp, devices=["cuda"])
    assert {(r.status, r.reason) for r in report.rows} == {(SKIP, "cuda_unavailable")}
    assert not report.passed


def test_involution_takes_the_triton_path_for_cuda_tensors() -> None:
    import gradlab.ops.involution as inv
    from gradlab.kernels.involution_triton import HAVE_TRITON

    assert inv._use_triton(types.SimpleNamespace(is_cuda=True)) is HAVE_TRITON  # type: ignore
    assert inv._use_triton(types.SimpleNamespace(is_cuda=False)) is inv.FORCE_TRITON  # type: ignore


# -- the CLI's device handling -----------------------------------------------------------------


def test_cli_device_checks_accept_cuda_when_available(fake: FakeCuda) -> None:
    assert parse_devices(["cpu", "cuda"]) == ("cpu", "cuda")
    require_devices([Target(allocating_op(fake, 0), devices=("cuda",))], None, False)
    assert auto_jobs(["cuda"]) == 1


def test_cli_check_device_cuda_runs_on_the_fake(fake: FakeCuda, on_cpu: CudaOnCpu,
                                                capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    spec = DATA / "trust" / "cpu_and_cuda.yaml"
    code, out, err = run_cli(["check", str(spec), "--device", "cuda", "--no-isolate",
                              "--report-dir", str(tmp_path)], capsys)
    assert code == 0, out + err
    assert fake.count("set_rng_state_all") >= 1


def test_cli_bench_device_cuda_runs_on_the_fake(fake: FakeCuda, on_cpu: CudaOnCpu,
                                                capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    spec = tmp_path / "exp_bench.yaml"
    spec.write_text("function: trust_functions:Exp\nreference: torch:exp\ndevices: [cuda]\n"
                    "args: [{shape: [3, 4]}]\nbench: [{name: small, args: [{shape: [8, 8]}]}]\n",
                    encoding="utf-8")
    code, out, err = run_cli(["bench", str(spec), "--device", "cuda", "--path",
                              str(DATA / "trust"), "--min-time", "0.0001", "--min-samples", "3",
                              "--max-time", "0", "--report-dir", str(tmp_path / "r")], capsys)
    assert code == 0, out + err
    assert FAKE_GPU_NAME in out and f"CUDA {FAKE_CUDA_VERSION}" in out, out
    (csv,) = (tmp_path / "r").glob("bench-*.csv")
    assert ",cuda," in csv.read_text(encoding="utf-8")
    assert fake.count("max_memory_allocated") >= 4


def test_a_repro_file_from_a_cuda_run_reruns_there_and_loads_on_the_cpu(
        fake: FakeCuda, on_cpu: CudaOnCpu, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA.parent)  # user_broken.yaml's functions resolve from tests/
    code, out, err = run_cli(["check", str(DATA / "user_broken.yaml"), "--device", "cuda",
                              "--no-variants", "--no-isolate", "--report-dir", str(tmp_path)],
                             capsys)
    assert code == 1, out + err
    saved = sorted((tmp_path / "repro").glob("*_cuda.pt"))
    assert saved, out
    real_load, locations = torch.load, []

    def load(*args: Any, **kwargs: Any) -> Any:
        locations.append(kwargs.get("map_location"))
        return real_load(*args, **kwargs)

    # a GPU run's tensors are CUDA tensors: a CPU machine opens the file only onto the CPU
    monkeypatch.setattr(torch, "load", load)
    code, out, err = run_cli(["repro", str(saved[0]), "--report-dir", str(tmp_path / "r")],
                             capsys)
    assert code == 1 and "no_chain_rule" in out + err, out + err
    assert locations == ["cpu"]

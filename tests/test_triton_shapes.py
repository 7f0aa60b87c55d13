"""The Triton involution kernels at the shapes real networks use (gradlab/kernels/
involution_shapes.py).

Three layers:
- the launch plan of every RedNet layer shape at every batch size 1..64, checked in plain Python
  against CUDA's grid limits and int32 (nothing is launched);
- reduced shapes with the same structure (G = C/16, K = 3 and 7, channels_last, float16 and
  bfloat16, sizes that leave partial pixel blocks and several blocks per image, stride 2) run
  under TRITON_INTERPRET=1 in a subprocess (tests/triton_interpreted.py, shared with
  tests/ops/test_involution.py; this file run as a script runs them alone), against the unfold
  reference in float64, with the block sizes the compiled path uses;
- the full REDNET_SHAPES list on a GPU (marked `cuda`: the GPU command runs it, a CPU machine
  skips it).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the subprocess runs this file as a script
    sys.path.insert(0, str(ROOT))

from gradlab.kernels.involution_launch import (  # noqa: E402
    CL_CONFIGS,
    CONFIGS,
    default_config,
    launch_config,
    tuning_candidates,
)
from gradlab.kernels.involution_shapes import (  # noqa: E402
    DTYPES,
    KERNELS,
    LAYOUTS,
    REDNET_SHAPES,
    InvolutionShape,
    all_batch_shapes,
    launch_plans,
)

#: Reduced shapes for the interpreter, each with its dtype and layout: G = C/16 as in RedNet,
#: and sizes chosen for the masks (test_reduced_shapes_exercise_the_masks says which).
REDUCED: tuple[tuple[InvolutionShape, str, str], ...] = (
    (InvolutionShape(1, 32, 3, 17), "float16", "channels_last"),     # 289 px: 3 blocks of 128
    (InvolutionShape(2, 16, 7, 9), "bfloat16", "channels_last"),     # 81 px: 1 block of 128
    (InvolutionShape(1, 16, 7, 13, stride=2), "float32", "channels_last"),
    (InvolutionShape(2, 16, 3, 11, stride=2), "float32", "contiguous"),
    (InvolutionShape(1, 48, 3, 7), "float16", "contiguous"),         # G = 3, one partial block
    (InvolutionShape(2, 16, 7, 7), "bfloat16", "contiguous"),
)


def reduced_id(item: tuple[InvolutionShape, str, str]) -> str:
    shape, dtype, layout = item
    return f"{shape.name}-{dtype}-{layout}"


# -- the launch plan, in plain Python ----------------------------------------------------------


def test_every_rednet_launch_stays_within_cuda_limits() -> None:
    problems, largest = [], (0, "")
    for shape in all_batch_shapes():
        for plan in launch_plans(shape):
            problems += [f"{shape.name} {plan.kernel}: {p}" for p in plan.problems()]
            largest = max(largest, (plan.grid[0], f"{shape.name} {plan.kernel} {plan.block_p}"))
    assert not problems, problems[:10]
    # the largest grid: batch 64, 1024 channels (64 groups), 56x56, 64-pixel blocks
    assert largest[0] == 64 * 64 * 49 and largest[1].startswith("b64-c1024-"), largest


def test_the_channels_last_launches_are_checked_too() -> None:
    """Every channels-last kernel is in each shape's plan, and its own int32 expression (a
    pixel index times C plus a channel, within one image) is what fails first past int32."""
    names = {plan.kernel for plan in launch_plans(InvolutionShape(64, 1024, 7, 56))}
    assert {"forward[cl]", "grad_input[cl]", "grad_weight[cl]", "grad_weight[cl_vec]"} <= names
    wide = InvolutionShape(1, 1 << 16, 3, 192)  # 192² pixels x 65536 channels: 2.4e9 > 2^31
    problems = {p.split(" =")[0] for plan in launch_plans(wide) if "[" in plan.kernel
                for p in plan.problems()}
    assert problems == {"image_offset"}, problems


def test_a_launch_beyond_the_limits_is_reported() -> None:
    huge = InvolutionShape(1 << 22, 1024, 7, 56)
    problems = [p for plan in launch_plans(huge) for p in plan.problems()]
    assert any(p.startswith("grid[0]") for p in problems), problems
    assert any(p.startswith("channel_index") for p in problems), problems


def test_block_sizes_are_powers_of_two_and_keep_channels_in_a_thread() -> None:
    assert default_config(7, 7) == (64, 2, 0)  # stage 4: 7x7 in one block
    assert default_config(56, 56) == (128, 4, 0)
    assert tuning_candidates(7, 7) == [(64, 2, 0)]  # one candidate: nothing to time
    assert tuning_candidates(56, 56) == list(CONFIGS)
    assert all(tw <= 16 for _, _, tw in tuning_candidates(14, 14))  # no 32-wide tile on 14
    for bp, warps, tw in (*CONFIGS, default_config(1, 1), default_config(1000, 1000)):
        assert bp & (bp - 1) == 0 and bp >= 32 * warps and bp % max(tw, 1) == 0, (bp, warps)
    # RedNet's 16 channels a group: one channel block; grad_weight never splits a group
    assert launch_config("forward", 10, 10, 2, 3, 16, 64).grid == (2 * 2 * 3, 1, 1)
    assert launch_config("forward", 10, 10, 2, 3, 48, 64).grid == (2 * 2 * 3 * 2, 1, 1)
    assert launch_config("grad_weight", 10, 10, 2, 3, 48, 64).grid == (2 * 2 * 3, 1, 1)
    assert launch_config("forward", 10, 10, 2, 3, 5, 64).block_c == 8
    # 2-D tiles: 4 x 32 on 56 x 56 is 14 tile rows x 2 tile columns
    assert launch_config("forward", 56, 56, 1, 1, 16, 128, 32).n_pb == 14 * 2


def test_the_gpu_list_covers_the_rednet_grid() -> None:
    assert {(s.channels, s.kernel, s.size) for s in REDNET_SHAPES if s.stride == 1} == {
        (c, k, h) for c in (64, 128, 256, 512, 1024) for k in KERNELS for h in (7, 14, 28, 56)}
    assert {s.batch for s in REDNET_SHAPES} == {1, 64}
    assert all(s.groups == s.channels // 16 and s.out_size == s.size // s.stride
               for s in REDNET_SHAPES)


def test_reduced_shapes_exercise_the_masks() -> None:
    """Both kernel sizes meet a partial last pixel block and several blocks per image at the
    default block size; channels_last, float16, bfloat16 and stride 2 occur."""
    for k in KERNELS:
        mine = [(s, d, lay) for s, d, lay in REDUCED if s.kernel == k]
        blocks = [(n * n, default_config(n, n)[0]) for s, _, _ in mine
                  for n in (s.out_size, s.size)]
        assert any(n % b for n, b in blocks), k
        assert any(n > b for n, b in blocks), k
        assert {lay for _, _, lay in mine} == set(LAYOUTS), k
    assert {d for _, d, _ in REDUCED} == set(DTYPES)
    assert any(s.stride == 2 for s, _, _ in REDUCED)
    assert all(s.groups == s.channels // 16 for s, _, _ in REDUCED)


# -- the kernels against the unfold reference --------------------------------------------------


def make_case(shape: InvolutionShape, dtype: str, layout: str, device: str
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x, w and a grad_output in `dtype` on `device`; x and grad_output channels_last when
    asked (w, 6-D, has no such format)."""
    gen = torch.Generator(device=device).manual_seed(0)
    dt = getattr(torch, dtype)

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen, device=device, dtype=torch.float32).to(dt)

    b, c, o = shape.batch, shape.channels, shape.out_size
    x, w, go = randn(*shape.x_shape), randn(*shape.w_shape), randn(b, c, o, o)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
        go = go.contiguous(memory_format=torch.channels_last)
    return x, w, go


def check_shape(shape: InvolutionShape, dtype: str, layout: str, device: str,
                config: tuple[int, int, int] | None = None,
                variants: tuple[str, str] | None = None) -> None:
    """The three kernels on one shape against the unfold reference in float64 (on the same
    rounded inputs), compared on the first, middle and last batch element: the last has the
    largest offsets, and a float64 unfold of a whole batch of 64 would need tens of GB.
    `config` (BLOCK_P, num_warps, TILE_W) for all three kernels; None: the launchers' choice.
    `variants`: (forward and grad_input's, grad_weight's) variant; None: the selector's."""
    import gradlab.ops.involution as inv
    from gradlab.kernels import involution_triton as kt

    x, w, go = make_case(shape, dtype, layout, device)
    geo = (shape.stride, shape.padding, 1)
    v, v_gw = variants or (None, None)
    got = (kt.involution_forward(x, w, *geo, config=config, variant=v),
           kt.involution_grad_input(go, w, x.shape, *geo, config=config, variant=v),
           kt.involution_grad_weight(go, x, w.shape, *geo, config=config, variant=v_gw))
    idx = torch.tensor(sorted({0, shape.batch // 2, shape.batch - 1}), device=device)
    xr, wr = (t[idx].double().requires_grad_() for t in (x, w))
    out = inv.involution_reference(xr, wr, *geo)
    gx, gw = torch.autograd.grad(out, (xr, wr), go[idx].double())
    tol = inv.OP.tolerance(dtype)
    for name, a, want in zip(("out", "grad_x", "grad_w"), got, (out.detach(), gx, gw),
                             strict=True):
        assert a.dtype == x.dtype and a.shape[1:] == want.shape[1:], name
        where = f"{shape.name} {dtype} {layout} {name}"
        torch.testing.assert_close(a[idx].double(), want, atol=tol.atol, rtol=tol.rtol,
                                   msg=lambda m, w=where: f"{w}: {m}")  # type: ignore[misc]


#: Every autotuning candidate, interpreted on one shape with partial and several blocks (a 17x17
#: image: 289 pixels) and two groups (the interpreter's time grows with the programs, one per
#: group and block: a third group cost 1.6 s and covered nothing two do not).
CONFIG_SHAPE = (InvolutionShape(1, 32, 3, 17), "float32", "contiguous")


def config_id(config: tuple[int, int, int]) -> str:
    return f"config-{config[0]}x{config[1]}-tile{config[2]}"


def cl_config_id(config: tuple[int, int, int]) -> str:
    return f"cl-config-{config[0]}x{config[1]}-gw_{cl_grad_weight(config)}"


def cl_grad_weight(config: tuple[int, int, int]) -> str:
    """The channels-last grad_weight variant a CL config is interpreted with: each in turn."""
    return ("cl", "cl_vec")[CL_CONFIGS.index(config) % 2]


def run_reduced() -> dict[str, str]:
    """Every reduced check in this process (TRITON_INTERPRET=1 set): name -> 'ok' | error.
    The reduced shapes run the selector's untimed choice (their channels_last inputs the
    channels-last kernels, the others NCHW); each config of both kernel sets runs once."""
    results = {reduced_id(item): error_of(item) or "ok" for item in REDUCED}
    for config in CONFIGS:
        results[config_id(config)] = error_of(CONFIG_SHAPE, config) or "ok"
    for config in CL_CONFIGS:
        results[cl_config_id(config)] = error_of(
            CONFIG_SHAPE, config, ("cl", cl_grad_weight(config))) or "ok"
    return results


def error_of(item: tuple[InvolutionShape, str, str],
             config: tuple[int, int, int] | None = None,
             variants: tuple[str, str] | None = None) -> str:
    """The traceback of one reduced check on the CPU, '' when it passes."""
    try:
        check_shape(*item, device="cpu", config=config, variants=variants)
    except Exception:
        return traceback.format_exc(limit=3)
    return ""


@pytest.fixture(scope="module")
def interpreted() -> dict[str, str]:
    import triton_interpreted  # tests/, on the path under pytest (conftest)

    return triton_interpreted.results("shapes")


@pytest.mark.triton
# one worker runs the subprocess these share with tests/ops/test_involution.py's interpreted
# tests (tests/triton_interpreted.py, its GROUP)
@pytest.mark.xdist_group("triton_interpreter")
@pytest.mark.parametrize("item", REDUCED, ids=reduced_id)
def test_reduced_shapes_interpreted(interpreted: dict[str, str],
                                    item: tuple[InvolutionShape, str, str]) -> None:
    result = interpreted.get(reduced_id(item), "missing from the subprocess output")
    if result != "ok":
        pytest.fail(result, pytrace=False)


@pytest.mark.triton
@pytest.mark.xdist_group("triton_interpreter")
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_every_config_interpreted(interpreted: dict[str, str],
                                  config: tuple[int, int, int]) -> None:
    result = interpreted.get(config_id(config), "missing from the subprocess output")
    if result != "ok":
        pytest.fail(result, pytrace=False)


@pytest.mark.triton
@pytest.mark.xdist_group("triton_interpreter")
@pytest.mark.parametrize("config", CL_CONFIGS, ids=cl_config_id)
def test_every_channels_last_config_interpreted(interpreted: dict[str, str],
                                                config: tuple[int, int, int]) -> None:
    result = interpreted.get(cl_config_id(config), "missing from the subprocess output")
    if result != "ok":
        pytest.fail(result, pytrace=False)


#: Shapes every autotuning candidate runs on, on the GPU: stage 1 (a pixel count divisible by
#: 16) and stage 3 (not: triton compiles each apart), batch 2, the variants the benchmark's
#: autotuner compiles at the stages (stage 4 has one candidate, the default).  Stride 2 and
#: K = 3 run every candidate under the interpreter and the default on the GPU (RedNet list).
GPU_CONFIG_SHAPES = (InvolutionShape(2, 64, 7, 56), InvolutionShape(2, 256, 7, 14))


@pytest.mark.cuda
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_every_config_on_the_gpu(config: tuple[int, int, int]) -> None:
    """Whatever the autotuner picks is correct: each candidate on a few shapes and dtypes."""
    pytest.importorskip("triton")
    for shape in GPU_CONFIG_SHAPES:
        for dtype in DTYPES:
            check_shape(shape, dtype, "contiguous", "cuda", config=config)


@pytest.mark.cuda
@pytest.mark.parametrize("gw", ["cl", "cl_vec"])
@pytest.mark.parametrize("config", CL_CONFIGS, ids=config_id)
def test_every_channels_last_config_on_the_gpu(config: tuple[int, int, int], gw: str) -> None:
    """The channels-last kernels (both grad_weights) at each candidate, from channels-last
    inputs (no conversion) and contiguous ones (converted by the launchers)."""
    pytest.importorskip("triton")
    for shape in GPU_CONFIG_SHAPES:
        for dtype in DTYPES:
            check_shape(shape, dtype, ("channels_last", "contiguous")[dtype == "float16"],
                        "cuda", config=config, variants=("cl", gw))


@pytest.mark.cuda
@pytest.mark.parametrize("shape", REDNET_SHAPES, ids=lambda s: s.name)
def test_rednet_shapes_on_the_gpu(shape: InvolutionShape, monkeypatch: pytest.MonkeyPatch
                                  ) -> None:
    """The compiled kernels at every RedNet shape, dtype and layout (the GPU command), at the
    default block sizes (autotuning 86 shapes x 3 dtypes would take minutes; every candidate
    is checked by test_every_config_on_the_gpu): untimed, contiguous inputs run the NCHW
    kernels and channels_last ones the channels-last kernels (involution_select)."""
    pytest.importorskip("triton")
    from gradlab.kernels.involution_launch import AUTOTUNE_ENV

    monkeypatch.setenv(AUTOTUNE_ENV, "0")
    for dtype in DTYPES:
        for layout in LAYOUTS:
            check_shape(shape, dtype, layout, "cuda")
    torch.cuda.empty_cache()  # the largest shapes hold some 8 GB


if __name__ == "__main__" and sys.argv[1:] == ["--triton-interpret"]:
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("set TRITON_INTERPRET=1 before running the interpreted Triton checks")
    print(json.dumps(run_reduced()))

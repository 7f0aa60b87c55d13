"""The involution shapes real networks use (RedNet-26/50) and the launch plan of each.

REDNET_SHAPES is what the GPU command checks the Triton kernels on (tests/test_triton_shapes.py,
marked `cuda`): every channel count C in {64, ..., 1024} with G = C/16 groups, kernel K in
{3, 7}, image size H = W in {7, 14, 28, 56}, batch 1 and 64, plus RedNet-50's stride-2 layers
(the first involution of stages 2-4).  Each runs in float32, float16 and bfloat16, on contiguous
and channels_last inputs (DTYPES, LAYOUTS).

`launch_plans` is plain Python (no triton, no GPU): the grid, channel block and pixel block of
each kernel's launch (NCHW and channels-last) at every block size it may run with, and the
largest values the kernels compute in int32, so a test checks them against CUDA's limits for
every batch size 1..64 without launching anything.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from gradlab.kernels.involution_launch import (
    cl_default_config,
    cl_tuning_candidates,
    default_config,
    launch_config,
    tuning_candidates,
)

#: RedNet's involution: C/16 channels share one per-pixel kernel (group_channels = 16).
GROUP_CHANNELS = 16
CHANNELS = (64, 128, 256, 512, 1024)
KERNELS = (3, 7)
SIZES = (7, 14, 28, 56)
#: RedNet-50's four stages: the channel count and image size of each stage's involutions (K = 7,
#: stride 1).  Stages 2-4 open with a stride-2 layer on the stage before's size (layer_shapes);
#: benchmarks/bench_involution.py times the stage layers (stage_shapes).
REDNET50_STAGES = ((64, 56), (128, 28), (256, 14), (512, 7))
#: The batch sizes the GPU command runs (the launch plan is checked for every batch up to 64).
BATCHES = (1, 64)
MAX_BATCH = 64
DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("contiguous", "channels_last")

#: CUDA's launch limits: grid x up to 2^31 - 1 blocks, y and z up to 65535.
CUDA_GRID_LIMITS = (2**31 - 1, 65535, 65535)
#: Offsets the kernels compute in int32 (tl.program_id, tl.arange arithmetic) must stay below.
INT32_LIMIT = 2**31


@dataclass(frozen=True)
class InvolutionShape:
    """One involution layer: x [batch, channels, size, size], K x K kernels, 'same' padding."""

    batch: int
    channels: int
    kernel: int
    size: int
    stride: int = 1

    @property
    def groups(self) -> int:
        return self.channels // GROUP_CHANNELS

    @property
    def padding(self) -> int:
        return (self.kernel - 1) // 2

    @property
    def out_size(self) -> int:
        return (self.size + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.channels, self.size, self.size)

    @property
    def w_shape(self) -> tuple[int, int, int, int, int, int]:
        o = self.out_size
        return (self.batch, self.groups, self.kernel, self.kernel, o, o)

    @property
    def name(self) -> str:
        s = f"-s{self.stride}" if self.stride != 1 else ""
        return f"b{self.batch}-c{self.channels}-k{self.kernel}-{self.size}x{self.size}{s}"


def layer_shapes(batch: int) -> list[InvolutionShape]:
    """Every layer of the list at one batch size: the C x K x H grid, then the stride-2 ones."""
    grid = [InvolutionShape(batch, c, k, h)
            for c, k, h in itertools.product(CHANNELS, KERNELS, SIZES)]
    # RedNet-50 stages 2-4 open with a stride-2 7x7 involution on the stage before's width
    stride2 = [InvolutionShape(batch, c, 7, h, stride=2)
               for (c, _), (_, h) in zip(REDNET50_STAGES[1:], REDNET50_STAGES, strict=False)]
    return grid + stride2


def stage_shapes(batch: int) -> list[InvolutionShape]:
    """RedNet-50's stage layers (REDNET50_STAGES: K = 7, stride 1) at one batch size."""
    return [InvolutionShape(batch, c, 7, h) for c, h in REDNET50_STAGES]


#: The shapes the GPU command checks the kernels on (tests/test_triton_shapes.py, `cuda`).
REDNET_SHAPES: tuple[InvolutionShape, ...] = tuple(
    s for b in BATCHES for s in layer_shapes(b))


@dataclass(frozen=True)
class LaunchPlan:
    """One kernel's launch on one shape at one block size, and the largest int32 values it
    computes."""

    kernel: str
    grid: tuple[int, int, int]
    block_c: int
    block_p: int
    num_warps: int
    #: 0: flattened pixel blocks; else 2-D tiles this many columns wide
    tile_w: int
    #: name -> the largest value of an int32 expression in the kernel
    int32_max: dict[str, int]
    #: masked-off pixel lanes (negative: pixels no program covers): a flattened block's tail, a
    #: tile's ragged right and bottom edges
    spare_lanes: int

    def problems(self) -> list[str]:
        """What breaks CUDA's limits or int32 (empty: the launch is fine)."""
        out = [f"grid[{i}] = {n} > {lim}" for i, (n, lim)
               in enumerate(zip(self.grid, CUDA_GRID_LIMITS, strict=True)) if n > lim]
        out += [f"{name} = {v} >= 2^31" for name, v in self.int32_max.items()
                if v >= INT32_LIMIT]
        if self.spare_lanes < 0 or (self.tile_w == 0 and self.spare_lanes >= self.block_p):
            out.append(f"the pixel blocks leave {self.spare_lanes} lanes (want 0..block - 1 "
                       "flattened, >= 0 tiled)")
        if self.block_c & (self.block_c - 1) or self.block_p & (self.block_p - 1):
            out.append(f"tile {self.block_c} x {self.block_p} is not powers of two")
        if self.block_p < 32 * self.num_warps:
            out.append(f"{self.block_p} pixels over {self.num_warps} warps: the channel axis "
                       "would cross threads")
        return out


def launch_plans(shape: InvolutionShape) -> list[LaunchPlan]:
    """The forward, grad_input and grad_weight launches of one shape at every block size the
    launchers may pick (default_config and each autotuning candidate), as they compute them
    through involution_launch.launch_config."""
    b, c, h, o, k = shape.batch, shape.channels, shape.size, shape.out_size, shape.kernel
    cpg = c // shape.groups
    plans = []
    for kernel, side in (("forward", o), ("grad_input", h), ("grad_weight", o)):
        for block_p, warps, tile_w in sorted({default_config(side, side),
                                              *tuning_candidates(side, side)}):
            lc = launch_config(kernel, side, side, b, shape.groups, cpg, block_p, tile_w)
            covered = lc.n_pb * block_p
            int32_max = {
                "program_id": lc.grid[0] - 1,
                # b * C + g * CPG, before the cast to int64
                "channel_index": b * c - 1,
                # channel-in-block * plane + pixel (masked lanes included), x/go/out planes
                "plane_offset": lc.block_c * max(h * h, o * o) + covered,
                # tap * n_out + pixel in the w row (masked lanes included)
                "w_offset": k * k * max(o * o, covered),
                # a tap's input offset: row * W + column, halo included
                "pixel_offset": (h + 2 * shape.padding) * (h + 2 * shape.padding),
            }
            plans.append(LaunchPlan(kernel, lc.grid, lc.block_c, block_p, warps, tile_w,
                                    int32_max, covered - side * side))
    return plans + channels_last_plans(shape)


#: The channels-last kernels (gradlab/kernels/involution_triton_cl.py) by (kernel, variant).
CL_KERNELS = (("forward", "cl"), ("grad_input", "cl"), ("grad_weight", "cl"),
              ("grad_weight", "cl_vec"))


def channels_last_plans(shape: InvolutionShape) -> list[LaunchPlan]:
    """The channels-last kernels' launches of one shape at every block size they may run
    with, named "kernel[variant]", and the int32 values they compute: within one image
    (the image's base is int64), a pixel index times C plus a channel."""
    b, c, h, o, k = shape.batch, shape.channels, shape.size, shape.out_size, shape.kernel
    cpg = c // shape.groups
    plans = []
    for kernel, variant in CL_KERNELS:
        pixels = h * h if kernel == "grad_input" else o * o
        for block_p, warps, _ in sorted({cl_default_config(pixels),
                                         *cl_tuning_candidates(pixels)}):
            lc = launch_config(kernel, pixels, 1, b, shape.groups, cpg, block_p)
            covered = lc.n_pb * block_p
            int32_max = {
                "program_id": lc.grid[0] - 1,
                # b * G + g, before the cast to int64
                "group_index": b * shape.groups - 1,
                # pixel * C + channel in one image (masked lanes included): x, go, out, gx
                "image_offset": max(h * h, o * o, covered) * c,
                # tap * n_out + pixel in the w row (masked lanes included)
                "w_offset": k * k * max(o * o, covered),
                "pixel_offset": (h + 2 * shape.padding) * (h + 2 * shape.padding),
            }
            plans.append(LaunchPlan(f"{kernel}[{variant}]", lc.grid, lc.block_c, block_p,
                                    warps, 0, int32_max, covered - pixels))
    return plans


def all_batch_shapes() -> Iterator[InvolutionShape]:
    """The layer list at every batch size 1..MAX_BATCH (for the pure-Python launch check)."""
    for b in range(1, MAX_BATCH + 1):
        yield from layer_shapes(b)

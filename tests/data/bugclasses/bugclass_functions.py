"""Bug classes found on the contract row, each broken Function beside its correct twin."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from gradlab.torchcompat import has


class ExpOutputOnCtx(Function):
    """BROKEN: the output kept as ctx.y: output -> node -> ctx -> output, a reference cycle."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.y


class ExpOutputDetachedOnCtx(Function):
    """HAZARD: the output's storage kept as ctx.y, detached (revtorch's way to free it early):
    no reference cycle, but an in-place update of the output before backward goes unseen."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.y = y.detach()
        return y

    @staticmethod
    @once_differentiable  # ctx.y is a constant to a second order: declared, not silently wrong
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.y


class Exp(Function):
    """Correct twin: the output saved with save_for_backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class MulInputOnCtx(Function):
    """BROKEN: the weight kept as ctx.w: an optimizer step between forward and backward goes
    unnoticed and the gradient uses the new weight."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        ctx.w = w
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x


class Mul(Function):
    """Correct twin of MulInputOnCtx, with an intermediate (not an input) on ctx: allowed."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.scale = torch.ones(())  # an intermediate: not an input or output, fine on ctx
        return x * w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale


def mul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x * w


class ScaleConsumesCtx(Function):
    """BROKEN: backward updates a factor kept on ctx, so a second backward through the same graph
    (retain_graph=True: a second loss, a gradient penalty) gets twice the gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.factor = [3.0]
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        factor = ctx.factor[0]
        ctx.factor[0] = factor * 2  # "scheduled" growth that belongs in forward, not here
        return g * factor


class Scale(Function):
    """Correct twin: backward reads ctx and leaves it alone."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.factor = 3.0
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        return g * ctx.factor


def scale_reference(x: Tensor) -> Tensor:
    return x * 3


class ClampInPlace(Function):
    """Correct in-place Function: clamps its input in place and says so with mark_dirty (it
    cannot take a leaf that requires grad; in a model its input is an intermediate)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (y > 0).to(g.dtype)


class ClampInPlaceNotMarked(Function):
    """BROKEN: clamps its input in place without mark_dirty: autograd does not know the input
    changed, so every later reader of it gets a gradient without the clamp."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        x.clamp_(min=0)
        y = x.clone()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * (y > 0).to(g.dtype)


class SoftplusNaive(Function):
    """BROKEN at large inputs: backward is exp(x) / (1 + exp(x)), inf / inf = NaN at x = 100 in
    float32 where the derivative is 1."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        e = x.exp()
        return g * e / (1 + e)


class Softplus(Function):
    """Correct twin: the derivative as sigmoid(x), stable at any magnitude."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


def softplus_reference(x: Tensor) -> Tensor:
    return torch.nn.functional.softplus(x)


TILE = 8


class DoubleTiledFloor(Function):
    """BROKEN for sizes that are no multiple of the tile: backward walks n // TILE tiles of the
    last dim and never writes the remainder."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        gx = torch.zeros_like(g)
        n = g.shape[-1]
        for t in range(n // TILE):
            gx[..., t * TILE:(t + 1) * TILE] = 2 * g[..., t * TILE:(t + 1) * TILE]
        return gx


class DoubleTiled(Function):
    """Correct twin: cdiv(n, TILE) tiles, the last one partial."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        gx = torch.zeros_like(g)
        n = g.shape[-1]
        for t in range(-(-n // TILE)):
            gx[..., t * TILE:(t + 1) * TILE] = 2 * g[..., t * TILE:(t + 1) * TILE]
        return gx


def double_reference(x: Tensor) -> Tensor:
    return x * 2


# --- mixed precision (torch.autocast) ---------------------------------------------------------


class MatmulNoAmp(Function):
    """MISSING autocast: no torch.amp.custom_fwd/custom_bwd, so under autocast the forward's
    matmul runs in bfloat16 and backward multiplies the bfloat16 grad_output by the float32
    saved inputs: a dtype mismatch in every mixed-precision step (plain float32 is right)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g


def cpu_autocast_on() -> bool:
    """Whether CPU autocast is on (torch.is_autocast_enabled takes a device type since 2.4)."""
    if has("autocast_device_query"):
        return bool(torch.is_autocast_enabled("cpu"))
    return bool(torch.is_autocast_cpu_enabled())


def float32_forward(forward: Any) -> Any:
    """torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32) for a torch before
    2.4, which has no CPU custom_fwd: under CPU autocast, forward runs on float32 copies of its
    floating inputs with autocast off."""

    @functools.wraps(forward)
    def run(ctx: Any, *args: Any) -> Any:
        if not cpu_autocast_on():
            return forward(ctx, *args)
        cast = [a.float() if isinstance(a, Tensor) and a.is_floating_point() else a
                for a in args]
        with torch.autocast("cpu", enabled=False):
            return forward(ctx, *cast)

    return run


def autocast_off_backward(backward: Any) -> Any:
    """torch.amp.custom_bwd(device_type="cpu") for a torch before 2.4: backward with autocast
    off, as forward ran (cast_inputs turns it off there)."""

    @functools.wraps(backward)
    def run(ctx: Any, *grads: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            return backward(ctx, *grads)

    return run


if has("amp_custom_fwd"):  # torch >= 2.4: the documented way
    AMP_FORWARD = torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    AMP_BACKWARD = torch.amp.custom_bwd(device_type="cpu")
else:
    AMP_FORWARD, AMP_BACKWARD = float32_forward, autocast_off_backward


class MatmulAmp(Function):
    """Correct twin: under autocast, forward runs in float32 (its inputs cast) and backward
    under the same autocast state as forward."""

    @staticmethod
    @AMP_FORWARD
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @AMP_BACKWARD
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g


class MatmulAutocastFastPath(Function):
    """BROKEN under autocast only: a bfloat16 fast path taken when autocast is on, whose
    backward scales grad_x twice (float32 and float64 runs never take it)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor) -> Tensor:
        ctx.fast = cpu_autocast_on()
        ctx.save_for_backward(x, w)
        if ctx.fast:
            return (x.bfloat16() @ w.bfloat16()).float()
        return x @ w

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, w = ctx.saved_tensors
        scale = 2.0 if ctx.fast else 1.0  # the bug: a scale meant for a loss-scaled path
        return scale * (g @ w.t().to(g.dtype)), x.t().to(g.dtype) @ g


def matmul_reference(x: Tensor, w: Tensor) -> Tensor:
    return x @ w


# --- capabilities: torch.compile, torch.func, determinism --------------------------------------


class ScaleCompileFastPath(Function):
    """BROKEN under torch.compile only: a path taken while compiling
    (torch.compiler.is_compiling()) that forgets the factor in backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        # torch.compiler.is_compiling arrived in torch 2.3 (whose compile traces Functions)
        if getattr(torch.compiler, "is_compiling", lambda: False)():
            return g  # the bug: the "fused" path lost the factor 3
        return g * 3


class ExpFunc(Function):
    """Correct, and transformable: forward without ctx, setup_context, a generated vmap rule;
    torch.func.vmap and torch.func.grad work on it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return x.exp()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class ExpBadVmapRule(ExpFunc):
    """BROKEN under vmap only: ExpFunc with a hand-written vmap rule that reduces over the batch
    dim (every sample gets the batch mean's exp)."""

    generate_vmap_rule = False  # the rule below, not a generated one

    @staticmethod
    def vmap(info: Any, in_dims: tuple[int | None], x: Tensor) -> tuple[Tensor, int]:
        (dim,) = in_dims
        x = x.movedim(dim, 0) if dim is not None else x.expand(info.batch_size, *x.shape)
        return x.mean(0, keepdim=True).exp().expand_as(x), 0


class ExpNoisyBackward(Exp):
    """NOT DETERMINISTIC: Exp whose backward adds rounding-level noise, as atomic adds in a GPU
    kernel do (right to within any tolerance, bitwise different run to run)."""

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        grad = Exp.backward(ctx, g)
        noise = torch.randn(grad.shape, dtype=grad.dtype, device=grad.device,
                            generator=NOISE)
        return grad * (1 + 1e-14 * noise)


#: A generator of its own: gradlab replays the global RNG between runs (dropout-style
#: randomness is deterministic), not a kernel's scheduling.
NOISE = torch.Generator().manual_seed(0)


def exp_vmap_detached(x: Tensor) -> Tensor:
    """BROKEN under vmap with autograd only: ExpFunc, except that a batched input (inside
    torch.func.vmap) runs on its detached data, as an extension kernel with no batching rule
    does: the values are right, the graph is lost (per-sample gradients silently absent)."""
    if torch._C._functorch.is_batchedtensor(x):
        return x.detach().exp()
    return ExpFunc.apply(x)


def exp_func(x: Tensor) -> Tensor:
    """ExpFunc.apply as a plain callable: exp_vmap_detached's twin."""
    return ExpFunc.apply(x)

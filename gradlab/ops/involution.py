"""involution (Li et al., CVPR 2021): every output pixel has its own K×K kernel per channel group.

out[b, c, h, w] = sum_{i,j} w[b, g(c), i, j, h, w] * x[b, c, h*s - p + i*d, w*s - p + j*d], zero
outside the image, g(c) = c // (C / G).

The reference unfolds x (F.unfold), which makes autograd keep a K²-times copy of the input for
backward.  The custom Function keeps only x and w: on CUDA (or when forced, see `FORCE_TRITON`) it
runs the Triton kernels in gradlab.kernels.involution_triton; elsewhere it accumulates over the K²
taps with strided views of the zero-padded input, so no K²-times tensor exists even transiently.

Second order is not supported on any device: the Triton backward is not differentiable, so the
backward is first order only everywhere.  It does not use `once_differentiable`, whose error node
hangs off detached copies: `torch.autograd.grad(grad_x, w)` then fails with a misleading "not used
in the graph" (and gradgradcheck with a Jacobian mismatch).  Instead, under create_graph the
gradients are tied to grad_output, x and w by `_FirstOrderOnly`, whose backward raises a clear
error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx

from gradlab.kernels.involution_launch import read_switches
from gradlab.model import OpDef

IntPair = int | Sequence[int]

#: Run the Triton kernels even on CPU tensors (tests drive them under TRITON_INTERPRET=1).
FORCE_TRITON = False
#: Environment variable with the same effect as FORCE_TRITON when set to "1".
FORCE_TRITON_ENV = "GRADLAB_INVOLUTION_TRITON"


def _pair(v: IntPair) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    a, b = v
    return (int(a), int(b))


def _out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


#: The (x shape, w shape, stride, padding, dilation) that fitted: checked once each.
_FITTED: set[tuple[Any, ...]] = set()


def _check_shapes(x: torch.Tensor, w: torch.Tensor, s: tuple[int, int], p: tuple[int, int],
                  d: tuple[int, int]) -> None:
    if x.dtype != w.dtype or x.device != w.device:
        raise TypeError(f"involution: x and w differ in dtype or device ({x.dtype}/{x.device} vs "
                        f"{w.dtype}/{w.device})")
    key = (x.shape, w.shape, s, p, d)
    if key in _FITTED:
        return
    if x.dim() != 4 or w.dim() != 6:
        raise ValueError(f"involution expects x [B,C,H,W] and w [B,G,KH,KW,Ho,Wo], got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    b, c, h, wd = x.shape
    kh, kw = w.shape[2], w.shape[3]
    ho, wo = _out_size(h, kh, s[0], p[0], d[0]), _out_size(wd, kw, s[1], p[1], d[1])
    g = w.shape[1]
    if w.shape[0] != b or g == 0 or c % g or tuple(w.shape[4:]) != (ho, wo):
        raise ValueError(f"involution: w shape {tuple(w.shape)} does not fit x shape "
                         f"{tuple(x.shape)} (expected [{b}, G | {c}, KH, KW, {ho}, {wo}])")
    _FITTED.add(key)


def involution_reference(x: torch.Tensor, w: torch.Tensor, stride: IntPair = 1,
                         padding: IntPair = 0, dilation: IntPair = 1) -> torch.Tensor:
    """Plain-autograd involution via F.unfold (keeps the K²-times unfolded input for backward)."""
    b, c, _, _ = x.shape
    _, g, kh, kw, ho, wo = w.shape
    cols = F.unfold(x, (kh, kw), dilation=_pair(dilation), padding=_pair(padding),
                    stride=_pair(stride))
    cols = cols.view(b, g, c // g, kh * kw, ho, wo)
    out = (cols * w.reshape(b, g, 1, kh * kw, ho, wo)).sum(dim=3)
    return out.reshape(b, c, ho, wo)


def _tap(t: torch.Tensor, i: int, j: int, size: tuple[int, int], s: tuple[int, int],
         d: tuple[int, int]) -> torch.Tensor:
    """The strided view of padded `t` [B, C, Hp, Wp] that tap (i, j) reads: [B, C, Ho, Wo]."""
    h0, w0 = i * d[0], j * d[1]
    return t[:, :, h0:h0 + s[0] * (size[0] - 1) + 1:s[0], w0:w0 + s[1] * (size[1] - 1) + 1:s[1]]


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    # 16-bit inputs accumulate in float32 (as the Triton kernels do): K² roundings would add up.
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _torch_forward(x: torch.Tensor, w: torch.Tensor, s: tuple[int, int], p: tuple[int, int],
                   d: tuple[int, int]) -> torch.Tensor:
    """Tap-by-tap forward: one padded copy of x, never the K²-times unfolded tensor."""
    b, c, _, _ = x.shape
    _, g, kh, kw, ho, wo = w.shape
    acc = _acc_dtype(x.dtype)
    xp = F.pad(x.to(acc), (p[1], p[1], p[0], p[0]))
    wa = w.to(acc)
    out = xp.new_zeros((b, g, c // g, ho, wo))
    for i in range(kh):
        for j in range(kw):
            # Splitting only the channel dim keeps .view valid on the strided tap slice.
            xs = _tap(xp, i, j, (ho, wo), s, d).view(b, g, c // g, ho, wo)
            out.addcmul_(xs, wa[:, :, i, j].unsqueeze(2))
    return out.view(b, c, ho, wo).to(x.dtype)


def _torch_grad_input(go: torch.Tensor, w: torch.Tensor, x_shape: torch.Size,
                      s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> torch.Tensor:
    """Scatter-add grad_output * w into the tap slices of a padded buffer, then crop."""
    b, c, h, wd = x_shape
    _, g, kh, kw, ho, wo = w.shape
    acc = _acc_dtype(w.dtype)
    # reshape, not view: grad_output may be a stride-0 expansion (out.sum().backward()).
    go5 = go.to(acc).reshape(b, g, c // g, ho, wo)
    wa = w.to(acc)
    gxp = go5.new_zeros((b, c, h + 2 * p[0], wd + 2 * p[1]))
    for i in range(kh):
        for j in range(kw):
            dst = _tap(gxp, i, j, (ho, wo), s, d).view(b, g, c // g, ho, wo)
            dst.addcmul_(go5, wa[:, :, i, j].unsqueeze(2))
    return gxp[:, :, p[0]:p[0] + h, p[1]:p[1] + wd].to(w.dtype)


def _torch_grad_weight(go: torch.Tensor, x: torch.Tensor, w_shape: torch.Size,
                       s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> torch.Tensor:
    """grad_w[:, :, i, j] = sum over each group's channels of grad_output * tap (i, j) of x."""
    b, c, _, _ = x.shape
    _, g, kh, kw, ho, wo = w_shape
    acc = _acc_dtype(x.dtype)
    go5 = go.to(acc).reshape(b, g, c // g, ho, wo)
    xp = F.pad(x.to(acc), (p[1], p[1], p[0], p[0]))
    gw = xp.new_empty(tuple(w_shape))
    prod = xp.new_empty((b, g, c // g, ho, wo))  # reused by every tap
    for i in range(kh):
        for j in range(kw):
            xs = _tap(xp, i, j, (ho, wo), s, d).view(b, g, c // g, ho, wo)
            torch.mul(go5, xs, out=prod)
            gw[:, :, i, j] = prod.sum(dim=2)
    return gw.to(x.dtype)


def _copy_fits(x_shape: torch.Size, w_shape: torch.Size) -> bool:
    """Whether the forward may keep a layout copy of x for grad_weight (instead of converting x
    again): when x and the copy together are no larger than the unfolded input the reference
    keeps for backward (K² values per output pixel and channel, against 2 per input pixel)."""
    _, _, kh, kw, ho, wo = w_shape
    return 2 * x_shape[2] * x_shape[3] <= kh * kw * ho * wo


_KERNEL_MODULES: list[ModuleType] = []


def _kernels() -> tuple[ModuleType, ModuleType]:
    """The NCHW and channels-last kernel modules, imported on first use (triton loads then)."""
    if not _KERNEL_MODULES:
        from gradlab.kernels import involution_triton, involution_triton_cl

        _KERNEL_MODULES.extend((involution_triton, involution_triton_cl))
    return _KERNEL_MODULES[0], _KERNEL_MODULES[1]


def _use_triton(x: torch.Tensor) -> bool:
    """Triton on CUDA tensors (when installed), or anywhere when forced."""
    forced = FORCE_TRITON or os.environ.get(FORCE_TRITON_ENV) == "1"
    if not (forced or x.is_cuda):
        return False
    have: bool = _kernels()[0].HAVE_TRITON
    if forced and not have:
        raise RuntimeError(f"involution: the Triton path is forced ({FORCE_TRITON_ENV} / "
                           "FORCE_TRITON) but triton is not installed")
    # CUDA without triton falls back to the torch path, which runs on any device.
    return have


SECOND_ORDER_ERROR = (
    "involution has no second derivative: its backward (Triton kernels, or a tap loop run without "
    "autograd) is first order only (OP.second_order is False)"
)


class _FirstOrderOnly(torch.autograd.Function):
    """Identity on first-order gradients that makes differentiating them raise a clear error.

    Its inputs are (grad_output, x, w, *grads), so every second-order path, whichever of them it
    differentiates with respect to, reaches this node's backward.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, grad_out: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                *grads: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return grads

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        raise RuntimeError(SECOND_ORDER_ERROR)


def _first_order_only(grad_out: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                      gx: torch.Tensor | None,
                      gw: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Route (gx, gw) through `_FirstOrderOnly` when some input of the backward needs grad."""
    present = [g for g in (gx, gw) if g is not None]
    if not present or not any(t.requires_grad for t in (grad_out, x, w)):
        return gx, gw
    tied = iter(_FirstOrderOnly.apply(grad_out, x, w, *present))
    return (None if gx is None else next(tied)), (None if gw is None else next(tied))


class Involution(torch.autograd.Function):
    """involution with a memory-lean backward: saves only x and w."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, stride: IntPair = 1,
                padding: IntPair = 0, dilation: IntPair = 1) -> torch.Tensor:
        s, p, d = _pair(stride), _pair(padding), _pair(dilation)
        _check_shapes(x, w, s, p, d)
        use_triton = _use_triton(x)
        kept = None
        if use_triton:
            kt, kcl = _kernels()
            ctx.switches = read_switches()
            layouts = kcl.LayoutCache()
            out: torch.Tensor = kt.involution_forward(x, w, s, p, d, switches=ctx.switches,
                                                      layouts=layouts)
            if ctx.needs_input_grad[1] and _copy_fits(x.shape, w.shape):  # for grad_weight
                kept = layouts.copy_of(x)
            ctx.kept_format = kept[0] if kept else None
        else:
            out = _torch_forward(x, w, s, p, d)
        # the kept copy of x is saved like x (saved-tensor hooks see it too)
        ctx.save_for_backward(x, w, *([kept[1]] if kept else []))
        ctx.geometry = (s, p, d)
        ctx.use_triton = use_triton
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w, *copy = ctx.saved_tensors
        if torch.is_grad_enabled():  # backward(create_graph=True): never recorded
            with torch.no_grad():
                gx, gw = Involution._first_order(ctx, grad_out, x, w, copy)
            gx, gw = _first_order_only(grad_out, x, w, gx, gw)
        else:
            gx, gw = Involution._first_order(ctx, grad_out, x, w, copy)
        return gx, gw, None, None, None

    @staticmethod
    def _first_order(ctx: Any, grad_out: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     copy: list[torch.Tensor]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(grad_x, grad_w), each None unless needed (run with grad mode off); `copy`: the
        forward's copy of x in ctx.kept_format, when kept."""
        s, p, d = ctx.geometry
        gx = gw = None
        if ctx.use_triton:
            kt, kcl = _kernels()
            # the forward's copy of x (if kept), and grad_output's copies, made once for both
            sw, layouts = ctx.switches, kcl.LayoutCache()
            if copy:
                layouts.add(x, ctx.kept_format, copy[0])
            if ctx.needs_input_grad[0]:
                gx = kt.involution_grad_input(grad_out, w, x.shape, s, p, d, switches=sw,
                                              layouts=layouts)
            if ctx.needs_input_grad[1]:
                gw = kt.involution_grad_weight(grad_out, x, w.shape, s, p, d, switches=sw,
                                               layouts=layouts)
        else:
            if ctx.needs_input_grad[0]:
                gx = _torch_grad_input(grad_out, w, x.shape, s, p, d)
            if ctx.needs_input_grad[1]:
                gw = _torch_grad_weight(grad_out, x, w.shape, s, p, d)
        return gx, gw


def involution(x: torch.Tensor, w: torch.Tensor, stride: IntPair = 1, padding: IntPair = 0,
               dilation: IntPair = 1) -> torch.Tensor:
    """The custom Function with the reference's signature (Function.apply takes no defaults)."""
    out: torch.Tensor = Involution.apply(x, w, stride, padding, dilation)
    return out


OP = OpDef(
    name="involution",
    summary="involution: per-pixel KxK kernels per group; Triton on CUDA, saves only x, w",
    function=involution,
    reference=involution_reference,
    second_order=False,
    dtypes=("float64", "float32"),
    devices=("cpu", "cuda"),
)

"""`modconv`: StyleGAN2's modulated convolution (style MLP, modulation, demodulation, up/down).

The custom part is the blur (a Function with a Function backward, see `gradlab.ops.blur`); the rest
is autograd, written with the usual batch-into-groups trick.  The reference does the same math one
sample at a time with plain convolutions and a plain-autograd blur, so it shares neither the
grouped-conv reshapes nor the custom Functions with the implementation it checks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gradlab.model import OpDef
from gradlab.ops.blur import blur, blur_reference

#: Added under the square roots: StyleGAN2's values (PixelNorm, demodulation).
PIXEL_NORM_EPS = 1e-8
DEMOD_EPS = 1e-5
PADDING_TYPES = ("reflect", "zero")


def pixel_norm(x: Tensor, eps: float = PIXEL_NORM_EPS) -> Tensor:
    """Scale each sample's feature vector (dim 1) to unit root-mean-square."""
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps)


def equal_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """A linear layer with the equalized-learning-rate scale 1/sqrt(in_dim) applied at run time."""
    return F.linear(x, weight * (1.0 / math.sqrt(weight.shape[1])), bias)


class PixelNorm(nn.Module):
    """`pixel_norm` as a module."""

    def forward(self, x: Tensor) -> Tensor:
        return pixel_norm(x)


class EqualLinear(nn.Module):
    """Linear layer with an equalized learning rate (unit-normal weight, scaled at run time)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, x: Tensor) -> Tensor:
        return equal_linear(x, self.weight, self.bias)


def _check_args(
    x: Tensor, latent: Tensor, weight: Tensor, style_weight: Tensor, upsample: bool,
    downsample: bool, padding_type: str,
) -> None:
    """Fail early with a readable message (a grouped conv can misread mismatched shapes)."""
    if upsample and downsample:
        raise ValueError("modulated_conv2d: upsample and downsample are exclusive")
    if padding_type not in PADDING_TYPES:
        raise ValueError(f"padding_type must be one of {PADDING_TYPES}, got {padding_type!r}")
    if weight.dim() != 4 or weight.shape[2] != weight.shape[3] or weight.shape[2] % 2 == 0:
        raise ValueError(f"weight must be [C_out, C_in, k, k] with odd k, got "
                         f"{tuple(weight.shape)}")
    if x.dim() != 4 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x {tuple(x.shape)} does not match weight {tuple(weight.shape)}")
    if latent.dim() != 2 or latent.shape[0] != x.shape[0]:
        raise ValueError(f"latent must be [B, latent_dim] with B={x.shape[0]}, got "
                         f"{tuple(latent.shape)}")
    if tuple(style_weight.shape) != (weight.shape[1], latent.shape[1]):
        raise ValueError(f"style_weight must be [C_in, latent_dim] = "
                         f"{(weight.shape[1], latent.shape[1])}, got {tuple(style_weight.shape)}")


def modulated_conv2d(
    x: Tensor,
    latent: Tensor,
    weight: Tensor,
    bias: Tensor,
    style_weight: Tensor,
    style_bias: Tensor,
    *,
    upsample: bool = False,
    downsample: bool = False,
    padding_type: str = "reflect",
    normalize_mlp: bool = False,
    demodulate: bool | None = None,
) -> Tensor:
    """StyleGAN2 modulated conv of x [B, C_in, H, W] styled by latent [B, latent_dim].

    weight [C_out, C_in, k, k] (odd k), bias [1, C_out, 1, 1] (or [C_out]), style_weight
    [C_in, latent_dim], style_bias [C_in].  The output is [B, C_out, H, W], or 2H x 2W with
    `upsample` (nearest, conv, blur), H//2 x W//2 with `downsample` (blur, conv, 2x2 average).
    `demodulate` None means "unless the kernel is 1x1".
    """
    _check_args(x, latent, weight, style_weight, upsample, downsample, padding_type)
    c_out, c_in, k, _ = weight.shape
    batch = x.shape[0]
    if demodulate is None:
        demodulate = k > 1

    style = equal_linear(latent, style_weight, style_bias)
    if normalize_mlp:
        style = pixel_norm(style)
    scale = 1.0 + style  # [B, C_in]: 1 + style, so a zero style leaves the weight unchanged

    # He-style constant for the unit-normal weight, then one modulated copy per sample.
    w = weight * math.sqrt(2.0 / (c_in * k * k))
    w = w.unsqueeze(0) * scale.reshape(batch, 1, c_in, 1, 1)  # [B, C_out, C_in, k, k]
    if demodulate:
        w = w * torch.rsqrt(w.pow(2).sum(dim=(2, 3, 4), keepdim=True) + DEMOD_EPS)

    if upsample:
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
    if downsample:
        x = blur(x, "binomial")

    # Fold the batch into channels: one grouped conv applies each sample's own weights.
    height, width = x.shape[-2:]
    x = x.reshape(1, batch * c_in, height, width)
    pad = k // 2
    if pad:
        pad_mode = "reflect" if padding_type == "reflect" else "constant"
        x = F.pad(x, (pad, pad, pad, pad), mode=pad_mode)
    out = F.conv2d(x, w.reshape(batch * c_out, c_in, k, k), groups=batch)
    out = out.reshape(batch, c_out, height, width) + bias.reshape(1, c_out, 1, 1)

    if downsample:
        out = F.avg_pool2d(out, 2)
    if upsample:
        out = blur(out, "binomial")
    return out


def modconv_reference(
    x: Tensor,
    latent: Tensor,
    weight: Tensor,
    bias: Tensor,
    style_weight: Tensor,
    style_bias: Tensor,
    *,
    upsample: bool = False,
    downsample: bool = False,
    padding_type: str = "reflect",
    normalize_mlp: bool = False,
    demodulate: bool | None = None,
) -> Tensor:
    """Plain-autograd baseline: the same math one sample at a time, no grouped conv."""
    c_out, c_in, k, _ = weight.shape
    latent_dim = latent.shape[1]
    if demodulate is None:
        demodulate = k > 1
    pad = k // 2
    mode = "reflect" if padding_type == "reflect" else "constant"
    outs = []
    for i in range(x.shape[0]):
        style = latent[i] @ style_weight.t() / math.sqrt(latent_dim) + style_bias  # [C_in]
        if normalize_mlp:
            style = style / torch.sqrt(torch.mean(style * style) + PIXEL_NORM_EPS)
        w = weight * (1.0 + style).reshape(1, c_in, 1, 1) / math.sqrt(c_in * k * k / 2.0)
        if demodulate:
            w = w / torch.sqrt((w * w).sum(dim=(1, 2, 3), keepdim=True) + DEMOD_EPS)
        xi = x[i : i + 1]
        if upsample:
            xi = xi.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
        if downsample:
            xi = blur_reference(xi, "binomial")
        if pad:
            xi = F.pad(xi, (pad, pad, pad, pad), mode=mode)
        yi = F.conv2d(xi, w) + bias.reshape(1, c_out, 1, 1)
        if downsample:
            yi = F.avg_pool2d(yi, 2)
        if upsample:
            yi = blur_reference(yi, "binomial")
        outs.append(yi)
    return torch.cat(outs, dim=0)


class ModulatedConv2d(nn.Module):
    """StyleGAN2 modulated conv layer: parameters plus a style MLP; math in `modulated_conv2d`."""

    def __init__(
        self,
        fin: int,
        fout: int,
        kernel_size: int,
        padding_type: str = "reflect",
        upsample: bool = False,
        downsample: bool = False,
        latent_dim: int = 256,
        normalize_mlp: bool = False,
    ) -> None:
        super().__init__()
        if padding_type not in PADDING_TYPES:
            raise ValueError(f"padding_type must be one of {PADDING_TYPES}, got {padding_type!r}")
        if upsample and downsample:
            raise ValueError("ModulatedConv2d: upsample and downsample are exclusive")
        self.in_channels = fin
        self.out_channels = fout
        self.kernel_size = kernel_size
        self.padding_type = padding_type
        self.upsample = upsample
        self.downsample = downsample
        self.normalize_mlp = normalize_mlp
        # Unit-normal weight: the sqrt(2 / fan_in) constant is applied in the forward.
        self.weight = nn.Parameter(torch.randn(fout, fin, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(1, fout, 1, 1))
        self.style = EqualLinear(latent_dim, fin)

    def forward(self, x: Tensor, latent: Tensor) -> Tensor:
        return modulated_conv2d(
            x, latent, self.weight, self.bias, self.style.weight, self.style.bias,
            upsample=self.upsample, downsample=self.downsample, padding_type=self.padding_type,
            normalize_mlp=self.normalize_mlp,
        )

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"padding_type={self.padding_type!r}, upsample={self.upsample}, "
                f"downsample={self.downsample}, normalize_mlp={self.normalize_mlp}")


def modconv(
    x: Tensor, latent: Tensor, weight: Tensor, bias: Tensor, style_weight: Tensor,
    style_bias: Tensor, upsample: bool, downsample: bool, padding_type: str, normalize_mlp: bool,
) -> Tensor:
    """`modulated_conv2d` with every argument positional (the form a Case calls)."""
    return modulated_conv2d(
        x, latent, weight, bias, style_weight, style_bias, upsample=upsample,
        downsample=downsample, padding_type=padding_type, normalize_mlp=normalize_mlp,
    )


def modconv_reference_positional(
    x: Tensor, latent: Tensor, weight: Tensor, bias: Tensor, style_weight: Tensor,
    style_bias: Tensor, upsample: bool, downsample: bool, padding_type: str, normalize_mlp: bool,
) -> Tensor:
    """`modconv_reference` with every argument positional (the form a Case calls)."""
    return modconv_reference(
        x, latent, weight, bias, style_weight, style_bias, upsample=upsample,
        downsample=downsample, padding_type=padding_type, normalize_mlp=normalize_mlp,
    )


OP = OpDef(
    name="modconv",
    summary="StyleGAN2 modulated conv (EqualLinear, PixelNorm, demodulation, up/down + blur)",
    function=modconv,
    reference=modconv_reference_positional,
    second_order=True,
)

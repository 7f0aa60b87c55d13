"""The modconv op: grouped implementation vs per-sample reference, gradients, and the module."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

from gradlab import ops
from gradlab.cases import dtype_name, materialize
from gradlab.model import Case, TensorArg
from gradlab.ops.modconv import (
    EqualLinear,
    ModulatedConv2d,
    PixelNorm,
    modconv,
    modconv_reference,
    modconv_reference_positional,
    modulated_conv2d,
)
from gradlab.spec import resolve

(TARGET,) = resolve("modconv")  # the cases live in gradlab/specs/modconv.yaml
OP = ops.resolved(TARGET.op)  # the module's own callables (a spec imports them lazily)
CASES = {c.name: c for c in OP.cases}


def make_args(case: Case, seed: int = 0, dtype: torch.dtype = torch.float64) -> list[Any]:
    """Case args as tensors (TensorArg) or the plain values themselves."""
    return materialize(case, dtype_name(dtype), "cpu", seed).args


def tensors(args: list[Any]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def test_cases_cover_every_variant() -> None:
    assert set(CASES) == {"reflect", "zero_pad", "upsample", "downsample", "normalize_mlp",
                          "kernel1x1"}
    # All six tensor inputs are differentiated.
    for case in OP.cases:
        assert sum(isinstance(a, TensorArg) and a.requires_grad for a in case.args) == 6
    assert OP.second_order
    assert OP.function is modconv
    assert OP.reference is modconv_reference_positional


@pytest.mark.parametrize("name", list(CASES))
def test_matches_reference_float64(name: str) -> None:
    args = make_args(CASES[name])
    out = OP.function(*args)
    ref = modconv_reference_positional(*args)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                           dtype=torch.float64)
    got = torch.autograd.grad(out, tensors(args), grad_out)
    want = torch.autograd.grad(ref, tensors(args), grad_out)
    # As dicts, so a failure names the input ("The failure occurred for item ['weight']").
    names = ["x", "latent", "weight", "bias", "style_weight", "style_bias"]
    torch.testing.assert_close(dict(zip(names, got, strict=True)),
                               dict(zip(names, want, strict=True)), rtol=1e-10, atol=1e-12)


def shrink(case: Case, group: tuple[tuple[int, int], ...]) -> Case:
    """The case with every (arg, dim) of a size1 group set to 1."""
    args = list(case.args)
    for pos, dim in group:
        shape = list(args[pos].shape)
        shape[dim] = 1
        args[pos] = replace(args[pos], shape=tuple(shape))
    return replace(case, args=tuple(args))


@pytest.mark.parametrize("name", list(CASES))
def test_size1_variants_match_reference(name: str) -> None:
    """B=1, C_out=1, C_in=1: shapes still agree and the grouped conv still matches."""
    case = CASES[name]
    assert case.size1
    for group in case.size1:
        args = make_args(shrink(case, group), seed=3)
        out, ref = modconv(*args), modconv_reference_positional(*args)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        got = torch.autograd.grad(out, tensors(args), torch.ones_like(out))
        want = torch.autograd.grad(ref, tensors(args), torch.ones_like(ref))
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_gradcheck_batch_of_one() -> None:
    case = shrink(CASES["upsample"], CASES["upsample"].size1[0])
    assert torch.autograd.gradcheck(modconv, make_args(case))


@pytest.mark.parametrize("name", list(CASES))
def test_float32_within_op_tolerance(name: str) -> None:
    """What `gradlab check` will do: float32 custom op against the float64 reference."""
    args64 = make_args(CASES[name])
    args32 = make_args(CASES[name], dtype=torch.float32)
    tol = OP.tolerance("float32")
    out, ref = OP.function(*args32), modconv_reference_positional(*args64)
    torch.testing.assert_close(out.double(), ref, rtol=tol.rtol, atol=tol.atol)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                           dtype=torch.float64)
    got = torch.autograd.grad(out, tensors(args32), grad_out.float())
    want = torch.autograd.grad(ref, tensors(args64), grad_out)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=tol.rtol, atol=tol.atol)


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name: str) -> None:
    assert torch.autograd.gradcheck(modconv, make_args(CASES[name]))


@pytest.mark.parametrize("name", ["upsample", "downsample"])
def test_gradgradcheck(name: str) -> None:
    """Blur after the conv (upsample) and before it (downsample): both second order."""
    assert torch.autograd.gradgradcheck(modconv, make_args(CASES[name]))


def test_demodulation_removes_weight_scale() -> None:
    """Demodulated output does not depend on the weight's scale; a 1x1 kernel's does."""
    args = make_args(CASES["reflect"])
    x, latent, weight, bias, sw, sb = (t.detach() for t in tensors(args))
    zero = torch.zeros_like(bias)
    base = modulated_conv2d(x, latent, weight, zero, sw, sb)
    torch.testing.assert_close(modulated_conv2d(x, latent, 10 * weight, zero, sw, sb), base,
                               rtol=1e-4, atol=1e-6)  # only the 1e-5 eps breaks invariance
    w1 = weight[:, :, :1, :1]
    base1 = modulated_conv2d(x, latent, w1, zero, sw, sb)
    torch.testing.assert_close(modulated_conv2d(x, latent, 10 * w1, zero, sw, sb), 10 * base1)
    # Forcing demodulation on the 1x1 kernel brings the invariance back.
    d1 = modulated_conv2d(x, latent, w1, zero, sw, sb, demodulate=True)
    torch.testing.assert_close(
        modulated_conv2d(x, latent, 10 * w1, zero, sw, sb, demodulate=True), d1,
        rtol=1e-4, atol=1e-6,
    )


def test_samples_are_independent() -> None:
    """The grouped conv must not leak one sample's style into another's output."""
    args = make_args(CASES["upsample"])
    x, latent, weight, bias, sw, sb = (t.detach() for t in tensors(args))
    out = modulated_conv2d(x, latent, weight, bias, sw, sb, upsample=True)
    latent2 = latent.clone()
    latent2[1] += 1.0
    out2 = modulated_conv2d(x, latent2, weight, bias, sw, sb, upsample=True)
    torch.testing.assert_close(out2[0], out[0], rtol=0, atol=0)
    assert not torch.allclose(out2[1], out[1])


def test_equal_linear_and_pixel_norm() -> None:
    lin = EqualLinear(4, 3).double()
    z = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(lin(z), z @ lin.weight.t() / 2.0 + lin.bias)
    y = PixelNorm()(torch.randn(5, 7, dtype=torch.float64))
    torch.testing.assert_close(y.pow(2).mean(dim=1), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize(
    ("kwargs", "hw_out"),
    [({}, (8, 6)), ({"upsample": True}, (16, 12)), ({"downsample": True}, (4, 3)),
     ({"padding_type": "zero", "normalize_mlp": True}, (8, 6))],
    ids=["plain", "upsample", "downsample", "zero_normalize"],
)
def test_module_shapes_and_grads(kwargs: dict[str, Any], hw_out: tuple[int, int]) -> None:
    torch.manual_seed(0)
    layer = ModulatedConv2d(3, 5, 3, latent_dim=7, **kwargs)
    x = torch.randn(2, 3, 8, 6)
    out = layer(x, torch.randn(2, 7))
    assert out.shape == (2, 5, *hw_out)
    out.square().mean().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert {n for n, _ in layer.named_parameters()} == {"weight", "bias", "style.weight",
                                                        "style.bias"}
    assert layer.bias.shape == (1, 5, 1, 1)


def test_module_matches_reference() -> None:
    torch.manual_seed(0)
    layer = ModulatedConv2d(3, 4, 3, upsample=True, latent_dim=5).double()
    x, z = torch.randn(2, 3, 4, 5, dtype=torch.float64), torch.randn(2, 5, dtype=torch.float64)
    ref = modconv_reference(x, z, layer.weight, layer.bias, layer.style.weight, layer.style.bias,
                            upsample=True)
    torch.testing.assert_close(layer(x, z), ref)


def test_bad_arguments_are_refused() -> None:
    args = make_args(CASES["reflect"])
    x, latent, weight, bias, sw, sb = tensors(args)
    with pytest.raises(ValueError, match="exclusive"):
        modulated_conv2d(x, latent, weight, bias, sw, sb, upsample=True, downsample=True)
    with pytest.raises(ValueError, match="padding_type"):
        modulated_conv2d(x, latent, weight, bias, sw, sb, padding_type="circular")
    with pytest.raises(ValueError, match="odd"):
        modulated_conv2d(x, latent, weight[..., :2, :2], bias, sw, sb)
    with pytest.raises(ValueError, match="does not match"):
        modulated_conv2d(x[:, :2], latent, weight, bias, sw, sb)
    with pytest.raises(ValueError, match="style_weight"):
        modulated_conv2d(x, latent, weight, bias, sw.t(), sb)

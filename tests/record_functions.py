"""Functions and a custom op for tests/test_record.py's recorder tests: importable by name
(tests/ is on sys.path), as a project's own modules are."""

import torch
from torch import nn


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class Outer(torch.autograd.Function):
    """Calls Double inside its forward: a nested call."""

    @staticmethod
    def forward(ctx, x):
        return Double.apply(x, 3.0) + 1

    @staticmethod
    def backward(ctx, g):
        return g * 3.0


class Cast(torch.autograd.Function):
    """Takes a torch.dtype: an argument no YAML value can be."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return x.to(dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype), None


class Layer(nn.Module):
    """A Function inside an nn.Module."""

    def forward(self, x):
        return Outer.apply(x)


if hasattr(torch.library, "custom_op"):

    @torch.library.custom_op("gradlab_test_record::cube", mutates_args=())
    def cube(x: torch.Tensor) -> torch.Tensor:
        return x**3

    def _cube_backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g

    def _cube_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    cube.register_autograd(_cube_backward, setup_context=_cube_setup)

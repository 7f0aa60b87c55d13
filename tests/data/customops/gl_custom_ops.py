"""torch.library custom ops for tests/test_customops.py and the specs beside this file: one
correct op, `scale_sin` (x * sin(w), with a fake kernel and a registered backward), and broken
copies of it, each wrong in one way; `scale_sin` is the correct twin of every one.

Ops are registered once per process, in torch's global registry: a second import of this
file (under another module name, say) takes them from there instead of registering them again
(torch 2.13 would replace them silently, leaving the op objects taken before stale).  No
`from __future__ import annotations`: torch 2.4's custom_op reads the annotations as types.
"""

from typing import Any

import torch
from torch import Tensor
from torch._library.custom_ops import OPDEFS

#: The ops' namespace, used by no other test module.
NS = "gradlab_cops"
#: The ops defined here, by name.
NAMES = ("scale_sin", "bad_fake", "mutates_input", "bad_grad", "no_fake")


def scale_sin_reference(x: Tensor, w: Tensor) -> Tensor:
    """The same math in plain autograd."""
    return x * w.sin()


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])


def _backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
    x, w = ctx.saved_tensors
    return g * w.sin(), g * x * w.cos()


def _backward_times_1_5(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
    x, w = ctx.saved_tensors
    return 1.5 * g * w.sin(), 1.5 * g * x * w.cos()  # BROKEN: 1.5x the gradient


def _fake(x: Tensor, w: Tensor) -> Tensor:
    return torch.empty_like(x)


def _define() -> None:
    @torch.library.custom_op(f"{NS}::scale_sin", mutates_args=())
    def scale_sin(x: Tensor, w: Tensor) -> Tensor:
        return x * w.sin()

    scale_sin.register_fake(_fake)
    scale_sin.register_autograd(_backward, setup_context=_setup)

    @torch.library.custom_op(f"{NS}::bad_fake", mutates_args=())
    def bad_fake(x: Tensor, w: Tensor) -> Tensor:
        return x * w.sin()

    @bad_fake.register_fake
    def _(x: Tensor, w: Tensor) -> Tensor:
        return x.new_empty(x.shape[0], x.shape[1] + 1)  # BROKEN: one column too many

    bad_fake.register_autograd(_backward, setup_context=_setup)

    @torch.library.custom_op(f"{NS}::mutates_input", mutates_args=())
    def mutates_input(x: Tensor, w: Tensor) -> Tensor:
        out = x * w.sin()
        x.mul_(0.5)  # BROKEN: x used as scratch, not declared in mutates_args
        return out

    mutates_input.register_fake(_fake)
    mutates_input.register_autograd(_backward, setup_context=_setup)

    @torch.library.custom_op(f"{NS}::bad_grad", mutates_args=())
    def bad_grad(x: Tensor, w: Tensor) -> Tensor:
        return x * w.sin()

    bad_grad.register_fake(_fake)
    bad_grad.register_autograd(_backward_times_1_5, setup_context=_setup)

    @torch.library.custom_op(f"{NS}::no_fake", mutates_args=())
    def no_fake(x: Tensor, w: Tensor) -> Tensor:
        return x * w.sin()  # right, but no register_fake: torch.compile cannot trace it

    no_fake.register_autograd(_backward, setup_context=_setup)


if f"{NS}::{NAMES[0]}" not in OPDEFS:
    _define()
#: name -> the custom_op function (a torch._library.custom_ops.CustomOpDef)
OPS: dict[str, Any] = {name: OPDEFS[f"{NS}::{name}"] for name in NAMES}
scale_sin = OPS["scale_sin"]  # a spec may name the custom_op function itself: module:attr


def _define_raising() -> None:
    @torch.library.custom_op(f"{NS}::raises", mutates_args=())
    def raises(x: Tensor, w: Tensor) -> Tensor:
        raise ValueError("this kernel takes 1-D inputs only")  # a crash, not an opcheck cause

    raises.register_fake(_fake)


if f"{NS}::raises" not in OPDEFS:
    _define_raising()


def positives_reference(x: Tensor, w: Tensor) -> Tensor:
    return (x * w.sin())[x > 0]


def _positives_setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    x, w = inputs
    ctx.save_for_backward(x, w)


def _positives_backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
    x, w = ctx.saved_tensors
    keep = x > 0
    gx, gw = torch.zeros_like(x), torch.zeros_like(w)
    gx[keep] = g * w.sin()[keep]
    gw[keep] = g * x[keep] * w.cos()[keep]
    return gx, gw


def _define_positives() -> None:
    # correct, with an output whose size depends on the values (as nonzero's, NMS's): its
    # fake kernel makes an unbacked size, so only dynamic shapes can trace it
    @torch.library.custom_op(f"{NS}::positives", mutates_args=())
    def positives(x: Tensor, w: Tensor) -> Tensor:
        return (x * w.sin())[x > 0]

    @positives.register_fake
    def _(x: Tensor, w: Tensor) -> Tensor:
        return x.new_empty(torch.library.get_ctx().new_dynamic_size())

    positives.register_autograd(_positives_backward, setup_context=_positives_setup)


if f"{NS}::positives" not in OPDEFS:
    _define_positives()

"""Every direct call into a Function's graph runs as autograd's engine runs it (engine.call_node):
grad mode off for a plain backward, so a backward using `out=` ops passes where the engine runs
it, while the same Function with a wrong gradient still fails."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from torch import Tensor
from torch.autograd import Function

import gradlab
from gradlab.checks.numeric.engine import call_node

F64 = torch.float64


def rand(*shape: int) -> Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(shape, generator=gen, dtype=F64) - 0.5).requires_grad_()


class OutExp(Function):
    """exp, its backward written with `out=` ops (as fused or preallocated kernels are)."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        out = torch.empty_like(g)
        torch.mul(g, y, out=out)
        torch.mul(out, cls.factor, out=out)
        return out


class OutExpWrong(OutExp):
    """BROKEN: the same backward, its gradient 10% too large."""

    factor = 1.1


def wrapped(cls: type[Function]) -> Any:
    """A plain function around the Function: the contract check calls its node in the graph."""
    return lambda x: cls.apply(x) + 0


def bad_rows(r: gradlab.Report) -> list[tuple[str, str, str, str]]:
    return [(row.variant, row.check, row.status, row.reason) for row in r.rows
            if row.status != "pass"]


@pytest.mark.parametrize("as_apply", [True, False], ids=["apply", "wrapped"])
def test_a_backward_with_out_ops_passes(as_apply: bool) -> None:
    fn = OutExp if as_apply else wrapped(OutExp)
    r = gradlab.check(fn, [rand(3, 4)], reference=torch.exp)
    assert r.passed, bad_rows(r)
    assert not [row for row in r.rows if row.check == "contract" and row.status != "pass"]


@pytest.mark.parametrize("as_apply", [True, False], ids=["apply", "wrapped"])
def test_twin_with_a_wrong_gradient_still_fails(as_apply: bool) -> None:
    fn = OutExpWrong if as_apply else wrapped(OutExpWrong)
    r = gradlab.check(fn, [rand(3, 4)], reference=torch.exp)
    failed = {(row.variant, row.check) for row in r.rows if row.status == "fail"}
    assert ("base", "gradient") in failed, bad_rows(r)
    contract = [row for row in r.rows if row.check == "contract" and row.variant == "base"]
    assert contract and all(row.status == "pass" for row in contract), bad_rows(r)


class GradMode(Function):
    """Records the grad mode its backward runs in."""

    seen: ClassVar[list[bool]] = []

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        GradMode.seen.append(torch.is_grad_enabled())
        return g * 2 if torch.is_grad_enabled() else g * float("nan")


def test_call_node_sets_grad_mode_as_the_engine_does() -> None:
    x = rand(3)
    node = GradMode.apply(x).grad_fn
    GradMode.seen.clear()
    engine = []
    torch.autograd.grad(GradMode.apply(x), x, torch.ones(3), retain_graph=True)
    engine.append(GradMode.seen.pop())
    torch.autograd.grad(GradMode.apply(x), x, torch.ones(3), create_graph=True)
    engine.append(GradMode.seen.pop())
    with torch.enable_grad():  # the caller's grad mode does not leak into the call
        call_node(node, [torch.ones(3, dtype=F64)])
    with torch.no_grad():
        call_node(node, [torch.ones(3, dtype=F64)], create_graph=True)
    assert GradMode.seen == engine == [False, True]


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_call_node_keeps_anomaly_modes_nan_check() -> None:
    node = GradMode.apply(rand(3)).grad_fn
    with torch.autograd.detect_anomaly(check_nan=True):
        with pytest.raises(RuntimeError, match="returned nan values"):
            call_node(node, [torch.ones(3, dtype=F64)])
    assert call_node(node, [torch.ones(3, dtype=F64)])[0].isnan().all()

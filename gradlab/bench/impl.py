"""One implementation on one case's inputs, as a timing Task per phase.

The four phases:

    forward           the call under torch.no_grad()
    forward_grad      the call with grad enabled (it records the graph and saves tensors)
    backward          backward alone, with a fixed random grad_output, on a fresh graph per call
                      built outside the timed region
    forward_backward  the call and its backward
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.bench.timing import Task
from gradlab.cases import Inputs, flat_outputs
from gradlab.results.bench import BenchError

PHASES = ("forward", "forward_grad", "backward", "forward_backward")
#: The phases that run backward: their blocks hold one graph and one copy of the inputs a call.
BACKWARD_PHASES = ("backward", "forward_backward")


def _grad_leaves(inputs: Inputs) -> list[Tensor]:
    tensors = [*inputs.args, *inputs.kwargs.values()]
    return [t for t in tensors if isinstance(t, Tensor) and t.requires_grad]


def differentiable_outputs(out: Any) -> list[Tensor]:
    """The floating outputs that require grad (what backward starts from)."""
    return [t for t in flat_outputs(out) if t.requires_grad]


class Impl:
    """One implementation on one case's inputs: builds the Task of each phase.

    Backward phases need fresh leaves for every call of a block (so .grad is written, not
    accumulated): the case's own inputs serve the first call, copies made once serve the rest,
    and every .grad is reset to None in the (untimed) setup.
    """

    def __init__(self, fn: Callable[..., Any], inputs: Inputs, grad_seed: int):
        self.fn = fn
        self.pool = [inputs]
        self.grad_seed = grad_seed
        self._grads: list[Tensor] | None = None

    def call(self, inputs: Inputs | None = None) -> Any:
        inputs = inputs or self.pool[0]
        return self.fn(*inputs.args, **inputs.kwargs)

    def grad_outputs(self, outs: Sequence[Tensor]) -> list[Tensor]:
        """A fixed random grad_output per differentiable output (seeded, drawn once)."""
        if self._grads is None:
            gen = torch.Generator().manual_seed(self.grad_seed)
            self._grads = [torch.randn(o.shape, generator=gen, dtype=torch.float64)
                           .to(dtype=o.dtype, device=o.device) for o in outs]
        return self._grads

    def _fresh(self, k: int) -> list[Inputs]:
        while len(self.pool) < k:
            self.pool.append(self.pool[0].clone())
        for inputs in self.pool[:k]:
            for t in _grad_leaves(inputs):
                t.grad = None
        return self.pool[:k]

    def _graph(self, inputs: Inputs) -> tuple[list[Tensor], list[Tensor]]:
        with torch.enable_grad():
            outs = differentiable_outputs(self.call(inputs))
        if not outs:
            raise BenchError("no output requires grad: nothing to run backward from")
        return outs, self.grad_outputs(outs)

    def task(self, phase: str) -> Task:
        """The Task that times `phase`; each call's result is released inside the timed region,
        as torch.utils.benchmark.Timer does."""
        if phase in ("forward", "forward_grad"):
            return self._forward_task(grad=phase == "forward_grad")
        if phase == "backward":
            return self._backward_task()
        if phase == "forward_backward":
            return self._forward_backward_task()
        raise ValueError(f"unknown phase {phase!r}")

    def _forward_task(self, grad: bool) -> Task:
        def run_forward(k: int) -> None:
            with torch.set_grad_enabled(grad):
                for _ in range(k):
                    self.call()
        return Task(setup=lambda k: k, run=run_forward)

    def _backward_task(self) -> Task:
        def setup_backward(k: int) -> list[tuple[list[Tensor], list[Tensor]]]:
            return [self._graph(inputs) for inputs in self._fresh(k)]

        def run_backward(graphs: list[tuple[list[Tensor], list[Tensor]]]) -> None:
            for outs, grads in graphs:
                torch.autograd.backward(outs, grads)
        return Task(setup=setup_backward, run=run_backward)

    def _forward_backward_task(self) -> Task:
        if self._grads is None:  # the grad_outputs' shapes come from one untimed call
            self._graph(self.pool[0])

        def run_forward_backward(pool: list[Inputs]) -> None:
            with torch.enable_grad():
                for inputs in pool:
                    outs = differentiable_outputs(self.call(inputs))
                    torch.autograd.backward(outs, self.grad_outputs(outs))
        return Task(setup=self._fresh, run=run_forward_backward)

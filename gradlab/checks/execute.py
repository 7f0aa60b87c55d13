"""One forward + backward of a callable on a case's inputs, with what the checks compare."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs, standard_normal
from gradlab.checks import contract
from gradlab.checks.rawbackward import direct_backward, grad_output_as, raw_backward
from gradlab.results import Finding


@dataclass
class Run:
    """Outputs and input gradients of one run (or the exception and the stage it came from)."""

    outs: list[Tensor]
    grads: list[Tensor | None]
    error: BaseException | None = None
    #: "forward" or "backward": where `error` was raised.
    stage: str = ""
    #: contract problems seen along the way (in-place writes, raw backward's return value).
    contract: list[Finding] = field(default_factory=list)
    #: the float64 grad_outputs backward was called with (shared with the reference).
    grad_outs64: list[Tensor] = field(default_factory=list)
    #: why backward's raw return value could not be checked ("" when it was, or not asked).
    raw_unavailable: str = ""
    #: the graph held no custom Function node: only the in-place checks applied.
    no_custom: bool = False

    def with_grads(self, grads: list[Tensor | None]) -> Run:
        """The same run with other gradients (a requires_grad subset of these)."""
        return Run(self.outs, grads, self.error, self.stage, [], self.grad_outs64)


def random_grad_outputs(outs: Sequence[Tensor], gen: torch.Generator) -> list[Tensor]:
    """One random float64 grad_output per output (the same for the Function and the reference)."""
    return [standard_normal(o.shape, gen) for o in outs]


def run_once(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor] | None,
             gen: torch.Generator, *, go_layout: str = "contiguous",
             check_contract: bool = False) -> Run:
    """Forward, then backward with the given float64 grad_outputs (random when None).

    check_contract: also check backward's raw return value and watch for in-place writes (a
    reference run or a side run skips both: nothing reports them)."""
    before = contract.snapshot(inputs) if check_contract else {}
    try:
        with torch.enable_grad():
            outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
    except Exception as exc:
        return Run([], [], exc, "forward")
    run = Run(outs, [], contract=contract.forward_writes(before, inputs, outs))
    return backward_of(run, fn, inputs, grad_outs64, gen, go_layout=go_layout,
                       check_contract=check_contract, before=before)


def backward_of(run: Run, fn: Callable[..., Any], inputs: Inputs,
                grad_outs64: Sequence[Tensor] | None, gen: torch.Generator, *,
                go_layout: str = "contiguous", check_contract: bool = False,
                before: dict[int, Tensor] | None = None) -> Run:
    """`run` (a forward of `fn` on `inputs`, or a copy of one whose backward may run again)
    completed by a backward with the given float64 grad_outputs (random when None).

    before: copies of the inputs taken before that forward (reused by the in-place watch
    when forward left them alone)."""
    outs = run.outs
    diff = inputs.diff_index
    if not diff:
        return run
    if grad_outs64 is None:
        grad_outs64 = random_grad_outputs(outs, gen)
    run.grad_outs64 = list(grad_outs64)
    go = [grad_output_as(g, o, go_layout)
          for g, o in zip(grad_outs64, outs, strict=True)]
    pairs = [(o, g) for o, g in zip(outs, go, strict=True) if o.requires_grad]
    if not pairs:
        run.grads = [None] * len(diff)
        return run
    if not check_contract:
        run.grads, run.error = _autograd(pairs, inputs)
        run.stage = "backward" if run.error is not None else ""
        return run
    # the copies taken before forward still hold the inputs' values unless forward wrote them
    kept = {i: t for i, t in (before or {}).items()
            if not run.contract and not contract.shares_storage(inputs.args[i], outs)}
    # a float64 grad_output holds its source's values unless expanded (one value repeated)
    sources = [g if go_layout != "expanded" and g.dtype == o.dtype and g.device == o.device
               else None for g, o in zip(grad_outs64, outs, strict=True) if o.requires_grad]
    watch = contract.BackwardWatch.before([g for _, g in pairs], inputs, outs, kept, sources)
    raw = direct_backward(fn, inputs, outs, go) if len(pairs) == len(outs) else None
    if raw is None:
        # other nodes in the graph: each custom one is called on a forward of its own
        raw = raw_backward(fn, inputs.clone(), grad_outs64, go_layout)
        grads, error, stage = *_autograd(pairs, inputs), "backward"
    elif raw.grads is not None:
        # the Function's own backward, checked and used: no second forward and backward
        grads, error, stage = raw.grads, None, ""
    else:
        # The direct call broke the contract or raised: autograd's fix-ups (or its own error)
        # decide the gradients, on a forward of their own since this one's backward has run.
        again = run_once(fn, inputs.clone(), grad_outs64, gen, go_layout=go_layout)
        grads, error, stage = again.grads, again.error, again.stage
    run.contract += raw.findings
    run.raw_unavailable, run.no_custom = raw.unavailable, raw.no_custom
    if error is not None:
        run.error, run.stage = error, stage
        return run
    run.grads = list(grads)
    run.contract += watch.writes([g for _, g in pairs], inputs, outs)
    return run


def _autograd(pairs: Sequence[tuple[Tensor, Tensor]],
              inputs: Inputs) -> tuple[list[Tensor | None], BaseException | None]:
    """The differentiable inputs' gradients by autograd, or what it raised."""
    try:
        return list(torch.autograd.grad([p[0] for p in pairs],
                                        [inputs.args[i] for i in inputs.diff_index],
                                        [p[1] for p in pairs], allow_unused=True,
                                        retain_graph=True)), None
    except Exception as exc:
        return [], exc


def run_undefined(fn: Callable[..., Any], inputs: Inputs, gos: list[Tensor],
                  undefined: tuple[int, ...]) -> Run:
    """Backward with some outputs' gradients undefined (autograd passes None / zeros)."""
    try:
        with torch.enable_grad():
            outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
        pairs = [(o, g.to(o.dtype).to(o.device))
                 for k, (o, g) in enumerate(zip(outs, gos, strict=True))
                 if k not in undefined and o.requires_grad]
        grads = torch.autograd.grad([p[0] for p in pairs],
                                    [inputs.args[i] for i in inputs.diff_index],
                                    [p[1] for p in pairs], allow_unused=True)
        return Run(outs, list(grads), grad_outs64=gos)
    except Exception as exc:
        return Run([], [], exc, "backward", grad_outs64=gos)

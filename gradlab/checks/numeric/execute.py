"""One forward + backward of a callable on a case's inputs, with what the checks compare."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, flat_outputs, not_freed, standard_normal
from gradlab.checks.diagnosis.hints import RNG_CONTRACT_HINTS, RNG_INDEPENDENT_HINTS, rng_hint
from gradlab.checks.numeric import backprop, contract
from gradlab.checks.numeric.rawbackward import direct_backward, grad_output_as, raw_backward
from gradlab.results import CheckRow, Finding
from gradlab.torchstate import case_rng, preserved_rng, replay, rng_device, rng_now


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
    #: forward drew random numbers from torch's global generators (a stochastic Function).
    drew: bool = False
    #: backward moved torch's global generators: it drew numbers of its own (a fresh mask)
    #: instead of replaying forward's under a forked RNG state.
    drew_backward: bool = False
    #: the outputs' values as forward returned them, when backward then wrote into an output
    #: it saved (a contract failure of its own): what the forward comparison judges.
    forward_values: list[Tensor] | None = None

    @property
    def outputs_as_returned(self) -> list[Tensor]:
        """The outputs as forward returned them (forward_values, else outs)."""
        return self.forward_values if self.forward_values is not None else self.outs

    def with_grads(self, grads: list[Tensor | None]) -> Run:
        """The same run with other gradients (a requires_grad subset of these)."""
        return Run(self.outs, grads, self.error, self.stage, [], self.grad_outs64)


def random_grad_outputs(outs: Sequence[Tensor], gen: torch.Generator) -> list[Tensor]:
    """One random float64 grad_output per output (the same for the Function and the reference);
    zeros for an output that does not require grad (no gradient flows from it, so none is
    handed to the reference either), drawn all the same so the stream does not depend on it."""
    return [g if o.requires_grad else g.zero_()
            for g, o in ((random_like(o, gen), o) for o in outs)]


def random_like(o: Tensor, gen: torch.Generator) -> Tensor:
    """Gaussian float64 values of o's shape; complex128 for a complex o (both parts drawn: a
    backward that drops either part of its grad_output shows)."""
    if o.is_complex():
        return torch.view_as_complex(standard_normal((*o.shape, 2), gen))
    return standard_normal(o.shape, gen)


def requiring_grad(fn: Callable[..., Any], args: Sequence[Any], kwargs: Any,
                   diff: Sequence[int]) -> list[bool]:
    """Whether each floating output of `fn` (flat_outputs) requires grad, called with the
    floating tensors at `diff` as leaves that require grad; raises what `fn` raises.  The
    graph a transform or a dtype's path may cut (edges' float16, capabilities' vmap)."""
    leaves = [a.detach().requires_grad_() if i in diff and isinstance(a, Tensor)
              and (a.is_floating_point() or a.is_complex()) else a
              for i, a in enumerate(args)]
    with torch.enable_grad():
        return [o.requires_grad for o in flat_outputs(fn(*leaves, **kwargs))]


def run_once(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor] | None,
             gen: torch.Generator, *, go_layout: str = "contiguous",
             check_contract: bool = False, keep_outputs: bool = False) -> Run:
    """Forward, then backward with the given float64 grad_outputs (random when None).

    check_contract: also check backward's raw return value and watch for in-place writes (a
    reference run or a side run skips both: nothing reports them).  keep_outputs: without
    the contract, still keep the outputs as forward returned them should backward write one
    (see as_returned)."""
    before = contract.snapshot(inputs) if check_contract else {}
    counted = contract.versions(inputs) if check_contract else {}
    replay()  # the case's RNG state: the Function and its reference draw the same numbers
    start = rng_now()
    try:
        with torch.enable_grad():
            outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
        not_freed(inputs)  # before anything reads them
    except Exception as exc:
        return Run([], [], exc, "forward", drew=not start.same(rng_now()))
    forwarded = rng_now()
    run = Run(outs, [], contract=contract.forward_writes(before, inputs, outs, counted),
              drew=not start.same(forwarded))
    run = backward_of(run, fn, inputs, grad_outs64, gen, go_layout=go_layout,
                      check_contract=check_contract, keep_outputs=keep_outputs, before=before)
    # a forward run again inside (the raw backward's) replays the case's state and leaves the
    # generators where this forward did: only draws made in backward move them from there
    run.drew_backward = not forwarded.same(rng_now())
    return run


def backward_of(run: Run, fn: Callable[..., Any], inputs: Inputs,
                grad_outs64: Sequence[Tensor] | None, gen: torch.Generator, *,
                go_layout: str = "contiguous", check_contract: bool = False,
                keep_outputs: bool = False, before: dict[int, Tensor] | None = None) -> Run:
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
        returned = [o.detach().clone() for o in outs] if keep_outputs else None
        run.grads, run.error = _autograd(pairs, inputs)
        run.stage = "backward" if run.error is not None else ""
        return as_returned(run, returned)
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
    written = watch.writes([g for _, g in pairs], inputs, outs)
    run.contract += written
    if any(f.subject == "output" for f in written):
        # forward was right when it returned: the comparison must not blame it for backward
        run.forward_values = watch.outputs
    return run


def as_returned(run: Run, returned: list[Tensor] | None) -> Run:
    """`run` keeping `returned` (copies of its outputs taken before backward) as its forward
    values when backward wrote into an output it saved: the forward comparison judges what
    forward returned, the contract row (of the base run) reports the write."""
    if returned is not None and not all(
            torch.equal(a, o.detach()) for a, o in zip(returned, run.outs, strict=True)):
        run.forward_values = returned
    return run


def _autograd(pairs: Sequence[tuple[Tensor, Tensor]],
              inputs: Inputs) -> tuple[list[Tensor | None], BaseException | None]:
    """The differentiable inputs' gradients by autograd, or what it raised."""
    try:
        return backprop.grads([p[0] for p in pairs], [inputs.args[i] for i in inputs.diff_index],
                              [p[1] for p in pairs], retain_graph=True), None
    except Exception as exc:
        return [], exc


#: torch's node that passes an undefined gradient backward (None where it reaches a custom
#: Function that does not materialize grads); private, so a torch without it runs no
#: one-output undefined_grad variant.
UNDEFINED_GRAD: Callable[[], Any] | None = getattr(torch._C._functions, "UndefinedGrad", None)


def run_undefined(fn: Callable[..., Any], inputs: Inputs, gos: list[Tensor],
                  undefined: tuple[int, ...]) -> Run:
    """Backward with some outputs' gradients undefined (autograd passes None / zeros)."""
    outs: list[Tensor] = []
    try:
        replay()
        with torch.enable_grad():
            outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
        pairs = [(o, g.to(o.dtype).to(o.device))
                 for k, (o, g) in enumerate(zip(outs, gos, strict=True))
                 if k not in undefined and o.requires_grad]
        if not pairs and UNDEFINED_GRAD is not None:
            # every output undefined (a one-output Function): autograd's own node hands
            # backward an undefined gradient through the output, as gradcheck's
            # check_undefined_grad does; a Function with ctx.set_materialize_grads(False) then
            # gets None and must return None (or zeros)
            pairs = [(UNDEFINED_GRAD()(o), torch.ones_like(o)) for k, o in enumerate(outs)
                     if k in undefined and o.requires_grad]
        # a backward writing into an output it saved is the base run's contract finding:
        # the forward row here judges the outputs as forward returned them
        returned = [o.detach().clone() for o in outs]
        grads = backprop.grads([p[0] for p in pairs], [inputs.args[i] for i in inputs.diff_index],
                               [p[1] for p in pairs])
        return as_returned(Run(outs, list(grads), grad_outs64=gos), returned)
    except Exception as exc:
        # the outputs forward made, when it was backward that raised: the forward row judges
        # them, the gradient row carries the error
        return Run(outs, [], exc, "backward" if outs else "forward", grad_outs64=gos)


#: Whether a failure is the draws' (rng_hint, RNG_INDEPENDENT_HINTS, RNG_CONTRACT_HINTS) is
#: gradlab.checks.diagnosis.hints' decision; this module measures what drew (Run.drew,
#: drew_backward, draws_followed).


#: The seed of the second run that tells whether a gradient follows forward's draws (any seed
#: other than the case's: two states draw other numbers).
OTHER_SEED = 7919


def draws_followed(fn: Callable[..., Any], inputs: Inputs, run: Run,
                   gen: torch.Generator) -> bool:
    """True when `fn`'s gradients (those of `run`, from the case's RNG state) change when its
    forward starts from another state: only then can its draws explain a wrong gradient."""
    if not run.grad_outs64:
        return False
    with preserved_rng(), case_rng(OTHER_SEED, rng_device()):
        again = run_once(fn, inputs.clone(), run.grad_outs64, gen)
    return again.error is None and any(
        a is not None and b is not None and not torch.equal(a, b)
        for a, b in zip(run.grads, again.grads, strict=False))


def rng_replayed(rows: Sequence[CheckRow], run: Run,
                 follows: Callable[[], bool] | None = None) -> None:
    """Failing gradient or jacobian rows of `run`'s Function given `rng_hint`'s verdict; where
    it is rng_replay, the findings lose the hints a mismatch of two masks gives by chance (a
    range, a tail tile, a passing tolerance): those would send the user to the wrong place.
    A contract row's re-entrancy findings become rng_replay when backward drew numbers.
    follows: see hints.rng_hint (asked once at most)."""
    follows = functools.cache(follows) if follows is not None else None
    for row in rows:
        if row.check == "contract":
            if run.drew_backward and row.hint in RNG_CONTRACT_HINTS:
                row.hint = "rng_replay"
                for f in row.findings:
                    f.hint = "rng_replay" if f.hint in RNG_CONTRACT_HINTS else f.hint
            continue
        row.hint = rng_hint(run, row.hint, follows)
        if row.hint != "rng_replay":
            continue
        for f in row.findings:
            if f.hint not in RNG_INDEPENDENT_HINTS:
                f.hint, f.pattern, f.passing_tolerance = "", None, None


def draws_matter(runs: Sequence[tuple[Callable[..., Any], Inputs, Run]],
                 gen: torch.Generator) -> Callable[[], bool]:
    """Whether the gradient of any of the (callable, inputs, its run from the case's state)
    follows the draws: the Function's (a backward drawing from the wrong state) or the
    reference's (the right gradient needs forward's draws, a dropout's mask, and a backward
    ignoring them is wrong for that reason).  Asked only when needed (a run each)."""
    return lambda: any(draws_followed(fn, inputs, run, gen) for fn, inputs, run in runs)


def rng_judged(rows: Sequence[CheckRow], fn: Callable[..., Any], inputs: Inputs,
               gen: torch.Generator, reference: Callable[..., Any] | None = None) -> None:
    """rng_replayed for failing rows made without a run of `fn` at hand (the jacobian
    check's): one forward and backward of `fn` on copies of `inputs` says what drew."""
    run = run_once(fn, inputs.clone(), None, gen)

    def follows() -> bool:
        runs = [(fn, inputs, run)]
        if reference is not None:
            runs.append((reference, inputs, run_once(reference, inputs.clone(),
                                                     run.grad_outs64 or None, gen)))
        return draws_matter(runs, gen)()

    rng_replayed(rows, run, follows)


def as_dtypes_of(inputs: Inputs, like: Inputs) -> Inputs:
    """Copies of `inputs` (same strides) in the dtypes of `like`'s tensors: a stochastic
    Function's reference runs in the Function's own dtypes, since torch draws other numbers
    for float32 than for float64 from one state."""
    args = [copy_like(a, dtype=b.dtype) if isinstance(a, Tensor) and isinstance(b, Tensor)
            else a for a, b in zip(inputs.args, like.args, strict=True)]
    kwargs = {k: copy_like(v, dtype=like.kwargs[k].dtype, requires_grad=False)
              if isinstance(v, Tensor) and isinstance(like.kwargs.get(k), Tensor) else v
              for k, v in inputs.kwargs.items()}
    return Inputs(args, kwargs)

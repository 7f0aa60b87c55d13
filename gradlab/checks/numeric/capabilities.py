"""The capabilities check: what else a Function supports, measured on each case.

Each probe runs the Function some other way and compares with its own eager run on the same
values and grad_outputs (so a wrong first order, the other checks' business, does not show up
again here):

- compile: `torch.compile(fn, backend="aot_eager")`, forward and backward.  aot_eager traces
  forward and backward through dynamo and AOTAutograd, where custom Functions break (data-
  dependent Python, side effects on ctx), without inductor's code generation, which costs
  seconds per op and checks inductor rather than the Function.  fullgraph first; a Function
  that needs graph breaks is `breaks` (information), a wrong result a failure;
- vmap: `torch.func.vmap` over a batch of two samples (the case's values and each floating input
  flipped along its last dim) against the two eager calls.  A Function needs setup_context and
  generate_vmap_rule (or a vmap staticmethod) for it;
- func_grad: `torch.func.grad` of sum(output * grad_output) against autograd's gradients
  (through torch.func.vjp, which grad is built on: torch.func.grad imports torch._dynamo);
- deterministic: forward and backward run twice from the same RNG state, gradients compared
  bitwise (atomics in a CUDA kernel differ run to run);
- noncontiguous: every tensor input non-contiguous at once (each alone is a variant);
- cuda: the Function on CUDA against the Function on the CPU (only when a GPU is there);
- batched_grad: backward under vmap over a batch of grad_outputs (is_grads_batched) against
  one backward per grad_output (gradlab.checks.numeric.batched_grad).

A probe that raises means the capability is missing: information (a passing row whose reason
says so), or a failure when the spec requires it.  torch.compile is measured only on request
(Options.capabilities) or when required: importing torch._dynamo alone takes about 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs, relayout
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.numeric.batched_grad import batched_grad_row
from gradlab.checks.numeric.compare import compared_aside
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.checks.numeric.contract import same
from gradlab.checks.numeric.execute import Run, requiring_grad, run_once
from gradlab.checks.numeric.jacobian import realview
from gradlab.checks.numeric.rawbackward import custom_nodes
from gradlab.model import INFO_CAPABILITIES, Tolerance
from gradlab.results import PASS, SKIP, Finding
from gradlab.results.capabilities import BREAKS, NO, WRONG, YES
from gradlab.torchstate import RngState, replay

#: The backend torch.compile is measured with (see the module docstring).
COMPILE_BACKEND = "aot_eager"
#: The hint of a capability whose run differs from eager.
WRONG_HINTS = {"compile": "compile_wrong", "vmap": "vmap_wrong", "func_grad": "func_grad_wrong",
               "noncontiguous": "noncontiguous_only", "cuda": "cuda_wrong"}


@dataclass
class Measured:
    """One capability measured on one case: a state of gradlab.results.capabilities, what was
    seen (an exception's first line, a graph break), and the findings of a wrong result."""

    capability: str
    state: str
    note: str = ""
    findings: list[Finding] = field(default_factory=list)


def compare(ctx: CaseContext, got: Run, want: Run, inputs: Inputs,
            tol: Tolerance) -> list[Finding]:
    """Findings of `got` against `want` (outputs and gradients), made on the side."""
    rows = compared_aside(ctx, ctx.dtype, got, want, inputs, tol)
    return [f for r in rows if r.failed for f in r.findings]


def judged(ctx: CaseContext, capability: str, got: Run, want: Run, inputs: Inputs,
           note: str = "", ok: str = YES) -> Measured:
    """NO when `got` raised, WRONG with findings when it differs from `want`, else `ok`."""
    if got.error is not None:
        return Measured(capability, NO, first_line(got.error))
    found = compare(ctx, got, want, inputs, ctx.op.tolerance(ctx.dtype))
    return Measured(capability, WRONG if found else ok, note, found)


def detached(inputs: Inputs) -> Inputs:
    """Copies of the inputs without autograd (torch.func transforms are handed plain tensors;
    copies, so that a Function writing into its inputs leaves the next probe's alone)."""
    return Inputs([a.detach().clone() if isinstance(a, Tensor) else a for a in inputs.args],
                  inputs.kwargs_copy())


def probe_noncontiguous(ctx: CaseContext, inputs: Inputs, base: Run,
                        gen: torch.Generator) -> Measured | None:
    args: list[Any] = []
    for a in inputs.args:
        new = relayout(a, "noncontiguous") if isinstance(a, Tensor) else None
        args.append(a if new is None else new.requires_grad_(a.requires_grad))
    if all(x is y for x, y in zip(args, inputs.args, strict=True)):
        return None  # only 0-d tensors: nothing to lay out otherwise
    nc = Inputs(args, inputs.kwargs_copy())
    got = run_once(ctx.op.function, nc, base.grad_outs64, gen)
    return judged(ctx, "noncontiguous", got, base, nc)


def probe_deterministic(ctx: CaseContext, inputs: Inputs, base: Run, gen: torch.Generator,
                        state: RngState) -> Measured:
    """The base run (from `state`) against a second run from the same generator state: a
    Function drawing random numbers from torch's generators is deterministic given them."""
    state.restore()
    second = run_once(ctx.op.function, inputs.clone(), base.grad_outs64, gen)
    first = base
    error = first.error or second.error
    if error is not None:
        return Measured("deterministic", NO, first_line(error))
    differ = [k for k, (a, b) in enumerate(zip(first.grads, second.grads, strict=True))
              if a is not None and b is not None and not same(a.detach(), b.detach())]
    if not differ:
        return Measured("deterministic", YES)
    i = inputs.diff_index[differ[0]]
    a, b = first.grads[differ[0]], second.grads[differ[0]]
    assert a is not None and b is not None
    diff = (realview(a).double() - realview(b).double()).abs()
    err = float(diff.nan_to_num(nan=float("inf")).max())
    return Measured("deterministic", NO, f"gradient of input {i} differs between two runs by "
                                         f"up to {err:.3g}")


def batch_of_two(inputs: Inputs, flip: bool = True) -> tuple[list[Any], list[Inputs]]:
    """Batched args for vmap (each tensor stacked with its second sample) and the two samples:
    the case's values, and each floating tensor flipped along every dim (the same values, so a
    domain the case keeps to, elsewhere: each square matrix is P A P for the reversal P, so a
    symmetric or positive-definite one stays so, as one flipped along its last dim does not,
    helper-18's CG solve; each row keeps its own values, its sum and its norm)."""
    plain = detached(inputs)
    other = [torch.flip(a, list(range(a.dim()))) if flip and isinstance(a, Tensor)
             and a.is_floating_point() and a.dim() > 0 else a.clone() if isinstance(a, Tensor)
             else a for a in plain.args]
    batched = [torch.stack([a, b]) if isinstance(a, Tensor) else a
               for a, b in zip(plain.args, other, strict=True)]
    return batched, [plain, Inputs(other, plain.kwargs)]


def probe_vmap(ctx: CaseContext, inputs: Inputs) -> Measured:
    fn = ctx.op.function
    batched, samples = batch_of_two(inputs)
    in_dims = tuple(0 if isinstance(a, Tensor) else None for a in batched)
    with torch.no_grad():
        try:
            want = [flat_outputs(fn(*s.args, **s.kwargs)) for s in samples]
        except Exception:  # the flipped values leave the Function's domain (a packed
            # matrix's diagonal moved off it: helper-18's CG solve): the case's values twice
            batched, samples = batch_of_two(inputs, flip=False)
            want = [flat_outputs(fn(*s.args, **s.kwargs)) for s in samples]
        try:
            got = flat_outputs(torch.func.vmap(fn, in_dims=in_dims)(*batched,
                                                                    **samples[0].kwargs))
        except Exception as exc:
            return Measured("vmap", NO, first_line(exc))
    if len(got) != len(want[0]):
        return Measured("vmap", WRONG, f"{len(got)} outputs, eager has {len(want[0])}")
    found = []
    for k, g in enumerate(got):
        w = torch.stack([want[0][k], want[1][k]])
        if g.shape != w.shape:
            return Measured("vmap", WRONG, f"output {k} has shape {list(g.shape)}, eager "
                                           f"{list(w.shape)}")
        d = dg.compare(g, w, ctx.op.tolerance(ctx.dtype), scaled=True)
        if not d.ok:
            found.append(Finding("output", k, "vmap_wrong", shape=tuple(g.shape),
                                 stats=d.stats))
    lost = None if found else graph_lost(fn, batched, in_dims, samples[0],
                                         inputs.diff_index)
    if lost is not None:
        return Measured("vmap", WRONG, lost)
    return Measured("vmap", WRONG if found else YES, "", found)


def graph_lost(fn: Callable[..., Any], batched: Sequence[Any], in_dims: tuple[Any, ...],
               sample: Inputs, diff: Sequence[int]) -> str | None:
    """What vmap's outputs lose of the graph where the batched inputs require grad (an output
    that does not require grad: per-sample gradients through it are silently zero), or None:
    each output that requires grad in an eager call of one sample must under vmap too (a
    metric returned detached by design does neither)."""
    try:
        eager = requiring_grad(fn, sample.args, sample.kwargs, diff)
        outs = requiring_grad(torch.func.vmap(fn, in_dims=in_dims), batched, sample.kwargs,
                              diff)
    except Exception:
        return None  # only under grad: the no_grad run above measured the capability
    cut = [k for k, (o, e) in enumerate(zip(outs, eager, strict=False)) if e and not o]
    if cut:
        return (f"output {cut[0]} under vmap does not require grad (the graph is lost: a "
                f"gradient through vmap of it is silently absent)")
    return None


def summed(fn: Callable[..., Any], plain: Inputs, diff: Sequence[int],
           grad_outs64: Sequence[Tensor]) -> Callable[..., Tensor]:
    """sum(output * grad_output) as a function of the differentiable args."""

    def f(*tensors: Tensor) -> Tensor:
        args = list(plain.args)
        for i, t in zip(diff, tensors, strict=True):
            args[i] = t
        replay()  # the case's RNG state, as the eager run it is compared with
        outs = flat_outputs(fn(*args, **plain.kwargs))
        # real views: Re(sum(conj(g) * o)) for a complex output, as backward's convention
        total = sum((realview(o) * realview(g.to(o.dtype).to(o.device))).sum()
                    for o, g in zip(outs, grad_outs64, strict=True))
        assert isinstance(total, Tensor)
        return total

    return f


#: The note of a func_grad probe of a callable made of torch's own ops only.
PLAIN_TORCH = "torch ops only: traced by torch.func.vjp, their derivatives are torch's"


def probe_func_grad(ctx: CaseContext, inputs: Inputs, base: Run) -> Measured:
    """torch.func.grad, measured through torch.func.vjp with a cotangent of 1: grad is built
    on vjp (the same transform of the Function), and torch.func.grad itself imports
    torch._dynamo (about 2 s, for the wrapper alone)."""
    diff = inputs.diff_index
    plain = detached(inputs)
    f = summed(ctx.op.function, plain, diff, base.grad_outs64)
    plain_torch = not custom_nodes([o.grad_fn for o in base.outs if o.grad_fn is not None])
    try:
        pulled = torch.func.vjp(f, *[plain.args[i] for i in diff])  # (total, vjp_fn)
        if plain_torch:
            # torch's own ops, traced by vjp: their derivatives are torch.func's own, and
            # calling vjp_fn would only import torch._dynamo (a second, once per process)
            return Measured("func_grad", YES, PLAIN_TORCH)
        grads = pulled[1](torch.ones_like(pulled[0]))
    except Exception as exc:
        return Measured("func_grad", NO, first_line(exc))
    # the same outputs: only the gradients are compared
    got = Run(base.outs, list(grads), grad_outs64=base.grad_outs64)
    found = compare(ctx, got, base, inputs, ctx.op.tolerance(ctx.dtype))
    return Measured("func_grad", WRONG if found else YES, "", found)


def probe_compile(ctx: CaseContext, inputs: Inputs, base: Run,
                  gen: torch.Generator) -> Measured:
    import torch._dynamo

    fn = ctx.op.function

    def call(*args: Any, **kwargs: Any) -> Any:  # a plain function: fn may be any callable
        return fn(*args, **kwargs)

    try:
        got = run_once(torch.compile(call, backend=COMPILE_BACKEND, fullgraph=True),
                       inputs.clone(), base.grad_outs64, gen)
        if got.error is None:
            return judged(ctx, "compile", got, base, inputs)
        broke = first_line(got.error)
        torch._dynamo.reset()
        got = run_once(torch.compile(call, backend=COMPILE_BACKEND), inputs.clone(),
                       base.grad_outs64, gen)
        return judged(ctx, "compile", got, base, inputs, f"graph break: {broke}", BREAKS)
    finally:
        torch._dynamo.reset()


#: The cuda capability's note for a Function drawing random numbers: it runs on both, but the
#: CPU and CUDA generators draw other numbers from one seed, so its values cannot agree.
STOCHASTIC_CUDA = ("runs; values not compared: it draws random numbers, and the CPU and CUDA "
                   "generators draw other ones")


def probe_cuda(ctx: CaseContext, inputs: Inputs, base: Run,
               gen: torch.Generator) -> Measured:
    """The Function on CUDA against itself on the CPU, whichever of them this item runs."""
    other = "cpu" if ctx.device == "cuda" else "cuda"
    moved = inputs.clone(device=other)
    run = run_once(ctx.op.function, moved, base.grad_outs64, gen)
    if run.drew and run.error is None:
        return Measured("cuda", YES, STOCHASTIC_CUDA)
    if ctx.device == "cuda":
        return judged(ctx, "cuda", base, run, inputs)
    return judged(ctx, "cuda", run, base, moved)


def first_device(ctx: CaseContext) -> str:
    """The first device this target runs on (the one whose item measures CUDA)."""
    return (ctx.options.devices or ctx.target.devices or ("cpu",))[0]


def cuda_row(ctx: CaseContext, inputs: Inputs, base: Run, gen: torch.Generator) -> None:
    """The cuda capability: measured when a GPU is there, else a skip only when required (a
    required capability nobody checked is no pass)."""
    if ctx.device != first_device(ctx):
        return
    if torch.cuda.is_available():
        measured_row(ctx, probe_cuda(ctx, inputs, base, gen))
    elif "cuda" in ctx.target.requires:
        ctx.row("cuda", "capabilities", SKIP, reason="cuda_unavailable",
                declared=ctx.options.skip_unavailable)


def measured_row(ctx: CaseContext, m: Measured) -> None:
    """The row of one measurement (variant: the capability, check: capabilities)."""
    cap = m.capability
    if m.state == WRONG:
        ctx.row(cap, "capabilities", policy.status("capabilities", WRONG_HINTS[cap]),
                hint=WRONG_HINTS[cap], note=m.note, findings=m.findings)
    elif m.state == NO:
        ctx.capability_row(cap, "capabilities", cap, hint=f"{cap}_missing",
                           reason=f"{cap}_missing", note=m.note)
    else:
        ctx.row(cap, "capabilities", PASS, reason="graph_break" if m.state == BREAKS else "",
                note=m.note)


def capability_rows(ctx: CaseContext, inputs: Inputs, gen: torch.Generator, *,
                    base: Run | None = None, state: RngState | None = None) -> None:
    """Every capability this run measures, on one case (rows appended to ctx.rows).

    base: the Function's run on `inputs` already made (the jacobian check's first forward and
    backward) and `state`, the RNG state it began in; without a base the Function runs here
    (and `state` is taken here)."""
    if base is None or state is None:
        state = RngState.now(ctx.device)
        base = run_once(ctx.op.function, inputs.clone(), None, gen)
    if base.error is not None or not base.grad_outs64:
        return  # the Function itself fails here: the other checks say so
    probes: dict[str, Callable[[], Measured | None]] = {
        "compile": lambda: probe_compile(ctx, inputs, base, gen),
        "vmap": lambda: probe_vmap(ctx, inputs),
        "func_grad": lambda: probe_func_grad(ctx, inputs, base),
        "deterministic": lambda: probe_deterministic(ctx, inputs, base, gen, state),
        "noncontiguous": lambda: probe_noncontiguous(ctx, inputs, base, gen),
    }
    for cap in INFO_CAPABILITIES:
        if not ctx.measures(cap):
            continue
        t0 = time.perf_counter()
        n = len(ctx.rows)
        if cap == "cuda":
            cuda_row(ctx, inputs, base, gen)
        elif cap == "batched_grad":
            batched_grad_row(ctx, inputs)
        else:
            m = probes[cap]()
            if m is not None:
                measured_row(ctx, m)
        for r in ctx.rows[n:]:
            r.seconds = time.perf_counter() - t0

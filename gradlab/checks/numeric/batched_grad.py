"""The batched_grad capability: backward under vmap over a batch of grad_outputs.

`torch.autograd.grad(outputs, inputs, grad_outputs=<B grad_outputs stacked on dim 0>,
is_grads_batched=True)` (gradcheck's check_batched_grad; what torch.autograd.functional's
vectorized jacobian and hessian use) runs a custom Function's backward once, on batched
tensors (torch's legacy vmap).  A backward that calls .item(), branches on grad_output's
values, writes a batched tensor into a plain one, or hands grad_output's data pointer to a
kernel raises there; one that takes another path when it cannot (a fallback around a kernel)
can give other gradients.  Measured on the case's float64 values: the batched backward against
B single backwards of the same graph (retain_graph), each grad_output random.

Why information (gradlab.checks.diagnosis.policy.MISSING) and not a warn: a backward that calls a
compiled kernel (a C++/CUDA extension, Triton, ctypes: the usual reason to write a custom Function)
reads grad_output's data pointer, which vmap refuses, and so does `grad_output.detach()` under
the legacy vmap.  Those Functions are correct, and torch's own gradcheck leaves
check_batched_grad off by default for the same reason: a warn would be a false red on most
kernel-backed Functions.  `requires: [batched_grad]` makes a missing one a failure; wrong
gradients are always a failure.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs, standard_normal
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.results import PASS, SKIP, Finding
from gradlab.torchstate import replay

#: The size of the grad_output batch: two would do to see a batch mixed; three keeps a backward
#: that happens to treat samples 0 and 1 alike (a flip, a swap) from passing.
BATCH = 3
#: The capability (its matrix column, its row's variant).
CAPABILITY = "batched_grad"
#: The seed of the grad_outputs' own generator (the case's generator is left as the other
#: probes expect it).
SEED = 22


class BatchedUnsupportedError(Exception):
    """This torch's autograd.grad has no is_grads_batched (it appeared in torch 1.11-1.13)."""


def grads_of(fn: Callable[..., Any], inputs: Inputs, gen: torch.Generator
             ) -> tuple[list[Tensor | None], list[Tensor | None], Exception | None,
                        Callable[[], bool]] | None:
    """(the batched gradients, the looped ones stacked, the batched call's exception, whether
    the first single backward gives the same again) of `fn` on fresh copies of `inputs`; None
    when forward or a single backward fails (the other checks say so) or no output is
    differentiable."""
    leaves = inputs.clone()
    wrt = [leaves.args[i] for i in leaves.diff_index]
    try:
        replay()  # the case's RNG state, as every other run of the case
        with torch.enable_grad():
            outs = [o for o in flat_outputs(fn(*leaves.args, **leaves.kwargs)) if o.requires_grad]
        if not outs:
            return None
        gos = [shifted_samples(o, gen) for o in outs]

        def one(b: int) -> tuple[Tensor | None, ...]:
            # a copy: a backward that writes into its grad_output leaves the batch alone
            return torch.autograd.grad(outs, wrt, [g[b].clone() for g in gos],
                                       retain_graph=True, allow_unused=True)

        single = [one(b) for b in range(BATCH)]
    except Exception:
        return None
    looped: list[Tensor | None] = []
    for i in range(len(wrt)):
        parts = [t for s in single if (t := s[i]) is not None]
        looped.append(torch.stack(parts) if len(parts) == BATCH else None)
    try:
        with warnings.catch_warnings(), data_refused():
            warnings.simplefilter("ignore")  # vmap's slow-fallback performance warnings
            got = torch.autograd.grad(outs, wrt, gos, retain_graph=True, allow_unused=True,
                                      is_grads_batched=True)
    except TypeError as exc:
        if "is_grads_batched" in str(exc):
            raise BatchedUnsupportedError(torch.__version__) from exc
        return [], looped, exc, lambda: True
    except Exception as exc:
        return [], looped, exc, lambda: True

    def reentrant() -> bool:
        # the first backward again: one that is not re-entrant (the contract row's finding)
        # makes the loop disagree with itself, not with the batch
        return all(same(a, b) for a, b in zip(single[0], one(0), strict=True))

    return list(got), looped, None, reentrant


def legacy_batched(t: Tensor) -> bool:
    """A legacy batched tensor (is_grads_batched's) on a torch without
    is_legacy_batchedtensor (2.1): its dispatch keys hold `Batched`."""
    keys = str(torch._C._dispatch_keys(t)).removeprefix("DispatchKeySet(").removesuffix(")")
    return "Batched" in keys.split(", ")


@contextmanager
def data_refused() -> Iterator[None]:
    """`.data` of a legacy batched tensor raises inside: torch 2.x's legacy vmap (the one
    is_grads_batched uses) crashes the process on it (a segmentation fault, measured on
    torch 2.13), where torch.func.vmap raises.  A backward reading `grad_output.data` is a
    missing capability, never a dead worker or a dead caller."""
    is_batched = getattr(torch._C._functorch, "is_legacy_batchedtensor", legacy_batched)
    base = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase  # its name in 2.1
    plain = base.__dict__.get("data")
    if is_batched is None or plain is None or "data" in torch.Tensor.__dict__:
        yield  # another torch: nothing to guard with
        return

    def get(self: Tensor) -> Tensor:
        if is_batched(self):
            raise RuntimeError("batched_grad: .data of a batched grad_output (vmap refuses it)")
        return plain.__get__(self)  # type: ignore[no-any-return]

    torch.Tensor.data = property(get, plain.__set__)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        del torch.Tensor.data


def shifted_samples(out: Tensor, gen: torch.Generator) -> Tensor:
    """BATCH grad_outputs for `out`: windows of one random vector BATCH - 1 longer, each
    shifted by one (other values at every position; one draw: drawing BATCH full tensors
    cost a tenth of a 1e5-element check), drawn in float32 as every random grad_output
    (`cases.standard_normal`: torch's float64 sampler took 1.8 ms of it at 1e5)."""
    n = out.numel()
    flat = standard_normal(n + BATCH - 1, gen)
    windows = flat.unfold(0, n, 1).reshape(BATCH, *out.shape)
    if out.is_complex():  # imaginary parts too: the same windows in reverse order
        windows = torch.complex(windows, windows.flip(0))
    return windows.to(out.dtype).to(out.device).contiguous()


def same(a: Tensor | None, b: Tensor | None) -> bool:
    """Both None, or equal values (NaN where NaN)."""
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(torch.equal(a, b) or torch.allclose(
        a, b, rtol=0, atol=0, equal_nan=True))


def differences(ctx: CaseContext, inputs: Inputs, got: Sequence[Tensor | None],
                want: Sequence[Tensor | None]) -> list[Finding]:
    """A finding per input whose batched gradient differs from the loop's."""
    found = []
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        i = inputs.diff_index[k]
        if g is None or w is None:
            if (g is None) != (w is None):
                found.append(Finding("input", i, "batched_grad_wrong"))
            continue
        if g.shape != w.shape:
            found.append(Finding("input", i, "batched_grad_wrong", got=tuple(g.shape),
                                 want=tuple(w.shape)))
            continue
        d = dg.compare(g, w, ctx.op.tolerance(ctx.dtype), scaled=True)
        if not d.ok:
            found.append(Finding("input", i, "batched_grad_wrong", shape=tuple(g.shape),
                                 stats=d.stats))
    return found


def batched_grad_row(ctx: CaseContext, inputs: Inputs) -> None:
    """The batched_grad row of one case (appended to ctx.rows)."""
    gen = torch.Generator().manual_seed(SEED)
    try:
        measured = grads_of(ctx.op.function, inputs, gen)
    except BatchedUnsupportedError as exc:
        ctx.row(CAPABILITY, "capabilities", SKIP, reason="batched_grad_old_torch",
                note=f"torch {exc} has no is_grads_batched", declared=True)
        return
    if measured is None:
        return
    got, looped, error, reentrant = measured
    if error is None:
        found = differences(ctx, inputs, got, looped)
        if found and not reentrant():
            return  # the loop disagrees with itself: not_reentrant, on the contract row
        if found:
            ctx.row(CAPABILITY, "capabilities", policy.status("capabilities", "batched_grad_wrong"),
                    hint="batched_grad_wrong", findings=found)
        else:
            ctx.row(CAPABILITY, "capabilities", PASS)
        return
    ref = ctx.op.reference
    theirs = grads_of(ref, inputs, torch.Generator().manual_seed(SEED)) if ref is not None else None
    if theirs is not None and theirs[2] is not None:
        ctx.row(CAPABILITY, "capabilities", SKIP, reason="batched_grad_unsupported",
                note=first_line(theirs[2]), declared=True)
        return
    ctx.capability_row(CAPABILITY, "capabilities", CAPABILITY, hint="batched_grad_missing",
                       reason="batched_grad_missing", note=first_line(error))

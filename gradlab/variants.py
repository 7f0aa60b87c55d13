"""Variants of a case that plain gradcheck never feeds a Function.

Input layouts (a strided slice of a larger buffer, transposed memory, channels_last, stride-0
expanded), grad_output layouts (non-contiguous, transposed, the stride-0 one `.sum()` makes),
requires_grad subsets, undefined output gradients and size-1 dimensions.  Each variant's forward
and gradients are compared with the reference on the same values (or with the Function's own
contiguous run when there is no reference).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from gradlab import diagnose as dg
from gradlab.cases import Inputs, copy_like, materialize
from gradlab.model import TensorArg
from gradlab.results import CheckRow

if TYPE_CHECKING:
    from gradlab.engine import _Ctx, _Run

#: Variant families, as named in specs and options.
FAMILIES = ("noncontiguous", "transposed", "channels_last", "expanded", "grad_output",
            "requires_grad", "undefined_grad", "size1")

#: The hint a failing variant gets when the base run of the same case passed.
_ONLY_HINT = {
    "noncontiguous": "noncontiguous_only",
    "transposed": "noncontiguous_only",
    "channels_last": "channels_last_only",
    "expanded": "expanded_only",
    "grad_output": "grad_output_layout",
    "requires_grad": "requires_grad_subset",
    "undefined_grad": "undefined_grad",
    "size1": "size1_only",
}


@dataclass
class Variant:
    """One variant: its name and family, inputs, grad_output layout and whether values changed."""

    name: str
    family: str
    inputs: Inputs
    go_layout: str = "contiguous"
    #: the values differ from the base case (expanded, size-1), so the expectation is recomputed.
    new_values: bool = False
    #: output positions whose gradient is left undefined.
    undefined: tuple[int, ...] = ()


def _sliced(t: Tensor) -> Tensor:
    """Same values, every other element of a buffer twice as long in the last dim."""
    buf = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
    out = buf[..., 1::2]
    out.copy_(t.detach())
    return out.requires_grad_(t.requires_grad)


def _transposed(t: Tensor) -> Tensor:
    out = t.detach().transpose(-2, -1).contiguous().transpose(-2, -1)
    return out.requires_grad_(t.requires_grad)


def _channels_last(t: Tensor) -> Tensor:
    out = t.detach().contiguous(memory_format=torch.channels_last)
    return out.requires_grad_(t.requires_grad)


def _expanded(t: Tensor) -> Tensor | None:
    """Stride 0 along the first dim of size > 1 (its values repeat), as a leaf."""
    dim = next((d for d, n in enumerate(t.shape) if n > 1), None)
    if dim is None:
        return None
    one = t.detach().narrow(dim, 0, 1).clone()
    return one.expand(t.shape).requires_grad_(t.requires_grad)


def generate(ctx: _Ctx, base: Inputs, n_outputs: int) -> Iterator[Variant]:
    """Every variant of `base` the target allows."""
    allowed = ctx.target.variants
    opt = ctx.options.variants
    if opt is False:
        return
    fams = set(FAMILIES)
    if allowed is not None:
        fams &= set(allowed)
    if isinstance(opt, frozenset):
        fams &= set(opt)
    layouts = [("noncontiguous", _sliced, 1), ("transposed", _transposed, 2),
               ("channels_last", _channels_last, 4), ("expanded", _expanded, 1)]
    for family, make, min_dim in layouts:
        if family not in fams:
            continue
        for i in base.tensor_index:
            t = base.args[i]
            if t.dim() < min_dim or (family == "channels_last" and t.dim() != 4):
                continue
            if family == "channels_last" and t.is_contiguous(memory_format=torch.channels_last):
                continue
            if family == "transposed" and (t.shape[-1] < 2 or t.shape[-2] < 2):
                continue
            new = make(t)
            if new is None:
                continue
            inputs = base.clone()
            inputs.args[i] = new
            yield Variant(f"{family}[{i}]", family, inputs, new_values=family == "expanded")
    if "grad_output" in fams and base.diff_index:
        for layout in ("noncontiguous", "transposed", "expanded"):
            # the stride-0 grad_output repeats one value: its expectation is recomputed
            yield Variant(f"grad_output:{layout}", "grad_output", base.clone(), go_layout=layout,
                          new_values=layout == "expanded")
    diff = base.diff_index
    if "requires_grad" in fams and len(diff) > 1:
        for i in diff:
            yield Variant(f"requires_grad=[{i}]", "requires_grad", base.clone(requires_grad={i}))
    if "undefined_grad" in fams and n_outputs > 1 and diff:
        for k in range(n_outputs):
            yield Variant(f"undefined_grad[out{k}]", "undefined_grad", base.clone(),
                          new_values=True, undefined=(k,))
    if "size1" in fams:
        for group in ctx.case.size1:
            args = list(ctx.case.args)
            for pos, dim in group:
                a = args[pos]
                if isinstance(a, TensorArg):
                    shape = list(a.shape)
                    shape[dim] = 1
                    args[pos] = replace(a, shape=tuple(shape))
                elif isinstance(a, Tensor):  # an example tensor from the Python API
                    args[pos] = copy_like(a.detach().narrow(dim, 0, 1).contiguous(),
                                          requires_grad=a.requires_grad)
            case = replace(ctx.case, args=tuple(args))
            label = ",".join(f"{p}.{d}" for p, d in group)
            yield Variant(f"size1[{label}]", "size1",
                          materialize(case, ctx.dtype, ctx.device, seed=1234), new_values=True)


def _expected(ctx: _Ctx, v: Variant, base_want: _Run, grad_outs64: list[Tensor] | None,
              gen: torch.Generator) -> _Run:
    """What the variant must produce: the reference (or base Function run) on its values."""
    from gradlab.engine import run_once

    fn = ctx.op.reference or ctx.op.function
    dtype = torch.float64 if ctx.op.reference is not None else None
    if v.new_values:
        # contiguous copies of the variant's own values
        inputs = Inputs([copy_like(a.contiguous(), dtype=dtype, requires_grad=a.requires_grad)
                         if isinstance(a, Tensor) else a for a in v.inputs.args],
                        dict(v.inputs.kwargs))
        return run_once(fn, inputs, None if v.family == "size1" else grad_outs64, gen)
    return base_want


def _subset_grads(v: Variant, base: Inputs, want: _Run) -> _Run:
    """The expected run with gradients only for the inputs the variant differentiates."""
    from gradlab.engine import _Run

    keep = [want.grads[k] for k, i in enumerate(base.diff_index) if i in v.inputs.diff_index]
    return _Run(want.outs, keep, want.error, want.stage, [], want.grad_outs64)


def variant_rows(ctx: _Ctx, base: Inputs, grad_outs64: list[Tensor], base_want: _Run,
                 checks: frozenset[str], gen: torch.Generator) -> None:
    """Run every variant and append its rows to ctx.rows.

    base_want: the expected run on the base values with `grad_outs64` (the reference's, or the
    Function's own contiguous run when there is no reference); variants on the same values
    are compared with it, the others get their own.
    """
    from gradlab.engine import compare_runs, contract_row, run_once

    tol = ctx.op.tolerance(ctx.dtype)
    fn = ctx.op.function
    base_failed = any(r.failed for r in ctx.rows)
    # When the base case fails too, its diagnosis (e.g. no_chain_rule) is the variants' best one.
    base_hints = {r.check: r.hint for r in ctx.rows if r.failed and r.hint}
    for v in generate(ctx, base, len(grad_outs64)):
        t0 = time.perf_counter()
        n_before = len(ctx.rows)
        gos64 = grad_outs64
        if v.go_layout == "expanded":
            gos64 = [g.reshape(-1)[:1].reshape([1] * g.dim()).expand(g.shape).contiguous()
                     for g in grad_outs64]
        if v.undefined:
            # an undefined gradient means "zero" to the reference
            gos64 = [torch.zeros_like(g) if k in v.undefined else g for k, g in enumerate(gos64)]
        want = _expected(ctx, v, base_want, gos64, gen)
        gos = want.grad_outs64 if v.family == "size1" else gos64
        if v.undefined:
            got = _run_undefined(fn, v.inputs, gos, v.undefined)
        else:
            got = run_once(fn, v.inputs, gos, gen, go_layout=v.go_layout, check_contract=True)
        if v.family == "requires_grad":
            want = _subset_grads(v, base, want)
        if v.family == "expanded" and got.error is not None and got.stage == "forward":
            # Expanded inputs are checked only where the Function accepts them: refusing a
            # stride-0 input in forward is a choice, not a wrong gradient.
            ctx.rows.append(CheckRow(ctx.op.name, ctx.case.name, ctx.dtype, ctx.device, v.name,
                                     "forward", "skip", seconds=time.perf_counter() - t0,
                                     message="forward does not accept an expanded input: "
                                             f"{type(got.error).__name__}: "
                                             f"{str(got.error).splitlines()[0][:200]}"))
            continue
        rows = compare_runs(ctx, v.name, got, want, v.inputs, tol,
                            checks=checks & {"forward", "gradient"})
        if v.family in ("grad_output", "requires_grad", "undefined_grad"):
            # the forward is the base forward again: keep only the gradient row
            for r in [r for r in rows if r.check == "forward" and not r.failed]:
                ctx.rows.remove(r)
        if "contract" in checks:
            contract_row(ctx, v.name, got.contract, passing=False)
        for r in ctx.rows[n_before:]:
            if not r.failed or r.check == "contract":
                continue  # contract rows keep their own, more specific, hint
            if not base_failed:
                # The base case passed: what is wrong is the variant itself.
                r.hint = _ONLY_HINT[v.family]
                r.message = f"{dg.HINTS[r.hint]}; {r.message}"
            elif not r.hint:
                r.hint = base_hints.get(r.check, "")
        for r in ctx.rows[n_before:]:
            r.seconds = time.perf_counter() - t0


def _run_undefined(fn: Any, inputs: Inputs, gos: list[Tensor], undefined: tuple[int, ...]
                   ) -> Any:
    """Backward with some outputs' gradients undefined (autograd passes None / zeros)."""
    from gradlab import jacobian as jac
    from gradlab.engine import _Run

    try:
        with torch.enable_grad():
            outs = jac.flat_outputs(fn(*inputs.args, **inputs.kwargs))
        pairs = [(o, g.to(o.dtype).to(o.device)) for k, (o, g) in enumerate(zip(outs, gos,
                                                                                strict=True))
                 if k not in undefined and o.requires_grad]
        grads = torch.autograd.grad([p[0] for p in pairs], [inputs.args[i] for i in
                                                            inputs.diff_index],
                                    [p[1] for p in pairs], allow_unused=True)
        return _Run(outs, list(grads), grad_outs64=gos)
    except Exception as exc:
        return _Run([], [], exc, "backward", grad_outs64=gos)

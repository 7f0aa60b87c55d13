"""Variants that repeat values: tied floating values and repeated integer indices.

- ties: every floating differentiable input with each slice repeated once along every dim
  (positions 2m and 2m + 1 hold slice 2m: a point repeated, a row repeated, a 2x2 block of
  equal values).  Pairing along every dim ties the two values of each pair along whatever dim
  a Function reduces over, so a max over any dim, or a 2x2 max-pool window, ties at its
  maximum in most lines; copying only slice 0 onto slice 1 along one dim would tie a line's
  maximum in 2 of n lines.  Every value is one the case drew (no new zeros, bounds and
  `min_abs` kept).  A max-pool whose backward gives every tied maximum the full gradient
  (point clouds padded by repeating points) is wrong exactly there.
- repeated_index: every int64/int32 tensor argument of more than one element redrawn from
  its own first half of values, so each value repeats (bounds kept: only values the case
  drew, within its min..max).  An embedding backward `gw[idx] = g` instead of `index_add_`
  keeps one occurrence of a repeated token; distinct indices never show it.
- sentinel: every int64/int32 tensor argument holding, at its nearest position, the value of
  each int argument of the call that it lacks and that lies within its positions (0..max):
  an embedding's `padding_idx`, a loss's `ignore_index` is an index the call names, whose
  position must get no gradient (or must be skipped), and a case that draws indices may never
  hold it.  The nearest position keeps sorted indices sorted, as `repeated` does.

At a tie the derivative is not defined: the reference's convention (torch.max(dim) gives one
index the gradient, amax splits it evenly) is one valid subgradient among many.  A Function
whose gradient differs from the reference's only by how it shares the gradient among tied
values (the total through each group of equal values agrees) passes with reason
`tie_convention`; one whose total is wrong (every tie given the whole
gradient: k times too much) fails with `ties_only`.  The same holds in every variant whose
values may tie where the case's do not (the special variant's planted zeros, an expanded
input's repeated values; tests/test_torch_ops.py: a sort ordering ties its own way), and only
for elements inside a tie: an element wrong outside one is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Tolerance
from gradlab.results import PASS, CheckRow, Finding

#: Seed of the repeated_index variant's draws (fixed: a run is reproducible).
REPEAT_SEED = 2718
#: How far `untied` moves each tied value back toward the case's own value there: far enough
#: to leave every dtype's ties apart (bfloat16's spacing is 2**-7 relative; values drawn in
#: [-1, 1] differ by ~0.1, so 1/16 of that stays distinct), near enough that an error that
#: varies smoothly with the values (an approximate method) fails alike.
UNTIE = 1 / 16
#: The integer dtypes redrawn as indices (bool is a mask, uint8 an image or a mask).
INDEX_DTYPES = (torch.int64, torch.int32)


def paired(t: Tensor) -> Tensor:
    """`t` with slice 2m copied onto slice 2m + 1 along every dim of size above 1."""
    out = t.detach().contiguous()
    for d, n in enumerate(out.shape):
        if n > 1:
            idx = (torch.arange(n, device=out.device) // 2) * 2
            out = out.index_select(d, idx)
    return out


def tied_inputs(base: Inputs) -> tuple[list[int], Inputs] | None:
    """The base inputs with every floating differentiable tensor paired (`paired`), and the
    positions changed; None when no input has two elements to tie."""
    inputs, changed = base.clone(), []
    for i in base.diff_index:
        t = base.args[i]
        if t.is_complex():
            continue  # complex values have no order: no max or sort to tie
        new = paired(t)
        if not torch.equal(new, t.detach()):
            inputs.args[i] = copy_like(new, requires_grad=True)
            changed.append(i)
    return (changed, inputs) if changed else None


def repeated(t: Tensor, gen: torch.Generator) -> Tensor:
    """`t`'s values redrawn from its own first half (each value then repeats), sorted when
    `t` was (segment ids and offsets that must not decrease keep that order)."""
    flat = t.detach().reshape(-1)
    half = (flat.numel() + 1) // 2
    pick = torch.randint(0, half, (flat.numel(),), generator=gen)
    new = flat[pick.to(flat.device)]
    if bool((flat[1:] >= flat[:-1]).all()):
        new = new.sort().values
    return new.reshape(t.shape).contiguous()


def untied(inputs: Inputs, base: Inputs) -> Inputs:
    """The ties variant's inputs moved UNTIE of the way back to the base values: the same
    values but for the ties.  A failure that stays there is the values', not the ties'."""
    out = inputs.clone()
    for i in base.diff_index:
        v, b = inputs.args[i].detach(), base.args[i].detach()
        if not torch.equal(v, b):
            moved = (v.double() + UNTIE * (b.double() - v.double())).to(v.dtype)
            # in a short dtype a small move can round back onto the tie: the case's own value
            moved = torch.where((moved == v) & (b != v), b, moved)
            out.args[i] = copy_like(moved.contiguous(), requires_grad=True)
    return out


def _is_index(a: Any) -> bool:
    return isinstance(a, Tensor) and a.dtype in INDEX_DTYPES and a.numel() > 1


def _indices_replaced(base: Inputs, new_of: Callable[[Tensor], Tensor | None]
                      ) -> tuple[list[str], Inputs] | None:
    """The base inputs with every integer tensor (positional, then keyword) replaced by
    `new_of` of it where that gives other values, and the arguments changed; None when none
    changes."""
    inputs, changed = base.clone(), []
    for where, a in [*enumerate(base.args), *base.kwargs.items()]:
        new = new_of(a) if _is_index(a) else None
        if new is not None and not torch.equal(new, a):
            (inputs.args if isinstance(where, int) else inputs.kwargs)[where] = new
            changed.append(str(where))
    return (changed, inputs) if changed else None


def repeated_index_inputs(base: Inputs) -> tuple[list[str], Inputs] | None:
    """The base inputs with every integer tensor redrawn with repeats (`repeated`)."""
    gen = torch.Generator().manual_seed(REPEAT_SEED)
    return _indices_replaced(base, lambda a: repeated(a, gen))


def sentinel_inputs(base: Inputs) -> tuple[list[str], Inputs] | None:
    """The base inputs with each integer tensor holding the call's int arguments' values
    (`planted`)."""
    values = [v for v in (*base.args, *base.kwargs.values())
              if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    return _indices_replaced(base, lambda a: planted(a, values))


def planted(t: Tensor, values: list[int]) -> Tensor | None:
    """`t` with each value it lacks that lies in 0..max(t) at the position holding the value
    nearest to it (the first such, one position per value), sorted again where `t` was; None
    when no value is planted."""
    flat = t.detach().reshape(-1).clone()
    free = torch.ones_like(flat, dtype=torch.bool)
    for v in dict.fromkeys(values):
        if bool((flat == v).any()) or v > int(flat.max()) or not bool(free.any()):
            continue
        dist = (flat - v).abs().to(torch.float64).masked_fill(~free, float("inf"))
        k = int(dist.argmin())
        flat[k], free[k] = v, False
    if bool(free.all()):
        return None
    orig = t.detach().reshape(-1)
    if bool((orig[1:] >= orig[:-1]).all()):
        flat = flat.sort().values
    return flat.reshape(t.shape).contiguous()


def repeat_variants(fams: set[str], base: Inputs,
                    has_reference: bool) -> Iterator[tuple[str, str, Inputs]]:
    """(name, family, inputs) of the ties, repeated_index and sentinel variants that apply.
    Without a reference they would be compared with the Function's own run on the same
    values, which measures nothing: none."""
    if not has_reference:
        return
    if "ties" in fams:
        tied = tied_inputs(base)
        if tied is not None:
            yield f"ties[{','.join(map(str, tied[0]))}]", "ties", tied[1]
    if "repeated_index" in fams:
        rep = repeated_index_inputs(base)
        if rep is not None:
            yield f"repeated_index[{','.join(rep[0])}]", "repeated_index", rep[1]
    if "sentinel" in fams:
        sent = sentinel_inputs(base)
        if sent is not None:
            yield f"sentinel[{','.join(sent[0])}]", "sentinel", sent[1]


def groups(values: Tensor) -> Tensor:
    """Each element's group of equal `values` (0, 1, ...), flat."""
    return torch.unique(values.detach().reshape(-1), return_inverse=True)[1]


def group_sums(group: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    """`grad` summed over each group (`groups`), and each group's size."""
    n = int(group.max()) + 1 if group.numel() else 0
    flat = grad.detach().to(torch.float64).reshape(-1)
    group = group.to(flat.device)
    sums = torch.zeros(n, dtype=torch.float64, device=flat.device).index_add_(0, group, flat)
    sizes = torch.bincount(group, minlength=n).to(torch.float64)
    return sums, sizes


#: The nudge that breaks the ties (relative to the input's largest value), and how far the
#: reference's gradient must then move, relative to its largest, for the ties to be a kink:
#: a sort's or a max's gradient moves to other elements (O(1)), a smooth function's by the
#: nudge.  Pins: tests/test_torch_ops.py (a sort's ties), cal's torchdiffeq on a matrix of
#: equal rows (an ODE solver's small error, judged element by element).
TIE_NUDGE = 1e-6
KINK = 1e-3


def kinked(ref: Callable[..., Any] | None, inputs: Inputs, want: Run, index: int) -> bool:
    """Whether the reference's gradient of input `index` jumps (by KINK of its scale) when
    that input's ties are broken by a seeded nudge (TIE_NUDGE of its scale) one way or the
    other (a reference keeping one side's convention at the tie jumps only on the other:
    cal7's qpth at duplicated constraints), with the same grad_outputs; True without a
    reference or where a nudged run fails (nothing says the ties are smooth)."""
    k = inputs.diff_index.index(index)
    if ref is None or not want.grad_outs64 or k >= len(want.grads) or want.grads[k] is None:
        return True
    x = inputs.args[index].detach()
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(0),
                        dtype=torch.float64).to(device=x.device, dtype=x.dtype)
    scale = float(x.abs().max()) if x.numel() else 0.0
    w = want.grads[k].detach().double()
    top = float(w.abs().max()) if w.numel() else 0.0
    for sign in (1.0, -1.0):
        nudged = inputs.clone(but=index)
        nudged.args[index] = (x + sign * TIE_NUDGE * (scale or 1.0) * noise).requires_grad_()
        again = run_once(ref, nudged, want.grad_outs64, torch.Generator().manual_seed(0))
        if again.error is not None or k >= len(again.grads) or again.grads[k] is None:
            return True
        a = again.grads[k].detach().double().to(w.device)
        if bool(((a - w).abs() > KINK * (top or 1.0)).any()):
            return True
    return False


#: How much closer than its elements a tied group's total must agree for the difference to
#: be a share moved among the ties (tie_convention).  Pins: tests/test_torch_ops.py (a sort
#: ordering ties its own way: totals 1e-16 off, elements O(1)); cal7's qpth on an expanded
#: input (1e-7 off in every element, one sign) stays its own failure.
REDISTRIBUTED = 1e-2


def groups_agree(values: Tensor, got: Tensor, want: Tensor, tol: Tolerance) -> bool:
    """Whether `got` and `want` differ only inside groups of equal `values` (ties), each group
    with the same total (the absolute tolerance grows with the group: k elements' rounding
    adds up).  An element wrong outside any tie is wrong."""
    if values.is_complex() or not (torch.isfinite(got).all() and torch.isfinite(want).all()):
        return False  # complex values have no order to tie in (and torch has no unique)
    want = want.to(got.device)
    group = groups(values)
    g, sizes = group_sums(group, got)
    w, _ = group_sums(group, want)
    off = ~torch.isclose(got.detach().reshape(-1).double(), want.detach().reshape(-1).double(),
                         rtol=tol.rtol, atol=tol.atol)
    if bool((sizes[group.to(sizes.device)][off.to(sizes.device)] < 2).any()):
        return False
    scale = max(float(want.detach().abs().max()), 1.0) if want.numel() else 1.0
    bound = tol.atol * scale * sizes + tol.rtol * w.abs()
    # a share moved between ties leaves the totals far closer than the elements; an error
    # of one sign in every element (an approximate method on an expanded input) adds up
    moved = float((got.detach().double() - want.detach().double()).abs().max())
    return bool(((g - w).abs() <= bound).all()) and float(
        (g - w).abs().max()) <= REDISTRIBUTED * moved


def tie_convention(inputs: Inputs, runs: tuple[Run, Run], failing: list[CheckRow],
                   tol: Tolerance, ref: Callable[..., Any] | None = None) -> list[CheckRow]:
    """The failing rows that stay failures: a gradient row whose every wrong input gradient
    has the reference's total over each group of tied values passes with reason
    `tie_convention` (another valid share of the gradient among the ties), where the ties are
    a kink of the reference (kinked: a sort, a max; a smooth function's gradient at tied
    values is defined, and judged element by element)."""
    got, want = runs
    kept = []

    def agree(f: Finding) -> bool:
        if f.subject != "input" or f.index not in inputs.diff_index:
            return False
        k = inputs.diff_index.index(f.index)
        g = got.grads[k] if k < len(got.grads) else None
        w = want.grads[k] if k < len(want.grads) else None
        return (g is not None and w is not None and g.shape == w.shape
                and groups_agree(inputs.args[f.index], g, w, tol)
                and kinked(ref, inputs, want, f.index))

    for r in failing:
        if r.check == "gradient" and r.findings and all(agree(f) for f in r.findings):
            r.status, r.hint, r.reason, r.findings = PASS, "", "tie_convention", []
        else:
            kept.append(r)
    return kept


"""Value variants at the input values where formulas break: small magnitudes and special values.

- small: every differentiable floating input scaled toward 0 (its largest magnitude SMALL[dtype])
  in the run's dtype, compared with the float64 reference on the same values.  A backward
  written `1 / (exp(x) - 1)` instead of `1 / expm1(x)` cancels there (5-16% wrong in float32
  at x ~ 1e-7..1e-6, inf below 6e-8); the magnitude variant only scales inputs up.
- special: exact zeros (where the input's values span 0: a case drawn in [0.6, 1.5] leaves
  zero out of its domain) and the values a spec lists per argument (`special: [0, 1]`,
  `gradlab.check(..., special={0: [0, 1]})`), planted at a few seeded positions of each
  differentiable floating input.  A sinc backward `(x cos x - sin x) / x^2` is NaN at exactly
  0 (a removable singularity).  Where a planted value is a kink of the reference (its one-sided
  slopes disagree: relu at 0) and the Function's gradient lies between them, the Function's
  convention differs from the reference's (relu'(0) = 1 vs 0): such elements are left out
  (reason `special_kink`), as are those where the reference's own gradient is not finite
  (outside the math's domain, nothing to compare with).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, call, copy_like
from gradlab.checks.diagnosis.hints import is_kink
from gradlab.checks.families.sizes import scaled_inputs
from gradlab.checks.numeric.context import CaseContext
from gradlab.checks.numeric.execute import Run
from gradlab.checks.numeric.jacobian import EPS, realview
from gradlab.model import Case, TensorArg, Tolerance
from gradlab.results import CheckRow

#: Largest magnitude of the small variant's inputs per dtype: where adding x to 1 loses at
#: least ~10% of x (the dtype's epsilon: float32 1.2e-7 against 1e-6, float64 2.2e-16 against
#: 1e-12 (2e-4, far above float64's rtol of 1e-9), float16 9.8e-4 and bfloat16 7.8e-3 against
#: 1e-2), so exp(x) - 1, log(1 + x) or 1 - cos(x) shows its cancellation, while products of
#: two inputs stay normal numbers (1e-12 in float32, 1e-24 in float64, 1e-4 above float16's
#: smallest normal 6.1e-5: no subnormal rounding blamed on the Function) and the float64
#: reference, 4e3 (float32) or more digits finer than the run's dtype, stays accurate at
#: these values.  float64 runs are judged against a float64 reference: one whose own formula
#: cancels would be no truer than the Function (a stable reference is assumed).
SMALL = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-2, "bfloat16": 1e-2}
#: Positions planted with each special value per input: a few (a removable singularity fails
#: at one), seeded so the variant is the same on every run.
SPECIAL_POSITIONS = 3
#: Seed of the planted positions (one generator per input position: seed + position).
SPECIAL_SEED = 2718
#: The value every input gets planted, whatever a spec lists: exact zeros (x / x, sin(x) / x).
ZERO = 0.0
#: Above this many elements the planted positions are drawn as random indices (duplicates
#: dropped) instead of from a permutation of them all: randperm costs O(numel), 0.43 ms at
#: 1e5 and drawn twice per case, for a handful of positions.  Below it (every bundled spec and
#: test) the permutation, whose positions the hint corpus was measured with.
PERMUTED_MAX = 4096


def small_inputs(base: Inputs, dtype: str, *, halfway: bool = False) -> Inputs | None:
    """The base inputs with every differentiable tensor scaled so its largest magnitude is
    SMALL[dtype] (halfway: sqrt(SMALL), geometrically halfway from 1, where a cancellation
    costs only its square root: what fails there too is the values', not the smallness)."""
    scale = SMALL.get(dtype)
    if scale is None or not base.diff_index:
        return None
    inputs, changed = scaled_inputs(base, math.sqrt(scale) if halfway else scale,
                                    floating_only=True)
    return inputs if changed else None


def declared_special(case: Case, i: int) -> tuple[float, ...]:
    """The values planted in arg i: 0 and those its spec (TensorArg.special) or the API
    (Case.special) lists, each once."""
    return tuple(dict.fromkeys((ZERO, *(float(v) for v in _listed(case, i)))))


def _listed(case: Case, i: int) -> tuple[float, ...]:
    """The values a spec or the API lists for arg i (without the 0 always planted)."""
    a = case.args[i] if i < len(case.args) else None
    return a.special if isinstance(a, TensorArg) else tuple(case.special.get(i, ()))


def _plantable(case: Case, i: int) -> bool:
    """A differentiable input whose values are drawn (a spec's fixed values are taps)."""
    a = case.args[i] if i < len(case.args) else None
    return not (isinstance(a, TensorArg) and a.values is not None)


def planted(numel: int, i: int, n_values: int) -> list[list[int]]:
    """The flat positions of arg i planted with each of `n_values` values (distinct, seeded)."""
    gen = torch.Generator().manual_seed(SPECIAL_SEED + i)
    k = min(SPECIAL_POSITIONS, numel // max(n_values, 1))
    want = k * n_values
    order: list[int] = []
    if numel > PERMUTED_MAX:  # want <= 3 per value, far below numel: few duplicates to drop
        drawn = torch.randint(numel, (4 * want,), generator=gen).tolist()
        order = list(dict.fromkeys(drawn))[:want]
    if len(order) < want:
        order = torch.randperm(numel, generator=gen)[:want].tolist()
    return [order[j * k:(j + 1) * k] for j in range(n_values)] if k else []


def special_inputs(case: Case, base: Inputs) -> Inputs | None:
    """The base inputs with each special value planted in every drawn differentiable floating
    input, and the listed ones in a constant floating input that lists some (None when that
    changes no value)."""
    inputs = base.clone()
    changed = False
    for i in base.tensor_index:
        t = inputs.args[i].detach()
        diff = i in base.diff_index
        if not (t.is_floating_point() and _plantable(case, i) and (diff or _listed(case, i))):
            continue
        vals = declared_special(case, i)
        flat = t.contiguous().reshape(-1).clone()
        # 0 only inside the values' own range: a case drawn in [0.6, 1.5] says its domain
        # leaves zero out (x / x there is no bug); values a spec lists are planted anyway
        with_zero = diff and t.numel() > 0 and float(t.min()) <= ZERO <= float(t.max())
        for v, where in zip(vals, planted(flat.numel(), i, len(vals)), strict=False):
            if v == ZERO and not with_zero and v not in _listed(case, i):
                continue
            idx = torch.tensor(where, dtype=torch.long, device=flat.device)
            changed |= bool((flat[idx] != v).any())
            flat[idx] = v
        inputs.args[i] = copy_like(flat.reshape(t.shape), requires_grad=diff)
    return inputs if changed else None


def _slopes(ref: Any, inputs: Inputs, i: int, pos: int,
            gos: Sequence[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """(left, central, right) slopes of sum(grad_output * reference(inputs)) along element
    `pos` of arg i (float64; the differences jacobian.one_sided takes, not crossing the point)."""
    x = inputs.args[i]

    def at(t: float) -> float:
        with torch.no_grad():
            flat = x.detach().view(-1)
            old = float(flat[pos])
            flat[pos] = old + t
            try:
                outs = call(ref, inputs)
            finally:
                flat[pos] = old
        # real views: Re(sum(conj(g) * o)) for a complex output (jacobian.realview)
        return float(sum((realview(o.detach()).double() * realview(g.to(o.device))).sum()
                         for o, g in zip(outs, gos, strict=False) if o.shape == g.shape))

    m2, m1, p1, p2 = at(-2 * EPS), at(-EPS), at(EPS), at(2 * EPS)
    sides = ((m1 - m2) / EPS, (p1 - m1) / (2 * EPS), (p2 - p1) / EPS)
    return tuple(torch.tensor([s], dtype=torch.float64) for s in sides)  # type: ignore[return-value]


def _convention(a: float, sides: tuple[Tensor, Tensor, Tensor], tol: Tolerance,
                fd_tol: Tolerance) -> bool:
    """The Function's value `a` is one convention at a kink of the reference (`sides`: its
    one-sided slopes, float64): hints.is_kink, with `a` moved onto the slopes' interval when
    it lies within the run's tolerance of it (a bfloat16 gradient rounds g by 0.4%)."""
    lo, hi = float(sides[0].minimum(sides[2])), float(sides[0].maximum(sides[2]))
    near = min(max(a, lo), hi)
    if abs(a - near) <= tol.atol + tol.rtol * abs(near):
        a = near
    return is_kink(torch.tensor([a], dtype=torch.float64), sides, fd_tol)


def conventions(ctx: CaseContext, inputs: Inputs, got: Run, want: Run,
                tol: Tolerance) -> tuple[Run, int]:
    """`want` with the planted elements the Function may differ at taken from the Function's
    own gradient: a kink of the reference with the Function's value between its one-sided
    slopes (a convention), or a reference gradient that is not finite (outside its domain).
    Returns the expectation to compare with and how many elements were left out so."""
    case, ref, fd_tol = ctx.case, ctx.op.reference, ctx.op.numerical_tolerance("float64")
    if ref is None or got.error is not None or want.error is not None:
        return want, 0
    grads = list(want.grads)
    left = 0
    copies: list[Inputs] = []  # the float64 copy the slopes need, made once a slope is asked

    def x64() -> Inputs:
        if not copies:
            copies.append(inputs.clone(dtype=torch.float64))
        return copies[0]

    for k, i in enumerate(inputs.diff_index):
        g, w = (got.grads[k] if k < len(got.grads) else None), grads[k] if k < len(grads) else None
        if g is None or w is None or g.shape != w.shape or not _plantable(case, i) \
                or g.is_complex():  # nothing is planted in a complex input
            continue
        gf, wf = g.detach().reshape(-1).double().cpu(), w.detach().reshape(-1).clone()
        for where in planted(gf.numel(), i, len(declared_special(case, i))):
            for p in where:
                a, b = float(gf[p]), float(wf[p])
                if not math.isfinite(b):
                    pass  # the reference's domain ends here: nothing to compare with
                elif abs(a - b) <= tol.atol + tol.rtol * abs(b) or not _convention(
                        a, _slopes(ref, x64(), i, p, want.grad_outs64), tol, fd_tol):
                    continue
                wf[p] = a
                left += 1
        grads[k] = wf.reshape(w.shape)
    return (want.with_grads(grads) if left else want), left


def left_out(rows: Sequence[CheckRow], n: int) -> None:
    """The special variant's gradient rows say how many planted elements were left out."""
    for r in rows if n else ():
        if r.check == "gradient" and not r.failed:
            r.reason = r.reason or "special_kink"
            r.note = f"{n} planted element(s) left out"


def value_families(case: Case, fams: set[str], base: Inputs,
                   dtype: str) -> Iterator[tuple[str, Inputs]]:
    """The small and special variants' (family, inputs) this case takes."""
    if "small" in fams:
        small = small_inputs(base, dtype)
        if small is not None:
            yield "small", small
    if "special" in fams:
        special = special_inputs(case, base)
        if special is not None:
            yield "special", special


def special_mapping(special: Mapping[int, Sequence[float]] | None,
                    args: Sequence[Any]) -> dict[int, tuple[float, ...]]:
    """The API's `special=` (arg index -> values), checked: each index a floating tensor
    argument, each value finite."""
    out: dict[int, tuple[float, ...]] = {}
    for i, vals in (special or {}).items():
        if not isinstance(i, int) or not 0 <= i < len(args):
            raise ValueError(f"special: {i!r} is no argument index (0..{len(args) - 1})")
        if not (isinstance(args[i], Tensor) and args[i].is_floating_point()):
            raise ValueError(f"special[{i}]: argument {i} is no floating tensor (values are "
                             "planted in floating tensors only)")
        vs = tuple(float(v) for v in vals)
        if not all(math.isfinite(v) for v in vs):
            raise ValueError(f"special[{i}]: expected finite values, got {list(vals)}")
        out[i] = vs
    return out

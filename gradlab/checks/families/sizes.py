"""Variants that change values or sizes: large magnitudes and ragged sizes.

- magnitude: every differentiable input scaled to a range where naive formulas overflow or
  cancel in the run's dtype (a softplus backward written exp(x) / (1 + exp(x)) is NaN at x = 100
  in float32; a logsumexp without the max shift overflows).  The float64 reference on the same
  values decides what is expected: where it is NaN or infinite too, that is the math's domain.
- ragged: dims grown to the next odd size, so no multiple of 2, 8 or 16, every dim of one size in
  every tensor argument together (the sizes that must agree, such as a conv's out channels in
  weight and bias, stay in agreement).  Kernels written and tried at power-of-two sizes drop the
  last partial tile (a launch grid of n // BLOCK instead of cdiv(n, BLOCK)).  The two largest
  sizes grow together in one variant; only when it fails (or forward refuses it) does each
  size grow alone, to say which one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, copy_like, materialize
from gradlab.model import Case, TensorArg

#: Scale of the magnitude variant per dtype: large enough that exp(x) overflows in that dtype
#: (float32 and bfloat16 at x ~ 89, float16 at ~ 11, float64 at ~ 710) for inputs drawn in
#: [-1, 1], so a formula that needs the max-shift or a stable form shows it.
MAGNITUDE = {"float64": 1000.0, "float32": 100.0, "bfloat16": 100.0, "float16": 20.0}
#: How many distinct sizes the ragged variant grows (the largest ones: the tiled dims).
RAGGED_SIZES = 2
#: Seed of the ragged variant's values (its sizes differ from the case's: new values).
RAGGED_SEED = 4321


def magnitude_inputs(base: Inputs, dtype: str, *, halfway: bool = False) -> Inputs | None:
    """The base inputs with every differentiable tensor scaled so that its largest magnitude is
    MAGNITUDE[dtype] (so the overflow point is reached whatever values were drawn).

    halfway: to sqrt(MAGNITUDE[dtype]) instead, geometrically halfway there (30 in float64, 10
    in float32, 4.5 in float16) and far below every overflow point MAGNITUDE is chosen for: an
    overflow or a cancellation is a threshold those values stay below, an error that grows
    with the values (an approximation) fails there too."""
    scale = MAGNITUDE.get(dtype)
    if scale is None or not base.diff_index:
        return None
    return scaled_inputs(base, math.sqrt(scale) if halfway else scale)[0]


def scaled_inputs(base: Inputs, scale: float, *,
                  floating_only: bool = False) -> tuple[Inputs, bool]:
    """Copies of the base inputs with every differentiable tensor (floating_only: every real
    floating one, complex ones left alone) scaled so its largest magnitude is `scale`, and
    whether any was (an all-zero tensor stays as it is)."""
    inputs = base.clone()
    changed = False
    for i in base.diff_index:
        t = inputs.args[i].detach()
        top = float(t.abs().max()) if t.numel() else 0.0
        if top > 0 and (t.is_floating_point() or not floating_only):
            inputs.args[i] = copy_like(t * (scale / top), requires_grad=True)
            changed = True
    return inputs, changed


def ragged_size(n: int) -> int:
    """The next odd size above `n`: no multiple of any tile (2, 8, 16, ...).

    One element past the tested size is enough to catch a launch grid of n // BLOCK whatever
    BLOCK is: the grown size either has full tiles and a dropped tail, or (BLOCK above it) no
    tile at all.  Growing further (2n + 1 did) costs up to 4x a 2-d case and finds no more.
    """
    return n + 1 if n % 2 == 0 else n + 2


def _shapes(args: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(a.shape) for a in args if isinstance(a, (TensorArg, Tensor))]


def _fixed(a: Any) -> bool:
    """A tensor whose values are given (taps, a target) or not floating: it keeps its shape."""
    if isinstance(a, TensorArg):
        return a.values is not None or (a.dtype is not None and not a.dtype.startswith(
            ("float", "bfloat", "complex")))
    return isinstance(a, Tensor) and not (a.is_floating_point() or a.is_complex())


def constant(t: Any) -> bool:
    """An example tensor that does not require grad (floating, not empty): data the Function is
    conditioned on, given by the caller, whose rows may each have to be a valid object (a unit
    quaternion, a pose, soft targets summing to 1) by a rule its values cannot show.  gradlab
    never invents its values: it grows by its own rows repeated (grown_within), and its last
    dim, one object's components, is not grown (component_sizes) nor repeated (the expanded
    variant).  pypose's Lie groups in the calibration set: 23 false fail rows where drawn
    rows or components left the group."""
    return (isinstance(t, Tensor) and not t.requires_grad and t.dim() >= 1 and t.numel() > 0
            and (t.is_floating_point() or t.is_complex()))


def component_sizes(args: Sequence[Any]) -> set[int]:
    """The last-dim sizes of the constants: each row one object's components."""
    return {a.shape[-1] for a in args if constant(a)}


def ragged_sizes(args: Sequence[Any]) -> list[int]:
    """The sizes the ragged variant grows: the largest distinct dims above 1 that no fixed
    tensor (given values, integer or bool) has, since those cannot grow with the others, and
    no constant holds as its components (component_sizes)."""
    fixed = {n for a in args if _fixed(a) for n in tuple(a.shape)} | component_sizes(args)
    sizes = sorted({n for shape in _shapes(args) for n in shape if n > 1} - fixed, reverse=True)
    return sizes[:RAGGED_SIZES]


def _grown(shape: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...]:
    # all at once: growing 8 to 9 and then 9 to 11 would grow the first dims twice
    return tuple(ragged_size(n) if n in sizes else n for n in shape)


def ragged_case(case: Case, sizes: Sequence[int]) -> Case:
    """`case` with every dim of each of `sizes` grown to ragged_size, in every tensor
    argument."""
    args: list[Any] = []
    for a in case.args:
        if isinstance(a, TensorArg):
            shape = _grown(a.shape, sizes)
            # explicit strides were written for the old shape: the grown one is contiguous
            a = replace(a, shape=shape, layout="contiguous" if a.layout == "strided" else
                        a.layout, strides=None)
        elif isinstance(a, Tensor) and (a.is_floating_point() or a.is_complex()):
            a = grown_within(a, _grown(a.shape, sizes)).requires_grad_(a.requires_grad)
        args.append(a)
    return replace(case, args=tuple(args))


def grown_within(a: Tensor, shape: Sequence[int]) -> Tensor:
    """An example tensor grown to `shape`: its own values in the leading block, the new elements
    drawn uniformly within its observed min..max (per real and imaginary part).

    A tensor given to the API is the only evidence of its domain (an entmax alpha must exceed
    1, a variance be positive): values drawn from [-1, 1] instead left it and blamed the
    Function for the reference's own NaN (entmax_bisect's ragged rows).  A constant grows by
    its own rows repeated (tiled: constant says why)."""
    t = a.detach().to("cpu")
    if constant(a):
        return tiled(t, shape).to(device=a.device)
    real = torch.view_as_real(t).to(torch.float64) if t.is_complex() else t.to(torch.float64)
    lead = tuple(slice(0, n) for n in t.shape)
    out_shape = (*shape, *((2,) if t.is_complex() else ()))
    gen = torch.Generator().manual_seed(RAGGED_SEED)
    u = torch.rand(out_shape, generator=gen, dtype=torch.float64)
    if real.numel():
        # per part (real, imaginary) for complex, one 0-d bound otherwise: a [1] bound would
        # broadcast a 0-d tensor (a scale, a temperature) up to [1], which no Function expects
        flat = real.reshape(-1, 2) if t.is_complex() else real.reshape(-1)
        lo, hi = flat.amin(0), flat.amax(0)
        u = lo + (hi - lo) * u
        u[lead] = real  # the case's own values where they fit
    values = torch.view_as_complex(u.contiguous()) if t.is_complex() else u
    return values.to(device=a.device, dtype=a.dtype)


def tiled(t: Tensor, shape: Sequence[int]) -> Tensor:
    """`t` (of as many dims, none empty) at `shape`: its own slices repeated cyclically along
    every dim (a smaller size keeps the leading block)."""
    out = t
    for d, m in enumerate(shape):
        index = torch.arange(m, device=t.device) % out.shape[d]
        out = out.index_select(d, index)
    return out.contiguous()


def ragged_inputs(case: Case, sizes: Sequence[int], dtype: str, device: str) -> Inputs:
    """Concrete inputs of the ragged case for the grown sizes."""
    return materialize(ragged_case(case, sizes), dtype, device, seed=RAGGED_SEED)


def ragged_name(sizes: Sequence[int]) -> str:
    """`ragged[111->113,8->9]`."""
    return f"ragged[{','.join(f'{n}->{ragged_size(n)}' for n in sizes)}]"

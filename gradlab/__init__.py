"""gradlab: verify and benchmark the gradients of custom torch.autograd.Functions.

>>> import torch, gradlab
>>> x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
>>> gradlab.check(torch.exp, [x], reference=torch.exp).passed
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from gradlab.results import Report

__all__ = ["__version__", "check"]


def check(fn: Callable[..., Any], args: Sequence[Any], *,
          reference: Callable[..., Any] | None = None,
          kwargs: Mapping[str, Any] | None = None,
          second_order: bool | None = None,
          name: str | None = None,
          dtypes: Sequence[str] | None = None,
          devices: Sequence[str] | None = None,
          tolerances: Mapping[str, tuple[float, float]] | None = None,
          checks: Sequence[str] | None = None,
          variants: bool | Sequence[str] = True,
          size1: Sequence[Sequence[tuple[int, int]]] = (),
          mode: str = "auto",
          seed: int = 0,
          budget: float | None = None) -> Report:
    """Check a custom Function (or any callable) on example args, as `gradcheck` takes them.

    fn: an autograd.Function subclass (its `apply` is called) or a callable.  args: example
    tensors and plain values; tensors that require grad are differentiated (all floating ones
    when none does).  reference: the same math in plain autograd.  second_order: True runs
    gradgradcheck, False asserts that double backward raises, None runs it and skips when
    unsupported.  dtypes default to the examples' dtype; numerical checks run in float64.
    Returns a Report: `.passed`, and `.rows` with status, errors, location and hint per check
    and variant.
    """
    import torch

    from gradlab.engine import Options, run
    from gradlab.model import DEFAULT_TOLERANCES, Case, OpDef, Target, Tolerance, canonical_dtype
    from gradlab.spec import as_callable

    fn_call = as_callable(fn)
    ref_call = as_callable(reference) if reference is not None else None
    example = list(args)
    tensors = [a for a in example if isinstance(a, torch.Tensor)]
    if not any(t.requires_grad for t in tensors):
        example = [a.detach().requires_grad_(a.is_floating_point())
                   if isinstance(a, torch.Tensor) else a for a in example]
    floating = [t for t in tensors if t.is_floating_point()]
    from gradlab.cases import dtype_name

    dts = tuple(canonical_dtype(d) for d in dtypes) if dtypes else (
        (dtype_name(floating[0].dtype),) if floating else ("float64",))
    devs = tuple(devices) if devices else ((str(floating[0].device.type),) if floating
                                          else ("cpu",))
    tols = dict(DEFAULT_TOLERANCES)
    for k, (atol, rtol) in (tolerances or {}).items():
        tols[canonical_dtype(k)] = Tolerance(atol, rtol)
    label = str(name or getattr(fn, "__name__", type(fn).__name__))
    op = OpDef(name=label, summary="python", function=fn_call, reference=ref_call,
               cases=(Case("example", tuple(example), dict(kwargs or {}),
                           tuple(tuple(g) for g in size1)),),
               second_order=second_order, tolerances=tols, dtypes=dts, devices=devs)
    if isinstance(variants, bool):
        opt_variants: bool | frozenset[str] = variants
    else:
        opt_variants = frozenset(variants)
    options = Options(seed=seed, checks=frozenset(checks) if checks else None,
                      variants=opt_variants, mode=mode, budget=budget)
    return run([Target(op=op, source="python")], options)

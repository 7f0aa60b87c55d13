"""gradlab: verify and benchmark the gradients of custom torch.autograd.Functions.

>>> import torch, gradlab
>>> x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
>>> gradlab.check(torch.exp, [x], reference=torch.exp).passed
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gradlab.guard import DEFAULT_TIMEOUT_S
from gradlab.version import __version__

if TYPE_CHECKING:
    from gradlab.model import OpDef
    from gradlab.results import Report

__all__ = ["CheckLimitError", "__version__", "check"]


def __getattr__(name: str) -> Any:
    if name == "CheckLimitError":  # imported on use: `import gradlab` stays light
        from gradlab.apiguard import CheckLimitError

        return CheckLimitError
    raise AttributeError(f"module 'gradlab' has no attribute {name!r}")


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
          budget: float | None = None,
          requires: Sequence[str] = (), strict: bool = False, capabilities: str = "default",
          special: Mapping[int, Sequence[float]] | None = None,
          timeout: float | None = DEFAULT_TIMEOUT_S, max_memory: int | str | None = "auto",
          cost_envelope: float | None = 20.0, numerical_dtype: str = "float64",
          strict_tolerances: bool = False, precision_factor: float | None = None,
          explore: float = 0.0, isolate: bool = False) -> Report:
    """Check a custom Function (or any callable) on example args, as `gradcheck` takes them.

    fn: an autograd.Function subclass (its `apply` is called), a callable, or a torch.library
    op (`torch.ops.mylib.op`, a custom_op function: opcheck's rows too).  args: example tensors
    and plain values; those that require grad are differentiated (all floating ones when none
    does).  reference: the same math in plain autograd.  second_order: True checks it; False
    declares none (raising or right passes, silently wrong warns); None lets the reference
    decide (where it has double backward: wrong fails, raising is information).
    dtypes default to the examples' dtype; the numerical checks in numerical_dtype.  tolerances:
    dtype -> (atol, rtol) for every comparison in that dtype (the finite-difference checks
    take the larger of it and gradcheck's per component), and "finite_differences" -> (atol,
    rtol) for the finite-difference checks outright.  checks: names from gradlab.model.CHECKS.
    requires: capabilities (gradlab.model.CAPABILITIES) whose absence fails instead of warning
    or passing with a reason (gradlab.checks.diagnosis.policy); strict: every warn row fails.
    capabilities: "default" measures all but torch.compile, "all" that too (seconds more).
    special: arg index -> values the special variant plants besides 0 ({0: [1.0]}).  timeout,
    max_memory, cost_envelope: limits that stop a runaway check (gradlab.apiguard; off the main
    thread a blocking wait outlasts them).  numerical_dtype: the finite-difference checks' dtype.
    strict_tolerances, precision_factor: the strict table, the criterion's k (tolerances.py).
    isolate: in a worker killed at `timeout` (docs/reference.md).  explore: seconds of the
    input search per case (0: none).  Ctrl-C returns the rows so far.  Returns a Report:
    `.passed` (everything asked for ran and passed), `.rows` (status, hint, findings).
    """
    from gradlab.apiguard import guarded_run
    from gradlab.checks.run.options import Options, measured_capabilities
    from gradlab.model import Target, canonical_check, canonical_dtype

    _known_capabilities(requires)
    op = _example_op(fn, args, reference=reference, kwargs=kwargs, second_order=second_order,
                     name=name, dtypes=dtypes, devices=devices, tolerances=tolerances,
                     size1=size1, special=special)
    options = Options(seed=seed, mode=mode, budget=budget, strict=strict,
                      variants=variants if isinstance(variants, bool) else frozenset(variants),
                      checks=frozenset(canonical_check(c) for c in checks) if checks else None,
                      capabilities=measured_capabilities(capabilities), explore=explore)
    target = Target(op=_judged(op, strict_tolerances, precision_factor), source="python",
                    requires=frozenset(requires), devices=op.devices,  # the examples'
                    numerical_dtype=canonical_dtype(numerical_dtype))
    return guarded_run([target], options, timeout, max_memory, cost_envelope, isolate)


def _example_op(fn: Callable[..., Any], args: Sequence[Any], *,
                reference: Callable[..., Any] | None, kwargs: Mapping[str, Any] | None,
                second_order: bool | None, name: str | None, dtypes: Sequence[str] | None,
                devices: Sequence[str] | None,
                tolerances: Mapping[str, tuple[float, float]] | None,
                size1: Sequence[Sequence[tuple[int, int]]],
                special: Mapping[int, Sequence[float]] | None = None) -> OpDef:
    """The OpDef of an API call: one case, "example", made of the example args."""
    import math

    import torch

    from gradlab.cases import dtype_name
    from gradlab.checks.families.values import special_mapping
    from gradlab.model import FD_TOLERANCE_KEY, Case, OpDef, Tolerance, canonical_dtype
    from gradlab.spec import as_callable
    from gradlab.spec.imports import function_name

    example = list(args)
    tensors = [a for a in example if isinstance(a, torch.Tensor)]
    _refuse_unsupported(example, kwargs or {})
    if not any(t.requires_grad for t in tensors):
        example = [a.detach().requires_grad_(a.is_floating_point() or a.is_complex())
                   if isinstance(a, torch.Tensor) else a for a in example]
    floating = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    # a complex example runs in its real dtype (complex64: float32, its checks in complex128)
    dts = tuple(canonical_dtype(d) for d in dtypes) if dtypes else (
        (dtype_name(floating[0].real.dtype),) if floating else ("float64",))
    devs = tuple(devices) if devices else ((str(floating[0].device.type),) if floating
                                          else ("cpu",))
    tols: dict[str, Tolerance] = {}
    fd_tol = None
    for k, (atol, rtol) in (tolerances or {}).items():
        if not (math.isfinite(atol) and math.isfinite(rtol) and atol >= 0 and rtol >= 0):
            # a NaN tolerance makes every comparison pass, a negative one every one fail
            raise ValueError(f"tolerances[{k!r}]: expected finite atol and rtol >= 0, got "
                             f"({atol}, {rtol})")
        if k == FD_TOLERANCE_KEY:
            fd_tol = Tolerance(atol, rtol)
        else:
            tols[canonical_dtype(k)] = Tolerance(atol, rtol)
    function = as_callable(fn)  # a torch.library op: named ns::name (gradlab.customops)
    return OpDef(name=str(name or function_name(function)), summary="python",
                 function=function,
                 reference=as_callable(reference) if reference is not None else None,
                 cases=(Case("example", tuple(example), dict(kwargs or {}),
                             tuple(tuple(g) for g in size1),
                             special_mapping(special, example)),),
                 second_order=second_order, tolerances=tols, fd_tolerance=fd_tol, dtypes=dts,
                 devices=devs)


def _known_capabilities(requires: Sequence[str]) -> None:
    """A ValueError naming the first capability in `requires` gradlab does not know."""
    from gradlab.model import CAPABILITIES

    unknown = set(requires) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"requires: unknown capability {sorted(unknown)[0]!r} (expected one of "
                         f"{', '.join(CAPABILITIES)})")


def _judged(op: OpDef, strict_tolerances: bool, precision_factor: float | None) -> OpDef:
    """The op with the API's choice of how values are judged (strict table, criterion's k)."""
    from dataclasses import replace

    if not strict_tolerances and precision_factor is None:
        return op
    return replace(op, strict_tolerances=strict_tolerances,
                   precision_factor=(op.precision_factor if precision_factor is None
                                     else _positive(precision_factor)))


def _positive(k: float) -> float:
    """precision_factor, refused unless a finite number >= 1 (below 1 the Function would have
    to beat the reference it is judged by)."""
    import math

    if not (isinstance(k, (int, float)) and math.isfinite(k) and k >= 1):
        raise ValueError(f"precision_factor: expected a finite number >= 1, got {k!r}")
    return float(k)


def _refuse_unsupported(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """A ValueError naming the first tensor argument gradlab cannot check as it is: sparse or
    another non-strided layout (its values cannot be laid out in the memory layouts the checks
    use)."""
    import torch

    named = [(f"args[{i}]", a) for i, a in enumerate(args)]
    named += [(f"kwargs[{k!r}]", a) for k, a in kwargs.items()]
    for name, a in named:
        if not isinstance(a, torch.Tensor):
            continue
        if a.layout != torch.strided:
            raise ValueError(f"gradlab.check: {name} has layout {a.layout}: sparse and other "
                             "non-strided tensors are not checked yet (pass a dense tensor, "
                             "or use torch.autograd.gradcheck(masked=...) for this Function)")

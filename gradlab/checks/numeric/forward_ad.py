"""The forward_ad check: a Function's forward-mode derivative (its `jvp` staticmethod: what
torch.func.jvp, jacfwd and dual numbers run) in float64, gradcheck's check_forward_ad.

Each differentiable input is checked on its own (so a wrong jvp is localised to its input):
J u, the output tangents of a dual-number call along a random unit tangent u (dual numbers
rather than torch.func.jvp, which refuses classic Functions without setup_context), against
central finite differences along the same u (`jacobian.directional_derivative`) and, where the
reference supports forward mode, against the reference's J u.  A disagreement with the finite
differences that the reference's jvp shares is the example values' (a kink), not the jvp's.
Probe mode localises a wrong J u to input elements by bisection over masks of u; dense mode
(forced, or a failing small case in auto mode) builds J column by column from unit tangents
against `jacobian.numerical_jacobian`.  A Function that raises NotImplementedError under
forward mode where the reference runs lacks a capability (information,
gradlab.checks.diagnosis.policy: the capability matrix's `fwd` column; `requires: [forward_ad]`
makes it a failure); another exception is its jvp's crash.
"""

from __future__ import annotations

import functools
import importlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, flat_outputs
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import factor_hint
from gradlab.checks.numeric import jacobian as jac
from gradlab.checks.numeric.context import CaseContext, crash_location, first_line
from gradlab.checks.numeric.numerical import DENSE_MAX_CALLS, with_roundoff
from gradlab.model import Tolerance
from gradlab.results import PASS, SKIP, CheckRow, Element, Finding
from gradlab.torchstate import replay

#: torch.autograd.forward_ad (dual numbers; custom Functions' jvp since torch 1.11): None on a
#: torch without it, where the check is a declared skip naming the version.
FORWARD_AD: Any = getattr(torch.autograd, "forward_ad", None)


@functools.cache
def quiet_jvp_decompositions() -> None:
    """Load torch's forward-mode decompositions once, without their warnings.  The first dual
    number loads torch._decomp.decompositions_for_jvp, which scripts functions with
    torch.jit.script (deprecated in recent torch): 18 DeprecationWarnings in the summary of the
    user's test run, none about their code."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            importlib.import_module("torch._decomp.decompositions_for_jvp")
        except ImportError:
            pass  # another torch: nothing to load ahead


@dataclass
class Tangents:
    """One dual-number call: the differentiable outputs' flat tangent J u (float64, zeros
    where the jvp gave none), whether every tangent was None, and the outputs it covers."""

    jvp: Tensor
    none: bool
    covered: list[int]
    outputs: list[Tensor]


def jvp_along(fn: Callable[..., Any], inputs: Inputs, i: int, u: Tensor) -> Tangents:
    """J u of `fn` for args[i] = x along the flat tangent u (dual numbers, from the case's RNG
    state); the outputs covered are those that require grad (the jacobian check's rows)."""
    quiet_jvp_decompositions()
    x = inputs.args[i]
    args = list(inputs.args)
    with torch.enable_grad(), FORWARD_AD.dual_level():
        args[i] = FORWARD_AD.make_dual(x, tangent(u, x))
        replay()
        outs = flat_outputs(fn(*args, **inputs.kwargs))
        pairs = [FORWARD_AD.unpack_dual(o) for o in outs]
    covered = jac.differentiable(outs)
    parts = [pairs[k].tangent for k in covered]
    flat = [torch.zeros(jac.real_numel(outs[k]), dtype=torch.float64) if t is None
            else jac.realview(t.detach()).reshape(-1).to(dtype=torch.float64, device="cpu")
            for k, t in zip(covered, parts, strict=True)]
    vec = torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64)
    outputs = [p.primal.detach() for p in pairs]
    return Tangents(vec, bool(parts) and all(t is None for t in parts), covered, outputs)


def tangent(u: Tensor, x: Tensor) -> Tensor:
    """The flat real tangent u as x's tangent: for a complex x, the complex tensor whose real
    view u is (forward mode's J u is then the real Jacobian's, jacobian.realview)."""
    t = u.reshape(jac.real_shape(x)).to(device=x.device)
    return (torch.view_as_complex(t.double().contiguous()) if x.is_complex() else t).to(x.dtype)


def ref_jvp(ref: Callable[..., Any] | None, inputs: Inputs, i: int, u: Tensor,
            covered: Sequence[int]) -> Tensor | None:
    """The reference's J u over the same outputs, or None (no reference, no forward mode, or
    other outputs)."""
    if ref is None:
        return None
    try:
        t = jvp_along(ref, inputs.clone(), i, u)
    except Exception:
        return None
    return t.jvp if t.covered == list(covered) else None


def supports(fn: Callable[..., Any] | None, inputs: Inputs,
             i: int | None = None) -> BaseException | None:
    """None when `fn` runs under forward mode along its differentiable input i (the first by
    default), else what it raised."""
    if fn is None:
        return RuntimeError("no reference")
    i = inputs.diff_index[0] if i is None else i
    try:
        jvp_along(fn, inputs.clone(), i, torch.zeros(jac.real_numel(inputs.args[i]),
                                                     dtype=torch.float64))
    except Exception as exc:
        return exc
    return None


def forward_ad_row(ctx: CaseContext, inputs: Inputs, gen: torch.Generator,
                   first_ok: bool) -> CheckRow:
    """The forward_ad row of one case (appended to ctx.rows); first_ok: the jacobian check
    passed (a wrong jvp is then forward mode's alone: `forward_ad_only`)."""
    t0 = time.perf_counter()
    op = ctx.op
    if FORWARD_AD is None:
        return ctx.row("base", "forward_ad", SKIP, declared=True, reason="forward_ad_unavailable",
                       note=f"torch {torch.__version__} has no torch.autograd.forward_ad")
    tol = op.numerical_tolerance(ctx.dtype)
    try:
        results = [input_result(ctx, inputs, i, tol, gen) for i in inputs.diff_index]
    except FunctionRaised as raised:
        # along every input: an op without a forward-mode formula may sit on one input's path
        # only (a torch.cdist of the second argument)
        return unsupported_row(ctx, raised.error, raised.along, inputs, t0)
    findings = [f for f, _, _ in results if f is not None]
    max_abs = max((d.stats.max_abs for _, d, _ in results), default=0.0)
    max_rel = max((d.stats.max_rel for _, d, _ in results), default=0.0)
    mode = "dense" if any(m for _, _, m in results) else "fast"
    kw: dict[str, Any] = {"max_abs_err": max_abs, "max_rel_err": max_rel, "mode": mode,
                          "seconds": time.perf_counter() - t0}
    if not findings:
        return ctx.row("base", "forward_ad", PASS, **kw)
    hint = next((f.hint for f in findings if f.hint), "")
    if not hint and first_ok:
        hint = "forward_ad_only"  # backward is right: the jvp has a formula of its own
        for f in findings:
            f.hint = f.hint or hint
    return ctx.row("base", "forward_ad", policy.status("forward_ad", hint), hint=hint,
                   findings=findings, **kw)


class FunctionRaised(Exception):
    """The Function's own forward mode raised along input `along` (input_result's jvp)."""

    def __init__(self, error: BaseException, along: int) -> None:
        super().__init__(str(error))
        self.error, self.along = error, along


def unsupported_row(ctx: CaseContext, raised: BaseException, along: int, inputs: Inputs,
                    t0: float) -> CheckRow:
    """The row of a Function whose forward mode raised along input `along`: a declared skip
    where the reference has none there either, a missing capability for an absent jvp or
    formula (NotImplementedError), else an error."""
    if supports(ctx.op.reference, inputs, along) is not None:
        # neither has forward mode (or there is nothing that has it): nothing is lost
        return ctx.row("base", "forward_ad", SKIP, declared=True,
                       reason="forward_ad_unsupported", note=first_line(raised),
                       seconds=time.perf_counter() - t0)
    if not isinstance(raised, NotImplementedError):
        # not an absent jvp (torch raises NotImplementedError for one, and for an op without a
        # forward-mode formula) but one that crashes: what jacfwd would meet
        return ctx.crash_row("base", "forward_ad", raised, seconds=time.perf_counter() - t0)
    return ctx.capability_row("base", "forward_ad", "forward_ad", hint="forward_ad_missing",
                              reason="forward_ad_missing", note=first_line(raised),
                              crash_location=crash_location(raised),
                              seconds=time.perf_counter() - t0)


def input_result(ctx: CaseContext, inputs: Inputs, i: int, tol: Tolerance,
                 gen: torch.Generator) -> tuple[Finding | None, dg.Diff, bool]:
    """Input i's J u compared along one random unit tangent: (finding or None, the
    comparison, whether it was diagnosed densely)."""
    fn, x = ctx.op.function, inputs.args[i]
    u = jac.unit_probe(jac.real_numel(x), gen)
    try:
        got = jvp_along(fn, inputs.clone(), i, u)
    except Exception as exc:  # the Function's own forward mode: unsupported_row decides
        raise FunctionRaised(exc, i) from exc
    keep = got.covered
    fd = jac.directional_derivative(fn, inputs.clone(), i, u, keep=keep)
    tol = with_roundoff(tol, [got.outputs[k] for k in keep], norm=False)
    d = dg.compare(got.jvp, fd, tol, of="jvp entries", strict_finite=True)
    if d.ok:
        return None, d, False
    want = ref_jvp(ctx.op.reference, inputs, i, u, keep)
    if want is not None and dg.compare(got.jvp, want, tol, strict_finite=True).ok:
        return None, d, False  # the reference's jvp agrees: the finite differences straddle a kink
    dense = ctx.options.mode == "dense" or (
        ctx.options.mode == "auto" and 3 * jac.real_numel(x) <= DENSE_MAX_CALLS)
    f = Finding("input", i, "missing" if got.none else factor_hint(d), shape=tuple(x.shape),
                stats=d.stats)
    if dense:
        dense_worst(fn, inputs, i, keep, tol, f)
    else:
        f.worst = probe_worst(fn, inputs, i, u, got, fd, tol)
    return f, d, dense


def position(outputs: Sequence[Tensor], keep: Sequence[int], m: int
             ) -> tuple[int, tuple[int, ...]]:
    """(output number, index) of entry m of the flat vector over the outputs `keep`."""
    for k in keep:
        n = jac.real_numel(outputs[k])
        if m < n:
            return k, dg.unravel(m, jac.real_shape(outputs[k]))
        m -= n
    return -1, (m,)


def dense_worst(fn: Callable[..., Any], inputs: Inputs, i: int, keep: list[int],
                tol: Tolerance, f: Finding) -> None:
    """J of input i column by column (a unit tangent each) against the numerical Jacobian; the
    finding takes the dense comparison's statistics, hint and worst entries."""
    x = inputs.args[i]
    cols, outputs = [], []
    for c in range(jac.real_numel(x)):
        e = torch.zeros(jac.real_numel(x), dtype=torch.float64)
        e[c] = 1.0
        t = jvp_along(fn, inputs.clone(), i, e)
        cols.append(t.jvp)
        outputs = t.outputs
    a = torch.stack(cols, dim=1)
    n = jac.numerical_jacobian(fn, inputs.clone(), i, keep=keep)
    d = dg.compare(a, n, tol, of="jacobian entries", strict_finite=True)
    if d.ok:
        return  # the probe's failure stands (as in the jacobian check)
    f.stats = d.stats
    f.hint = f.hint if f.hint == "missing" else factor_hint(d)
    n_in = max(jac.real_numel(x), 1)
    f.worst = [Element(g, w, *position(outputs, keep, flat // n_in), input=i,
                       input_index=dg.unravel(flat % n_in, jac.real_shape(x)))
               for flat, g, w in d.worst]


def probe_worst(fn: Callable[..., Any], inputs: Inputs, i: int, u: Tensor, got: Tangents,
                fd: Tensor, tol: Tolerance) -> list[Element]:
    """The wrong entries of input i's J found without a dense Jacobian: bisection over masks of
    u finds the wrong input elements (the error projected on the probe's own error direction,
    linear in the mask), a unit tangent on each its worst output element."""
    x = inputs.args[i]
    w = got.jvp - fd
    w = torch.nan_to_num(w / w.norm().clamp(min=1e-300), nan=1.0, posinf=1.0, neginf=-1.0)
    keep = got.covered

    def along(t: Tensor) -> Tensor:
        return jvp_along(fn, inputs.clone(), i, t).jvp - jac.directional_derivative(
            fn, inputs.clone(), i, t, keep=keep)

    top = float(fd.abs().max()) if fd.numel() else 0.0
    cols = jac.bisect(lambda mask: float(w @ along(u * mask)), jac.real_numel(x),
                      tol.atol + tol.rtol * top / 4, limit=dg.TOP_K)
    found = []
    for c in cols:
        e = torch.zeros(jac.real_numel(x), dtype=torch.float64)
        e[c] = 1.0
        col = jvp_along(fn, inputs.clone(), i, e).jvp
        num = jac.directional_derivative(fn, inputs.clone(), i, e, keep=keep)
        m = int(torch.nan_to_num((col - num).abs(), nan=float("inf")).argmax())
        o, o_idx = position(got.outputs, keep, m)
        found.append(Element(float(col[m]), float(num[m]), output=o, output_index=o_idx,
                             input=i, input_index=dg.unravel(c, jac.real_shape(x))))
    return found

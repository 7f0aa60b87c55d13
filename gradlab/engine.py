"""The check engine: every case x dtype x device x variant of a target, as result rows.

Checks (names used in specs, options and rows):
- forward:       the Function's outputs against the reference (float64) on the same values.
- gradient:      input gradients against the reference's for the same random grad_output.
- contract:      what backward returns (count, None for non-tensors, shape/dtype/device), and
                 that nothing is modified in place that must not be.
- gradcheck:     analytical Jacobian against central finite differences (float64).
- gradgradcheck: the same one order up; or, for ops that claim no double backward, that it raises.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from gradlab import diagnose as dg
from gradlab import jacobian as jac
from gradlab.cases import Inputs, case_seed, dtype_name, materialize
from gradlab.model import GRADCHECK_TOLERANCE, Case, OpDef, Target, Tolerance
from gradlab.results import ERROR, FAIL, PASS, SKIP, CheckRow, Report
from gradlab.torchstate import intra_op_threads

CHECKS = ("forward", "gradient", "contract", "gradcheck", "gradgradcheck")

#: Above this many estimated seconds for a dense numerical Jacobian, switch to random probes.
DENSE_BUDGET_S = 0.5
#: Random signed probe pairs per input in fast mode (several, so one unlucky probe cannot hide
#: an error and cosine/ratio can be estimated from them).
N_PROBES = 4
#: Under --budget, numerical checks switch to fast mode once this fraction of it is spent.
BUDGET_FAST_FRACTION = 0.5
#: Worst elements listed per failing input.
TOP_K = 5


@dataclass(frozen=True)
class Options:
    """Run-wide settings (spec settings override dtypes/devices/checks per target)."""

    dtypes: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    seed: int = 0
    checks: frozenset[str] | None = None
    #: False switches all variants off; a set keeps only those variants.
    variants: bool | frozenset[str] = True
    #: "auto" picks dense or fast per cost; "dense" / "fast" force one.
    mode: str = "auto"
    #: stop starting new cases once this many seconds have passed.
    budget: float | None = None
    #: where failing cases save their inputs (None: not saved).
    repro_dir: str | None = None
    #: the command that re-runs a case, with {case} {dtype} {device} {seed} filled in.
    repro_command: str | None = None
    #: intra-op CPU threads during the run.  Check cases are tiny, so threads buy nothing, while
    #: OpenMP's spinning threads on a busy 2-core machine made a small float64 conv 700x slower
    #: (15 ms instead of 0.02 ms, measured).  None leaves torch's setting alone.
    threads: int | None = 1


@dataclass
class _Ctx:
    """What every row of one (target, case, dtype, device) shares."""

    target: Target
    case: Case
    dtype: str
    device: str
    options: Options
    rows: list[CheckRow] = field(default_factory=list)

    @property
    def op(self) -> OpDef:
        return self.target.op

    def row(self, variant: str, check: str, status: str, **kw: Any) -> CheckRow:
        r = CheckRow(self.op.name, self.case.name, kw.pop("dtype", self.dtype), self.device,
                     variant, check, status, **kw)
        self.rows.append(r)
        return r


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def _crash_hint(exc: BaseException) -> str:
    msg = str(exc)
    if "incorrect number of gradients" in msg:
        return "wrong_count"
    if "different than None" in msg and "not a Variable" in msg:
        return "non_tensor_grad"
    if "invalid gradient" in msg and "shape" in msg:
        return "wrong_shape"
    if "modified by an inplace operation" in msg:
        return "inplace_saved"
    return "crash"


def _crash_location(exc: BaseException) -> str:
    """file:line of the innermost frame outside torch and gradlab's engine (the user's code)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if "/torch/" not in fr.filename and not fr.filename.endswith(("gradlab/engine.py",
                                                                       "gradlab/jacobian.py")):
            return f"{fr.filename}:{fr.lineno} in {fr.name}"
    return ""


def random_grad_outputs(outs: Sequence[Tensor], gen: torch.Generator) -> list[Tensor]:
    """One random float64 grad_output per output (the same for the Function and the reference)."""
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outs]


# --------------------------------------------------------------------------------------------
# forward / gradient / contract against the reference


@dataclass
class _Run:
    """One forward + backward of a callable, with everything the comparisons need."""

    outs: list[Tensor]
    grads: list[Tensor | None]
    error: BaseException | None = None
    stage: str = ""
    contract: list[tuple[str, str]] = field(default_factory=list)
    #: the float64 grad_outputs backward was called with (shared with the reference).
    grad_outs64: list[Tensor] = field(default_factory=list)


def _as_grad_out(g: Tensor, like: Tensor, layout: str) -> Tensor:
    """grad_output with the values of `g`, like's dtype/device, laid out as `layout`."""
    g = g.to(dtype=like.dtype, device=like.device)
    if layout == "contiguous":
        # always a fresh copy: the Function and the reference must never share one tensor
        return g.clone(memory_format=torch.contiguous_format)
    if layout == "noncontiguous":
        # every other element of a buffer twice as wide in the last dim
        if g.dim() == 0:
            return g.clone()
        buf = torch.zeros((*g.shape[:-1], 2 * g.shape[-1]), dtype=g.dtype, device=g.device)
        out = buf[..., ::2]
        out.copy_(g)
        return out
    if layout == "transposed":
        if g.dim() < 2:
            return g.clone()
        return g.transpose(-2, -1).contiguous().transpose(-2, -1)
    if layout == "expanded":
        # what .sum() hands backward: one value broadcast with stride 0 everywhere
        return g.reshape(-1)[:1].clone().reshape([1] * g.dim()).expand(g.shape)
    raise ValueError(layout)


def _same(a: Tensor, b: Tensor) -> bool:
    """Bitwise-equal values, NaN equal to NaN (a NaN output is not an in-place write)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def run_once(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor] | None,
             gen: torch.Generator, *, go_layout: str = "contiguous",
             check_contract: bool = False) -> _Run:
    """Forward, then backward with the given float64 grad_outputs (random when None)."""
    before = {i: inputs.args[i].detach().clone() for i in inputs.tensor_index}
    try:
        with torch.enable_grad():
            raw = fn(*inputs.args, **inputs.kwargs)
        outs = jac.flat_outputs(raw)
    except Exception as exc:
        return _Run([], [], exc, "forward")
    run = _Run(outs, [])
    for i, old in before.items():
        cur = inputs.args[i]
        shares = any(o.untyped_storage().data_ptr() == cur.untyped_storage().data_ptr()
                     for o in outs)
        if not shares and not _same(old, cur.detach()):
            run.contract.append(("inplace_input", f"forward changed input {i} in place"))
    diff = inputs.diff_index
    if not diff:
        return run
    if grad_outs64 is None:
        grad_outs64 = random_grad_outputs(outs, gen)
    run.grad_outs64 = list(grad_outs64)
    go = [_as_grad_out(g, o, go_layout) for g, o in zip(grad_outs64, outs, strict=True)]
    pairs = [(o, g) for o, g in zip(outs, go, strict=True) if o.requires_grad]
    if not pairs:
        run.grads = [None] * len(diff)
        return run
    go_before = [(g._version, g.detach().clone()) for _, g in pairs]
    saved_before = {i: inputs.args[i].detach().clone() for i in inputs.tensor_index}
    outs_before = [o.detach().clone() for o in outs]
    if check_contract:
        run.contract += _raw_backward_contract(fn, inputs.clone(), grad_outs64, go_layout)
    try:
        grads = torch.autograd.grad([p[0] for p in pairs], [inputs.args[i] for i in diff],
                                    [p[1] for p in pairs], allow_unused=True, retain_graph=True)
        run.grads = list(grads)
    except Exception as exc:
        run.error, run.stage = exc, "backward"
        return run
    for (_, g), (ver, old) in zip(pairs, go_before, strict=True):
        if g._version != ver or not _same(g.detach(), old):
            run.contract.append(("inplace_grad_output", "backward wrote into grad_output"))
            break
    for i, old in saved_before.items():
        if not _same(old, inputs.args[i].detach()):
            run.contract.append(("inplace_saved", f"backward changed input {i} in place"))
    for k, old in enumerate(outs_before):
        # outputs are often saved for backward too (exp saves its result)
        if not _same(old, outs[k].detach()):
            run.contract.append(("inplace_saved", f"backward changed output {k} in place"))
    return run


def _raw_backward_contract(fn: Callable[..., Any], inputs: Inputs, grad_outs64: Sequence[Tensor],
                           go_layout: str) -> list[tuple[str, str]]:
    """Call the custom Function's backward directly and check what it returns.

    Autograd quietly repairs some mistakes before anyone sees them (it casts a gradient of the
    wrong dtype and sums an expandable wrong shape down), so the raw return value is checked.
    Runs on its own forward of copied inputs so that a backward that writes into its inputs
    or grad_output cannot disturb the run being compared.  Only possible when the output
    comes straight from a custom Function's apply.
    """
    with torch.enable_grad():
        outs = jac.flat_outputs(fn(*inputs.args, **inputs.kwargs))
    if len(outs) != 1 or len(grad_outs64) != 1:
        return []
    out = outs[0]
    node = out.grad_fn
    if node is None or not hasattr(node, "_forward_cls"):
        return []
    # Map the node's inputs back to our args: the Function may be called with a subset.
    if len(node.next_functions) != len(inputs.args) or inputs.kwargs:
        return []
    try:
        raw = node.apply(_as_grad_out(grad_outs64[0], out, go_layout))  # type: ignore[attr-defined]
    except Exception:
        return []  # the real backward reports the crash
    raw = raw if isinstance(raw, tuple) else (raw,)
    problems: list[tuple[str, str]] = []
    n_args = len(inputs.args)
    if len(raw) != n_args and not (len(raw) > n_args and all(r is None for r in raw[n_args:])):
        problems.append(("wrong_count", f"backward returned {len(raw)} values for "
                                        f"{n_args} forward inputs"))
    for i, (arg, grad) in enumerate(zip(inputs.args, raw, strict=False)):
        if not isinstance(arg, Tensor):
            if grad is not None:
                problems.append(("non_tensor_grad", f"gradient {i} returned for a "
                                                    f"{type(arg).__name__} argument"))
            continue
        if grad is None or not isinstance(grad, Tensor):
            continue
        if tuple(grad.shape) != tuple(arg.shape):
            problems.append(("wrong_shape", f"gradient {i} has shape {list(grad.shape)}, "
                                            f"input has {list(arg.shape)}"))
        elif grad.dtype != arg.dtype:
            problems.append(("wrong_dtype", f"gradient {i} is {dtype_name(grad.dtype)}, "
                                            f"input is {dtype_name(arg.dtype)}"))
        elif grad.device != arg.device:
            problems.append(("wrong_device", f"gradient {i} is on {grad.device}, "
                                             f"input on {arg.device}"))
    return problems


def _arg_label(inputs: Inputs, i: int) -> str:
    return f"input {i} {list(inputs.args[i].shape)}"


def compare_runs(ctx: _Ctx, variant: str, got: _Run, want: _Run, inputs: Inputs,
                 tol: Tolerance, *, checks: frozenset[str]) -> list[CheckRow]:
    """forward and gradient rows for `got` (the Function) against `want` (reference/base)."""
    rows: list[CheckRow] = []
    if got.error is not None and got.stage == "forward":
        rows.append(ctx.row(variant, "forward", ERROR, hint=_crash_hint(got.error),
                            message=_first_line(got.error), location=_crash_location(got.error)))
        return rows
    if "forward" in checks and want.error is None:
        rows.append(_compare_outputs(ctx, variant, got.outs, want.outs, tol))
    if "gradient" not in checks or not inputs.diff_index:
        return rows
    if got.error is not None:
        rows.append(ctx.row(variant, "gradient", ERROR, hint=_crash_hint(got.error),
                            message=_first_line(got.error), location=_crash_location(got.error)))
        return rows
    if want.error is not None:
        rows.append(ctx.row(variant, "gradient", SKIP,
                            message=f"reference failed: {_first_line(want.error)}"))
        return rows
    rows.append(_compare_grads(ctx, variant, got, want, inputs, tol))
    return rows


def _compare_outputs(ctx: _Ctx, variant: str, got: list[Tensor], want: list[Tensor],
                     tol: Tolerance) -> CheckRow:
    if len(got) != len(want):
        return ctx.row(variant, "forward", FAIL, hint="forward",
                       message=f"{len(got)} outputs, reference has {len(want)}")
    worst = (0.0, 0.0)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            return ctx.row(variant, "forward", FAIL, hint="forward",
                           message=f"output {k} has shape {list(g.shape)}, reference "
                                   f"{list(w.shape)}")
        d = dg.compare(g, w, tol, scaled=True)
        worst = (max(worst[0], d.max_abs), max(worst[1], d.max_rel))
        if not d.ok:
            loc = ", ".join(f"out{k}{dg.unravel(i, g.shape)}: got {a:.6g} want {b:.6g}"
                            for i, a, b in d.worst)
            return ctx.row(variant, "forward", FAIL, max_abs_err=d.max_abs,
                           max_rel_err=d.max_rel, hint="forward",
                           message=f"output {k}: " + dg.describe(d, "forward"), location=loc,
                           details={f"out{k}": dg.details(d)})
    return ctx.row(variant, "forward", PASS, max_abs_err=worst[0], max_rel_err=worst[1])


def _compare_grads(ctx: _Ctx, variant: str, got: _Run, want: _Run, inputs: Inputs,
                   tol: Tolerance) -> CheckRow:
    diff = inputs.diff_index
    worst = (0.0, 0.0)
    failures: list[tuple[str, str, str, dict[str, Any]]] = []  # (hint, message, location, details)
    for k, i in enumerate(diff):
        g, w = got.grads[k], want.grads[k]
        label = _arg_label(inputs, i)
        if g is None:
            if w is not None and bool(w.detach().abs().sum() > 0):
                failures.append(("missing", f"{label}: no gradient returned", "", {}))
            continue
        if w is None:
            w = torch.zeros_like(g)
        if g.shape != w.shape:
            failures.append(("wrong_shape", f"{label}: gradient shape {list(g.shape)}, "
                             f"expected {list(w.shape)}", "", {}))
            continue
        d = dg.compare(g, w, tol, scaled=True)
        worst = (max(worst[0], d.max_abs), max(worst[1], d.max_rel))
        if d.ok:
            continue
        hint = dg.factor_hint(d)
        extra = ""
        pair = dg.transposed_hint(g, w, tol)
        if pair and not hint:
            hint, extra = "transposed", f"dims {pair[0]} and {pair[1]} swapped"
        for k2, j in enumerate(diff):
            other = want.grads[k2]
            if (not hint and j != i and other is not None and other.shape == g.shape
                    and dg.compare(g, other, tol).ok):
                hint, extra = "swapped", f"it equals the expected gradient of input {j}"
        loc = ", ".join(f"grad[{i}]{dg.unravel(f, g.shape)}: got {a:.6g} want {b:.6g}"
                        for f, a, b in d.worst)
        failures.append((hint, f"{label}: " + dg.describe(d, hint, extra), loc,
                         {f"input{i}": dg.details(d)}))
    if not failures:
        return ctx.row(variant, "gradient", PASS, max_abs_err=worst[0], max_rel_err=worst[1])
    hint = next((f[0] for f in failures if f[0]), "")
    details: dict[str, Any] = {}
    for f in failures:
        details |= f[3]
    return ctx.row(variant, "gradient", FAIL, max_abs_err=worst[0], max_rel_err=worst[1],
                   hint=hint, message="; ".join(f[1] for f in failures),
                   location="; ".join(f[2] for f in failures if f[2]), details=details)


def chain_rule_ignored(fn: Callable[..., Any], inputs: Inputs, gen: torch.Generator) -> bool:
    """True when backward(2v) == backward(v) != 0: the gradient ignores grad_output."""
    try:
        bw = jac.build_backward(fn, inputs, inputs.diff_index)
        v = jac.unit_probe(bw.n_out, gen) + 0.5
        g1, g2 = bw.vjp(v), bw.vjp(2 * v)
    except Exception:
        return False
    for a, b in zip(g1, g2, strict=True):
        if a is None or b is None or not bool(a.abs().sum() > 0):
            continue
        if torch.allclose(a.double(), b.double(), rtol=1e-6, atol=1e-12):
            return True
    return False


# --------------------------------------------------------------------------------------------
# numerical checks


def _estimate_dense_seconds(fn: Callable[..., Any], inputs: Inputs, wrt: Sequence[int]) -> float:
    """Seconds a dense Jacobian would take: 2 forwards per input element + 1 backward per output.

    Each call is timed twice after a warm-up call and the faster kept: the first call of a
    Function often pays one-off costs that the thousands of calls of a dense Jacobian do not.
    """
    t_fwd = t_bwd = math.inf
    n_out = 0
    for _ in range(3):
        t0 = time.perf_counter()
        bw = jac.build_backward(fn, inputs, wrt)
        t1 = time.perf_counter()
        n_out = bw.n_out
        bw.vjp(torch.ones(n_out, dtype=torch.float64))
        t2 = time.perf_counter()
        t_fwd, t_bwd = min(t_fwd, t1 - t0), min(t_bwd, t2 - t1)
    n_in = int(sum(inputs.args[i].numel() for i in wrt))
    # x2: the dense loops add perturbation, copies and bookkeeping around every call.
    return 2.0 * (2 * n_in * t_fwd + n_out * t_bwd)


def jacobian_check(ctx: _Ctx, check: str, fn: Callable[..., Any], inputs: Inputs,
                   tol: Tolerance, gen: torch.Generator, *, variant: str = "base") -> CheckRow:
    """Analytical against numerical Jacobian of `fn` w.r.t. every differentiable input."""
    t0 = time.perf_counter()
    wrt = inputs.diff_index
    mode = ctx.options.mode
    if mode == "auto":
        mode = "dense" if _estimate_dense_seconds(fn, inputs, wrt) <= DENSE_BUDGET_S else "fast"
    if mode == "dense":
        fails = _dense_failures(fn, inputs, wrt, tol)
    else:
        fails = _probe_failures(fn, inputs, wrt, tol, gen)
    seconds = time.perf_counter() - t0
    max_abs = max((f["max_abs_err"] for f in fails["inputs"].values()), default=0.0)
    max_rel = max((f["max_rel_err"] for f in fails["inputs"].values()), default=0.0)
    bad = {i: f for i, f in fails["inputs"].items() if f["wrong"]}
    if not bad:
        return ctx.row(variant, check, PASS, max_abs_err=max_abs, max_rel_err=max_rel,
                       seconds=seconds, message=f"{mode} mode", dtype=dtype_name(
                           inputs.args[wrt[0]].dtype) if wrt else ctx.dtype)
    hint = next((f["hint"] for f in bad.values() if f["hint"]), "")
    if not hint and chain_rule_ignored(fn, inputs, gen):
        hint = "no_chain_rule"
    msgs = [f"{_arg_label(inputs, i)}: {f['message']}" for i, f in bad.items()]
    locs = [f["location"] for f in bad.values() if f["location"]]
    return ctx.row(variant, check, FAIL, max_abs_err=max_abs, max_rel_err=max_rel,
                   seconds=seconds, hint=hint, message=f"{mode} mode; " + "; ".join(msgs),
                   location="; ".join(locs), details={f"input{i}": f for i, f in bad.items()},
                   dtype=dtype_name(inputs.args[wrt[0]].dtype))


def _out_label(outs_shapes: Sequence[torch.Size], m: int) -> str:
    for k, shape in enumerate(outs_shapes):
        n = math.prod(shape)
        if m < n:
            return f"out{k}{dg.unravel(m, shape)}"
        m -= n
    return f"out?[{m}]"


def _with_roundoff(tol: Tolerance, outputs: Sequence[Tensor], *, norm: bool) -> Tolerance:
    """`tol` with the finite differences' own rounding noise added to atol.

    f(x + eps) - f(x - eps) loses about machine-epsilon * |f| to rounding, so the difference
    quotient carries ~ 2.2e-16 * |f| / eps of noise: 2e-5 at |f| = 1e5, above gradcheck's atol.
    Per element for dense Jacobians (the largest |f|), and the 2-norm of f for a probe (v is a
    unit vector).  The factor 4 leaves room for the roundings inside f itself.
    """
    if not outputs:
        return tol
    flat = torch.cat([o.detach().reshape(-1).double().cpu() for o in outputs])
    flat = flat[torch.isfinite(flat)]
    if not flat.numel():
        return tol
    size = float(flat.norm()) if norm else float(flat.abs().max())
    return Tolerance(tol.atol + 4 * torch.finfo(torch.float64).eps * size / jac.EPS, tol.rtol)


def _dense_failures(fn: Callable[..., Any], inputs: Inputs, wrt: Sequence[int],
                    tol: Tolerance) -> dict[str, Any]:
    bw = jac.build_backward(fn, inputs, wrt)
    shapes = [o.shape for o in bw.outputs]
    tol = _with_roundoff(tol, bw.outputs, norm=False)
    analytical, missing = jac.analytical_jacobians(bw)
    numeric_inputs = inputs.clone()  # perturbed in place; the graph's tensors stay untouched
    numerical = [jac.numerical_jacobian(fn, numeric_inputs, i) for i in wrt]
    result: dict[str, Any] = {"inputs": {}}
    for k, i in enumerate(wrt):
        a, n = analytical[k], numerical[k]
        d = dg.compare(a, n, tol, k=TOP_K)
        entry: dict[str, Any] = dg.details(d) | {"wrong": not d.ok, "hint": "", "message": "",
                                                 "location": ""}
        result["inputs"][i] = entry
        if d.ok:
            continue
        x = inputs.args[i]
        hint, extra = dg.factor_hint(d), ""
        if missing[k]:
            hint = "missing"
        if not hint:
            a3 = a.reshape(a.shape[0], *x.shape)
            n3 = n.reshape(n.shape[0], *x.shape)
            pair = dg.transposed_hint(a3, n3, tol)
            if pair and min(pair) > 0:
                hint, extra = "transposed", f"dims {pair[0] - 1} and {pair[1] - 1} swapped"
        if not hint:
            for k2, j in enumerate(wrt):
                if j != i and numerical[k2].shape == a.shape and dg.compare(a, numerical[k2],
                                                                             tol).ok:
                    hint, extra = "swapped", f"it is the gradient of input {j}"
        entry["hint"] = hint
        entry["message"] = dg.describe(d, hint, extra)
        n_in = max(x.numel(), 1)
        entry["location"] = ", ".join(
            f"d{_out_label(shapes, f // n_in)}/dx{i}{dg.unravel(f % n_in, x.shape)}: "
            f"got {g:.6g} want {w:.6g}" for f, g, w in d.worst)
    return result


def _probe_failures(fn: Callable[..., Any], inputs: Inputs, wrt: Sequence[int], tol: Tolerance,
                    gen: torch.Generator) -> dict[str, Any]:
    """Fast mode: v^T J u per input against finite differences along u, several probes.

    A failing input is then localised without a dense Jacobian: bisection over masks of u
    finds the wrong input elements, bisection over masks of v their output elements.
    """
    bw = jac.build_backward(fn, inputs, wrt)
    # Finite differences perturb inputs in place: do it on copies, or the version counters of
    # the tensors the graph saved change and every later backward refuses to run.
    inputs = inputs.clone()
    shapes = [o.shape for o in bw.outputs]
    tol = _with_roundoff(tol, bw.outputs, norm=True)
    result: dict[str, Any] = {"inputs": {}}
    probes = [jac.unit_probe(bw.n_out, gen) for _ in range(N_PROBES)]
    vjps = [bw.vjp(v) for v in probes]
    for k, i in enumerate(wrt):
        x = inputs.args[i]
        an, num = [], []
        us = [jac.unit_probe(x.numel(), gen) for _ in range(N_PROBES)]
        for p, v in enumerate(probes):
            g = vjps[p][k]
            gflat = torch.zeros(x.numel(), dtype=torch.float64) if g is None else \
                g.detach().reshape(-1).double().cpu()
            an.append(float(gflat @ us[p]))
            num.append(float(v @ jac.directional_derivative(fn, inputs, i,
                                                            us[p].reshape(x.shape))))
        d = dg.compare(torch.tensor(an), torch.tensor(num), tol)
        entry: dict[str, Any] = dg.details(d) | {"wrong": not d.ok, "hint": "", "message": "",
                                                 "location": ""}
        result["inputs"][i] = entry
        if d.ok:
            continue
        missing = all(vj[k] is None for vj in vjps)
        hint = "missing" if missing else dg.factor_hint(d)
        entry["hint"] = hint
        # Localise with the first failing probe.
        p = next(q for q in range(N_PROBES) if abs(an[q] - num[q]) > tol.atol +
                 tol.rtol * abs(num[q]))
        v, u = probes[p], us[p]
        g0 = vjps[p][k]
        gflat = torch.zeros(x.numel(), dtype=torch.float64) if g0 is None else \
            g0.detach().reshape(-1).double().cpu()

        def in_err(mask: Tensor, v: Tensor = v, u: Tensor = u, gflat: Tensor = gflat,
                   i: int = i, x: Tensor = x) -> float:
            dd = jac.directional_derivative(fn, inputs, i, (u * mask).reshape(x.shape))
            return float(gflat @ (u * mask) - v @ dd)

        thr = tol.atol + tol.rtol * abs(num[p]) / 4
        cols = jac.bisect(in_err, x.numel(), thr, limit=TOP_K)
        locs: list[str] = []
        element_errs: list[float] = []
        for c in cols[:TOP_K]:
            e = torch.zeros(x.numel(), dtype=torch.float64)
            e[c] = 1.0
            col = jac.directional_derivative(fn, inputs, i, e.reshape(x.shape))

            def out_err(mask: Tensor, col: Tensor = col, c: int = c, k: int = k,
                        v: Tensor = v) -> float:
                gm = bw.vjp(v * mask)[k]
                an_c = 0.0 if gm is None else float(gm.detach().reshape(-1)[c])
                return an_c - float((v * mask) @ col)

            rows_ = jac.bisect(out_err, bw.n_out, thr, limit=2)
            for m in rows_:
                e_m = torch.zeros(bw.n_out, dtype=torch.float64)
                e_m[m] = 1.0
                gm = bw.vjp(e_m)[k]
                got = 0.0 if gm is None else float(gm.detach().reshape(-1)[c])
                element_errs.append(abs(got - float(col[m])))
                locs.append(f"d{_out_label(shapes, m)}/dx{i}{dg.unravel(c, x.shape)}: "
                            f"got {got:.6g} want {float(col[m]):.6g}")
        n_bad = sum(abs(a - b) > tol.atol + tol.rtol * abs(b) for a, b in zip(an, num,
                                                                               strict=True))
        located = (f"{len(cols)}{'+' if len(cols) >= TOP_K else ''} wrong input elements "
                   f"located" if cols else "errors spread too thin to locate by bisection")
        words = dg.HINTS.get(hint, "") if hint not in ("constant_factor", "") else (
            f"off by a constant factor {d.ratio:.4g}" if hint else "")
        entry["message"] = "; ".join(part for part in (
            words, f"{n_bad} of {N_PROBES} probes disagree (v^T J u: got {an[p]:.6g} want "
                   f"{num[p]:.6g})", f"cosine over probes {d.cosine:.4f}, best-fit ratio "
                                     f"{d.ratio:.4g}", located) if part)
        entry["wrong_elements_found"] = len(cols)
        # Over the probes the "fraction wrong" is of probes, not elements: report a lower bound.
        entry["frac_wrong"] = len(cols) / max(x.numel(), 1)
        entry["frac_wrong_is_lower_bound"] = True
        if element_errs:
            entry["max_abs_err"] = max(element_errs)
        entry["location"] = ", ".join(locs[:TOP_K])
    return result


def second_order_function(fn: Callable[..., Any], n_args: int, wrt: Sequence[int],
                          kwargs: dict[str, Any]) -> Callable[..., Any]:
    """g(*args, *grad_outputs) = the first-order gradients, differentiable when fn's backward is."""

    def g(*all_args: Any) -> tuple[Tensor, ...]:
        args, gos = list(all_args[:n_args]), all_args[n_args:]
        with torch.enable_grad():
            outs = jac.flat_outputs(fn(*args, **kwargs))
            pairs = [(o, go) for o, go in zip(outs, gos, strict=True) if o.requires_grad]
            grads = torch.autograd.grad([p[0] for p in pairs], [args[i] for i in wrt],
                                        [p[1] for p in pairs], create_graph=True,
                                        allow_unused=True)
        return tuple(torch.zeros_like(args[i]) if gr is None else gr
                     for gr, i in zip(grads, wrt, strict=True))

    return g


def second_order_inputs(fn: Callable[..., Any], inputs: Inputs,
                        gen: torch.Generator) -> tuple[Callable[..., Any], Inputs]:
    """The first-order gradient function and its inputs (args + random grad_outputs)."""
    outs = jac.call(fn, inputs)
    gos = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype).to(o.device)
           .requires_grad_(o.requires_grad) for o in outs]
    g = second_order_function(fn, len(inputs.args), inputs.diff_index, inputs.kwargs)
    return g, Inputs([*inputs.args, *gos], {})


def double_backward_raises(fn: Callable[..., Any], inputs: Inputs) -> BaseException | None:
    """Run double backward once; return the exception it raised (None when it ran)."""
    try:
        g = second_order_function(fn, len(inputs.args), inputs.diff_index, inputs.kwargs)
        with torch.enable_grad():
            outs = jac.flat_outputs(fn(*inputs.args, **inputs.kwargs))
            gos = [torch.ones_like(o, requires_grad=True) for o in outs]
            grads = g(*inputs.args, *gos)
            total = sum(gr.sum() for gr in grads)
            assert isinstance(total, Tensor)
            # .backward() rather than autograd.grad: a once_differentiable error node has no
            # edges to the inputs, so autograd.grad(inputs=...) would never run (or raise) it.
            total.backward()
        for t in [*inputs.args, *gos]:
            if isinstance(t, Tensor):
                t.grad = None
    except Exception as exc:
        return exc
    return None


# --------------------------------------------------------------------------------------------
# the driver


def _enabled(target: Target, options: Options) -> frozenset[str]:
    checks = frozenset(CHECKS)
    for chosen in (target.checks, options.checks):
        if chosen is not None:
            checks &= chosen
    return checks


def case_rows(target: Target, case: Case, dtype: str, device: str, options: Options,
              seed: int) -> list[CheckRow]:
    """All rows of one case in one dtype on one device (base run plus variants)."""
    ctx = _Ctx(target, case, dtype, device, options)
    checks = _enabled(target, options)
    op = target.op
    tol = op.tolerance(dtype)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    try:
        inputs = materialize(case, dtype, device, seed)
    except Exception as exc:
        ctx.row("base", "forward", ERROR, message=f"could not make inputs: {_first_line(exc)}")
        return ctx.rows
    ref_fn = op.reference
    ref_inputs = inputs.clone(dtype=torch.float64)
    got = run_once(op.function, inputs, None, gen, check_contract="contract" in checks)
    grad_outs = got.grad_outs64 or None
    if ref_fn is not None:
        want = run_once(ref_fn, ref_inputs, grad_outs, gen)
        rows = compare_runs(ctx, "base", got, want, inputs, tol, checks=checks)
        if any(r.failed and r.check == "gradient" for r in rows) and not rows[-1].hint:
            if chain_rule_ignored(op.function, inputs.clone(), gen):
                rows[-1].hint = "no_chain_rule"
                rows[-1].message = dg.HINTS["no_chain_rule"] + "; " + rows[-1].message
    elif got.error is not None:
        ctx.row("base", "forward", ERROR, hint=_crash_hint(got.error),
                message=_first_line(got.error), location=_crash_location(got.error))
    if "contract" in checks and got.error is None:
        contract_row(ctx, "base", got.contract, passing=True)
    for r in ctx.rows:
        if not r.seconds:
            r.seconds = time.perf_counter() - t0
    if got.error is None and grad_outs is not None:
        from gradlab.variants import variant_rows  # variants builds on this module

        # The variants' expectation on the base values: the reference run, or without a
        # reference the Function's own contiguous run.
        variant_rows(ctx, inputs, grad_outs, want if ref_fn is not None else got, checks, gen)
    return ctx.rows


def contract_row(ctx: _Ctx, variant: str, problems: Sequence[tuple[str, str]], *,
                 passing: bool) -> None:
    """A contract row: FAIL listing `problems` (hint: the first), or PASS when asked for."""
    if problems:
        msg = "; ".join(f"{dg.HINTS.get(h, h)}: {m}" for h, m in problems)
        ctx.row(variant, "contract", FAIL, hint=problems[0][0], message=msg)
    elif passing:
        ctx.row(variant, "contract", PASS)


def numerical_rows(target: Target, case: Case, device: str, options: Options,
                   seed: int) -> list[CheckRow]:
    """gradcheck and gradgradcheck (or "second order raises") of one case, in float64."""
    checks = _enabled(target, options)
    gdtype = target.numerical_dtype
    ctx = _Ctx(target, case, gdtype, device, options)
    op = target.op
    gen = torch.Generator().manual_seed(seed + 7)
    try:
        inputs = materialize(case, gdtype, device, seed)
    except Exception as exc:
        ctx.row("base", "gradcheck", ERROR, message=f"could not make inputs: {_first_line(exc)}")
        return ctx.rows
    if not inputs.diff_index:
        return ctx.rows
    first_ok = True
    if "gradcheck" in checks:
        t0 = time.perf_counter()
        try:
            r = jacobian_check(ctx, "gradcheck", op.function, inputs, GRADCHECK_TOLERANCE, gen)
            first_ok = not r.failed
        except Exception as exc:
            first_ok = False
            ctx.row("base", "gradcheck", ERROR, hint=_crash_hint(exc), message=_first_line(exc),
                    location=_crash_location(exc), seconds=time.perf_counter() - t0)
    if "gradgradcheck" in checks:
        _second_order_row(ctx, op, inputs.clone(), gen, first_ok)
    return ctx.rows


def _second_order_row(ctx: _Ctx, op: OpDef, inputs: Inputs, gen: torch.Generator,
                      first_ok: bool) -> None:
    t0 = time.perf_counter()
    if op.second_order is False:
        exc = double_backward_raises(op.function, inputs)
        if exc is None:
            ctx.row("base", "gradgradcheck", FAIL, hint="second_order_claimed",
                    message=dg.HINTS["second_order_claimed"], seconds=time.perf_counter() - t0)
        else:
            ctx.row("base", "gradgradcheck", PASS, seconds=time.perf_counter() - t0,
                    message=f"raises as declared ({type(exc).__name__})")
        return
    if op.second_order is None:
        exc = double_backward_raises(op.function, inputs)
        if exc is not None:
            ctx.row("base", "gradgradcheck", SKIP, seconds=time.perf_counter() - t0,
                    message=f"double backward not supported: {_first_line(exc)}")
            return
    try:
        g, g_inputs = second_order_inputs(op.function, inputs, gen)
        row = jacobian_check(ctx, "gradgradcheck", g, g_inputs, GRADCHECK_TOLERANCE, gen)
        if row.failed and first_ok:
            row.hint = "second_order_only"
            row.message = dg.HINTS["second_order_only"] + "; " + row.message
    except Exception as exc:
        ctx.row("base", "gradgradcheck", ERROR, hint=_crash_hint(exc), message=_first_line(exc),
                location=_crash_location(exc), seconds=time.perf_counter() - t0)


def _devices(target: Target, options: Options) -> list[str]:
    return list(options.devices or target.devices or ("cpu",))


def _dtypes(target: Target, options: Options) -> list[str]:
    return list(options.dtypes or target.dtypes or target.op.dtypes)


def plan(targets: Sequence[Target], options: Options) -> Iterator[tuple[str, Target, Case, str,
                                                                        str]]:
    """The work items in order: ("numerical", t, case, dtype, device) and ("case", ...)."""
    for t in targets:
        for case in t.op.cases:
            for device in _devices(t, options):
                for dtype in _dtypes(t, options):
                    yield "case", t, case, dtype, device
                yield "numerical", t, case, t.numerical_dtype, device


def run(targets: Sequence[Target], options: Options | None = None,
        on_rows: Callable[[list[CheckRow]], None] | None = None) -> Report:
    """Run every check of every target; `on_rows` sees each batch of rows as it is made."""

    options = options or Options()
    with intra_op_threads(options.threads):
        return _run(targets, options, on_rows)


def _run(targets: Sequence[Target], options: Options,
         on_rows: Callable[[list[CheckRow]], None] | None) -> Report:
    from gradlab.envinfo import environment
    from gradlab.repro import save_failures

    report = Report(env=environment(seed=options.seed))
    start = time.perf_counter()
    item_options = options
    for kind, t, case, dtype, device in plan(targets, options):
        elapsed = time.perf_counter() - start
        if options.budget is not None:
            if elapsed > options.budget:
                report.truncated = True
                break
            if options.mode == "auto" and elapsed > BUDGET_FAST_FRACTION * options.budget:
                # Half the budget gone: cheap random probes instead of dense Jacobians.
                item_options = replace(options, mode="fast")
        seed = case_seed(options.seed, t.op.name, case.name)
        if device == "cuda" and not torch.cuda.is_available():
            rows = [CheckRow(t.op.name, case.name, dtype, device, "base", kind, SKIP,
                             message="CUDA is not available")]
        else:
            try:
                rows = (case_rows(t, case, dtype, device, item_options, seed) if kind == "case"
                        else numerical_rows(t, case, device, item_options, seed))
            except Exception as exc:
                # A bug in the Function (or in gradlab) fails this case only; the run goes on.
                rows = [CheckRow(t.op.name, case.name, dtype, device, "base", kind, ERROR,
                                 hint=_crash_hint(exc), message=_first_line(exc),
                                 location=_crash_location(exc))]
        if options.repro_dir:
            save_failures(rows, t, case, dtype, device, seed, options)
        report.extend(rows)
        if on_rows is not None:
            on_rows(rows)
    return report


__all__ = ["CHECKS", "Options", "run"]

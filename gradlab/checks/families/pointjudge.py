"""One explored point judged: the Function against the reference on the same float64 values,
and whether a failure there is certain (a fail) or likely (a warn).  `--explore`'s search
(gradlab.checks.families.explore) and the default `edges` check (edges.py) judge their points
here.

Judgeable only where the reference is: where it moves by more than domain.ILL_CONDITIONED
under a nudge (ill-conditioned, or on a kink such as relu at a planted 0), the point is not
judgeable and never fails; where it is not finite, only an infinity of the other sign is
judged (at_poles); where it raises or there is none, only an output that is empty, whose
gradient is zero whatever the math (empty_output).  A forward that refuses an input is
validation, never a failure.  A wrong value, a backward that raises at the case's own shapes,
or either on an empty tensor forward accepted, fails (CERTAIN); a finite failure only at values
beyond the region the case's own reach (or past a clamp they never reach: saturation.py), on
arguments broadcast where their dims are coupled, at a shape or int argument the case lacks
(a raise), or at rescaled values is likely, not certain (UNCERTAIN: a warn).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, materialize
from gradlab.checks.diagnosis import diagnose as dg
from gradlab.checks.families.domain import ill_conditioned, jumps, nudged_runs
from gradlab.checks.families.emptiness import empty_batch, filled, indices_into_nothing, is_empty
from gradlab.checks.families.flags import draws, flipped, unread, unread_setting
from gradlab.checks.families.inputspace import (
    SEED,
    Point,
    moved_constants,
    outside,
    resized,
    with_values,
)
from gradlab.checks.families.saturation import flat_beyond_case, values_moved
from gradlab.checks.numeric.execute import Run, run_once
from gradlab.model import Case, TensorArg


@dataclass
class Outcome:
    """What one point showed: "pass", "wrong", "raises" or "unjudgeable", with a note."""

    verdict: str
    note: str = ""
    #: a wrong output or gradient of another shape (or count) than the reference's
    shaped: bool = False

    @property
    def forward(self) -> bool:  # an output is wrong (_compared names outputs first)
        return self.verdict == "wrong" and self.note.startswith("output")


#: What autograd says where a backward returned a gradient of the wrong shape or count.
INVALID_RETURN = ("returned an invalid gradient", "returned an incorrect number of gradients")


def judge(fn: Callable[..., Any], ref: Callable[..., Any] | None, case: Case, point: Point,
          device: str, tol: Any, floor: Sequence[float] = ()) -> Outcome:
    """One point: the Function against the reference on the same float64 values.  floor: the
    magnitude of each of the reference's outputs and gradients on the case's own values, the
    least scale a change under a nudge is measured against (reference_scale)."""
    sized = resized(case, point)
    if sized is None:
        return Outcome("unjudgeable", "too large")
    try:
        inputs = with_values(materialize(sized, "float64", device, SEED), point)
    except Exception as exc:  # a size the spec's own constraints refuse
        return Outcome("unjudgeable", f"inputs: {type(exc).__name__}")
    gen = torch.Generator().manual_seed(SEED)
    want = run_once(ref, inputs.clone(), None, gen) if ref is not None else None
    if want is not None and want.error is not None and point.dims:
        # shapes that disagree where the case's agree (a dim moved alone): no valid call,
        # whatever an empty batch lets through (mambapy's pscan, A [0, 2] against X [0, 5])
        return Outcome("unjudgeable", "the reference refuses these shapes")
    if want is None or want.error is not None:  # only an empty output is judged here
        return empty_output(fn, inputs, gen, "no reference" if want is None
                            else "the reference raises", empty_batch(case, point))
    got = run_once(fn, inputs.clone(), want.grad_outs64 or None, gen)
    pole = not _finite(want)
    if pole:
        out = at_poles(ref, inputs, want, got, gen, floor)
    elif got.error is not None:
        # forward refusing an input is validation; backward raising where forward ran, a bug
        note = f"{type(got.error).__name__}: {got.error}".splitlines()[0]
        if (got.stage != "forward" and any(w in note for w in INVALID_RETURN)
                and not (point.dims or point.lead)):
            # autograd refused what backward returned where the arguments' shapes agree as the
            # case's do (no dim moved alone, no batch dim): wrong, empty input or not
            return Outcome("wrong", note)
        out = Outcome("refused" if got.stage == "forward" else "raises", note)
    else:
        out = _compared(got, want, tol)
        if out.verdict == "wrong" and _unjudgeable(ref, inputs, (got, want), gen, floor):
            return Outcome("unjudgeable", "the reference is ill-conditioned there")
        if (out.verdict == "wrong" and values_moved(point)
                and flat_beyond_case(ref, case, inputs, got, want, tol, device)):
            out.verdict = "domain"  # past a clamp the case never reaches (saturation.py)
    if out.verdict == "wrong" and flipped(case, point) and (draws(fn, inputs)
                                                          or draws(ref, inputs)):
        # a switch turning random draws on (training=True): no value of theirs compares
        return Outcome("unjudgeable", "random draws at this setting")
    out = _named(out, ref, case, point, inputs, got, device, pole)
    if indices_into_nothing(inputs) and out.verdict == "empty":
        return Outcome("unjudgeable", "indices into an empty tensor")
    if out.verdict in ("empty", "domain", "constant"):
        # empty: failing with its sizes back at the case's too, not the emptiness (an f [0, 2]
        # against an x [0, 1]); domain (constant too): failing with the values back at the
        # case's draw, the shape's (a stack of nothing at an empty input), named so
        again = filled(case, point) if out.verdict == "empty" else replace(
            point, values=tuple((i, "drawn") for i, _ in point.values))
        other = judge(fn, ref, case, again, device, tol, floor) if again != point else None
        if other is not None and other.verdict not in ("pass", "unjudgeable", "refused"):
            return Outcome("reshaped", out.note) if out.verdict == "empty" else other
    return out


def _named(out: Outcome, ref: Callable[..., Any], case: Case, point: Point, inputs: Inputs,
           got: Run, device: str, pole: bool = False) -> Outcome:
    """A failing point's verdict named for the condition it fails under: uncertain ones
    (UNCERTAIN) first, then an empty tensor (certain).  pole: judged by at_poles, where an
    infinity of the other sign than the limit's is no domain choice (arithmetic written for x
    away from a pole gives the limit's own sign there, or a NaN; the other sign is a value
    written for the pole, and wrong), so it fails wherever the case's values lie."""
    if out.verdict == "wrong" and unread(ref, case, point, device):
        # a float argument moved that the reference does not read (a solver's tolerance):
        # how it should change the Function's values, nothing here says
        return Outcome("unjudgeable", "the reference does not read the argument moved")
    if out.verdict == "wrong" and unread_setting(ref, case, point, device):
        out.verdict = "unread"  # an iteration count, a block size: the reference cannot say
    if out.verdict in FAILED and moved_constants(case, point):
        # values gradlab made up for a constant (soft targets, boxes, poses): whether the
        # Function takes any such values, no value of the case shows (sizes.constant)
        out.verdict = "constant"
    elif out.verdict in FAILED and not pole and (
            (outside(case, point, device) and (out.verdict != "wrong" or _finite(got)))
            or (_degenerate(point) and out.verdict == "wrong" and _finite(got)
                and not out.shaped)):
        # values beyond the range the case's own span (0 or one sign where its values are all
        # positive) are only likely in the domain (a digamma written for x > 0): a finite wrong
        # value there, or one of the right shape at an input all zero (a convention: an all-zero
        # matrix as padding, tad-mctc's eighb).  A NaN or inf where the reference is finite
        # stays certain (pytensor 1911: a cumprod's backward dividing by an x of 0 forward takes)
        out.verdict = "domain"
    elif (out.verdict in FAILED and not point.repaired and _disagreeing(case, point)
          and _coupled(ref, case, point, device)):
        # fed arguments whose shapes disagree where the case's agree (the reference
        # broadcasts them): whether a caller does is not certain either
        out.verdict = "broadcast"
    elif out.verdict in FAILED and (is_empty(inputs) or is_empty(got.outs)):
        # wrong where a tensor is empty, or a backward raising on an empty batch or at a count
        # of 0 (repeats, bins) that forward accepted and the reference differentiates: certain
        # (the bug catalogue's empty batches, zero rows, repeats of 0), named for its
        # condition; a raise at other sizes at 0 (no features, no state, parameters of no
        # element) is a shape the case lacks, as any other
        certain = out.verdict == "wrong" or empty_batch(case, point)
        out.verdict = "empty" if certain else "reshaped"
    elif out.verdict == "raises" and _reshaped(point):
        # a backward that raises at a shape or an int argument the case does not have:
        # forward accepting it is evidence, not proof, that the Function supports it
        out.verdict = "reshaped"
    elif (out.verdict == "wrong" and _finite(got)
          and any(kind in RESCALED for _, kind in point.values)):
        # every value finite, off only at values rescaled 1e-6x or 1e3x: an unstable formula,
        # or a method's absolute scale by design (a damping epsilon), as the magnitude and
        # small variants' scale_limited judges it; a non-finite result stays a failure
        out.verdict = "scale"
    return out


def _degenerate(point: Point) -> bool:
    """Some input is all zero at the point (the `zero` kind: a zero matrix, a zero vector)."""
    return any(kind == "zero" for _, kind in point.values)


#: The value kinds that rescale an input (inputspace.TINY, LARGE).
RESCALED = ("tiny", "large")


def _disagreeing(case: Case, point: Point) -> bool:
    """Two dims of different arguments that agree in the case are 1 against another size at
    the point (the reference broadcasts them).  Other sizes that the reference accepts show the dims
    were never coupled (a batch and out-features of one size)."""
    if not point.dims:
        return False
    sized = resized(case, point)
    if sized is None:
        return False
    dims = [(i, n, m) for i, (a, b) in enumerate(zip(case.args, sized.args, strict=True))
            if isinstance(a, (TensorArg, Tensor))
            for n, m in zip(tuple(a.shape), tuple(b.shape), strict=False)]
    # a 1 against any other size, 0 included (a 1 broadcast over an empty dim)
    return any(i != j and n == n2 and n > 1 and 1 in (m, m2) and m != m2
               for i, n, m in dims for j, n2, m2 in dims)


#: The verdicts of a failing point: certain, then uncertain (a warn: the module's docstring).
FAILED = ("wrong", "raises")
CERTAIN = (*FAILED, "empty")
UNCERTAIN = ("domain", "reshaped", "broadcast", "scale", "constant", "unread")


def empty_output(fn: Callable[..., Any], inputs: Inputs, gen: torch.Generator,
                 why: str, batch: bool = True) -> Outcome:
    """A point judged without a reference: where forward accepts it and every output it
    returns is empty, every input's gradient is zero whatever the Function computes (no
    element reaches a loss), so a gradient that is not is wrong, and a backward that raises
    is too where the point is an empty batch or a count of 0 (`batch`: an adaptive pool asked
    for 0 bins that divides by them; elsewhere a shape the case lacks, as judge names it).
    Elsewhere not judgeable."""
    got = run_once(fn, inputs.clone(), None, gen)
    if got.error is not None and got.stage == "forward":
        return Outcome("refused", f"{type(got.error).__name__}")
    outs = [t for t in got.outs if isinstance(t, Tensor)]
    if not outs or any(t.numel() for t in outs):
        return Outcome("unjudgeable", why)
    if indices_into_nothing(inputs):
        return Outcome("unjudgeable", "indices into an empty tensor")
    if got.error is not None:
        return Outcome("empty" if batch else "reshaped",
                       f"{type(got.error).__name__}: {got.error}".splitlines()[0])
    for k, g in enumerate(got.grads):
        if isinstance(g, Tensor) and g.numel() and not bool((g == 0).all()):
            return Outcome("empty", f"gradient {k} is not zero where every output is empty")
    return Outcome("pass")


def _reshaped(point: Point) -> bool:
    """The point changes a shape or an int argument of the case, not only its values: forward
    accepting a shape is evidence, not proof, that the Function supports it (xitorch's symeig
    asked for 3 eigenvalues of a 1x1 matrix raises).  A wrong value stays certain."""
    return (any(n != m for n, m in point.sizes)
            or bool(point.dims or point.ranked or point.lead or point.ints))


def _coupled(ref: Callable[..., Any], case: Case, point: Point, device: str) -> bool:
    """Whether the dims the point moves on its own must agree with others: the reference
    refuses them at a size no other dim has (an elementwise product's dims, broadcast at 1);
    it accepts them where they were never coupled (a batch against out-features)."""
    sizes = [m for _, m in point.sizes] + [m for *_, m in point.dims]
    fresh = max([*sizes, 2]) + 2
    # no 1 anywhere (a 1 broadcasts against anything), the moved dims at a size of their own
    apart = replace(point, sizes=tuple((n, max(m, 2)) for n, m in point.sizes),
                    dims=tuple((i, d, fresh) for i, d, _ in point.dims))
    sized = resized(case, apart)
    if sized is None:
        return True
    try:
        inputs = materialize(sized, "float64", device, SEED)
        with torch.no_grad():
            ref(*inputs.args, **inputs.kwargs)
    except Exception:
        return True
    return False


def _compared(got: Run, want: Run, tol: Any) -> Outcome:
    """The Function's run against the reference's: pass, or wrong with what differs (the
    outputs first, each note naming what it is about: `output 0`, `gradient 1`)."""
    for name, g, w in _pairs(got, want):
        if (g is None) != (w is None) and bool(((w if g is None else g) == 0).all()):
            continue  # None is a zero gradient: an empty or all-zero one is the same
        if g is None or w is None or g.shape != w.shape:
            return Outcome("wrong", f"{name}: shape {None if g is None else list(g.shape)}, "
                                    f"expected {None if w is None else list(w.shape)}", True)
        if g.numel() and not dg.compare(g.detach(), w.detach(), tol, scaled=True).ok:
            return _wrong(name, g.detach(), w.detach())
    return Outcome("pass")


#: An error below this relative to the reference's largest magnitude, in its direction (cosine
#: above 1 - APPROXIMATE), is an accuracy the base case's checks judge, not judgeable here.
#: Pins: the catalogue's pt102720 twin (3.5e-6 at values of 1e3: 1e-9 relative) and
#: test_explore.py's doubled gradient (relative error 1: a failure).
APPROXIMATE = 1e-4


def _wrong(name: str, g: Tensor, w: Tensor) -> Outcome:
    err = float((g - w).abs().nan_to_num(float("inf")).max())
    scale = float(w.abs().max())
    if scale > 0 and err <= APPROXIMATE * scale and bool(torch.isfinite(g).all()):
        cos = float(torch.nn.functional.cosine_similarity(g.reshape(1, -1), w.reshape(1, -1)))
        if cos >= 1 - APPROXIMATE:
            return Outcome("unjudgeable", f"{name} within {err / scale:.1g} of the reference")
    return Outcome("wrong", f"{name} wrong (max abs err {err:.3g})")


def _pairs(got: Run, want: Run) -> Iterator[tuple[str, Tensor | None, Tensor | None]]:
    if len(got.outs) != len(want.outs) or len(got.grads) != len(want.grads):
        yield "outputs", None, None
        return
    for k, (g, w) in enumerate(zip(got.outs, want.outs, strict=True)):
        yield f"output {k}", g, w
    for k, (g, w) in enumerate(zip(got.grads, want.grads, strict=True)):
        if g is not None or w is not None:
            yield f"gradient {k}", g, w


#: The finer nudge (relative, as NUDGE) that tells a point ill-conditioned only at NUDGE's
#: scale from one singular at every scale, where the Function is NaN or infinite and the
#: reference finite.  Pins: the bug catalogue's kornia367, a torch.where guard of |z| > 1e-8
#: whose untaken 1/z branch makes the gradient NaN at z = 0 (NUDGE crosses the guard, this does
#: not: the reference is flat there, so the NaN is wrong), and tests/test_domain.py's nearest
#: rotation at the zero matrix (its polar factor moves by O(1) under any nudge: a NaN there is
#: as good as the reference's finite convention, not judged).
FINE_NUDGE = 1e-12


def _unjudgeable(ref: Callable[..., Any], inputs: Inputs, runs: tuple[Run, Run],
                 gen: torch.Generator, floor: Sequence[float]) -> bool:
    """A wrong point where the reference is ill-conditioned (a NaN of the Function judged at a
    finer nudge: a kink nearby excuses no NaN), or jumps from both sides where the Function is
    not finite (domain.jumps: its finite value a kink's or a clamp's convention)."""
    got, want = runs
    blows = _blows_up(got, want)
    if ill_conditioned(ref, inputs, want, gen, floor) and not (
            blows and not ill_conditioned(ref, inputs, want, gen, floor, FINE_NUDGE)):
        return True
    return blows and jumps(ref, inputs, want, gen, got)


def _blows_up(got: Run, want: Run) -> bool:
    """An output or gradient of the Function is inf or NaN where the reference's, on the same
    values, is finite everywhere (judge's pole branch takes the rest)."""
    return any(g is not None and w is not None and g.shape == w.shape
               and g.is_floating_point() and not bool(torch.isfinite(g).all())
               for _, g, w in _pairs(got, want))


def _finite(run: Run) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in [*run.outs, *run.grads]
               if isinstance(t, Tensor) and t.is_floating_point())


#: A finite gradient of the reference beside a pole larger than this many times its values
#: on the case is a clamp's or an epsilon's (a BCE's t / max(p, 1e-12) at p = 0 and a tiny
#: t: 3e5 against a case's 2), no value to hold NaN against.
BESIDE_POLE = 1e3


def at_poles(ref: Callable[..., Any], inputs: Inputs, want: Run, got: Run,
             gen: torch.Generator, floor: Sequence[float] = ()) -> Outcome:
    """A point where the reference's gradient is infinite (rsqrt at 0): judged by the sign of
    those infinities, and by its gradients that are finite.  Wrong where the Function's is the
    opposite infinity and the reference, nudged either way, keeps that sign (or is undefined:
    rsqrt below 0), so the sign is the limit's own, not a side's convention (1/x at 0)."""
    flipped = [(k, torch.isinf(g) & torch.isinf(w) & (g.sign() != w.sign()), w)
               for k, (g, w) in enumerate(zip(got.grads, want.grads, strict=False))
               if isinstance(g, Tensor) and isinstance(w, Tensor) and g.shape == w.shape]
    flipped = [(k, m, w) for k, m, w in flipped if bool(m.any())]
    # the outputs finite in both: a forward NaN beside a pole is a convention (a BCE's log
    # clamped at 0 where the Function takes 0 log 0), not what this judges
    outs_finite = all(isinstance(o, Tensor) and isinstance(w, Tensor) and o.shape == w.shape
                      and bool(w.isfinite().all()) and bool(o.isfinite().all())
                      for o, w in zip(got.outs, want.outs, strict=False))
    for k, (g, w) in enumerate(zip(got.grads, want.grads, strict=False)):  # pow's d/db at a
        # base of 0, NaN beside its infinite d/da (pytorch 27134): a finite gradient is judged
        # where both runs' outputs are finite (a log of a negative sum is no value)
        if got.error is None and outs_finite and isinstance(g, Tensor) and isinstance(
                w, Tensor) and g.shape == w.shape and bool(w.isfinite().all()) \
                and not bool(g.isfinite().all()) \
                and float(w.abs().max()) <= BESIDE_POLE * max([1.0, *floor]) \
                and not jumps(ref, inputs, want, gen, got):  # no clamp's (BCE's log at 0)
            return Outcome("wrong", f"gradient {k}: NaN or inf where the reference's is finite")
    if got.error is not None or not flipped:
        return Outcome("unjudgeable", "the reference is not finite there")
    for again in nudged_runs(ref, inputs, want, gen):
        if again.error is not None:
            return Outcome("unjudgeable", "the reference raises beside a pole")
        for k, m, w in flipped:
            side = again.grads[k]
            if not isinstance(side, Tensor) or bool(((side[m] * w[m].sign()) < 0).any()):
                return Outcome("unjudgeable", "the reference's sign differs by side")
    k, m, w = flipped[0]
    return Outcome("wrong", f"gradient {k}: {int(m.sum())} infinities of the other sign than "
                            f"the reference's (which keeps its sign on either side)")

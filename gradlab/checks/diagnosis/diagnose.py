"""Error statistics between a tensor and the one it should be: the facts hint decisions take.

This module measures (Diff, the per-element ratio's range, a transpose that would match, the
tolerance that would pass); gradlab.checks.diagnosis.hints decides which hint code the facts name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from gradlab.checks.diagnosis.hints import MIN_RATIO_ELEMENTS, RATIO_FLOOR, RATIO_QUANTILES
from gradlab.model import Tolerance
from gradlab.results import Element, ErrorStats

#: Worst elements kept per failing tensor.
TOP_K = 5


@dataclass
class Diff:
    """How far `got` is from `want`, and where."""

    stats: ErrorStats
    #: flat indices of the worst wrong elements with (got, want), worst first.
    worst: list[tuple[int, float, float]] = field(default_factory=list)
    #: which elements are wrong (flat, bool); None when nothing was compared.
    mask: Tensor | None = None
    #: the largest finite |want| (measured only when something is wrong; 0.0 otherwise): the
    #: scale level_hint judges the error against.
    scale: float = 0.0
    #: the share of got's nonzero finite elements exactly representable in float32 (measured
    #: only when something is wrong and got is float64): near 1, got was computed in float32
    #: and cast (a float64 value is one by chance with odds of about 2**-29).
    float32_share: float = 0.0
    #: how far the per-element ratio may spread by rounding alone (the low-precision
    #: criterion's measure of the reference's own; 0: no allowance beyond RATIO_SPREAD).
    noise: float = 0.0

    @property
    def ok(self) -> bool:
        return self.stats.frac_wrong == 0.0


def compare(got: Tensor, want: Tensor, tol: Tolerance, k: int = TOP_K, *, scaled: bool = False,
            of: str = "elements", strict_finite: bool = False) -> Diff:
    """Compare two tensors of equal numel elementwise: |got-want| <= atol + rtol*|want|.

    scaled: atol is relative to the tensor's largest magnitude (when above 1).  Low-precision
    results carry rounding error proportional to the terms summed, not to each element, so an
    element that cancels to ~0 inside a tensor of large values would otherwise be a false alarm.
    A non-finite `got` where `want` is finite is always wrong; NaN where `want` is NaN too is
    the reference's own domain, unless strict_finite (two Jacobians of one function: a NaN in
    either means nothing was verified there).
    """
    if got.is_complex() or want.is_complex():
        return _complex_compare(got, want, tol, k, scaled=scaled, of=of,
                                strict_finite=strict_finite)
    limit = torch.finfo(got.dtype).max if got.is_floating_point() else math.inf
    g = got.detach().reshape(-1).to(torch.float64).cpu()
    w = want.detach().reshape(-1).to(torch.float64).cpu()
    if g.numel() == 0:
        return Diff(ErrorStats(0.0, 0.0, 0.0, 1.0, 1.0, of))
    gn, wn = g.numpy(force=True), w.numpy(force=True)  # force: an efficient zero tensor too
    if np.array_equal(gn, wn):
        # bitwise the same (a Function built from its reference's ops): one pass, no error
        # to measure; NaN never equals itself, so NaN goes the long way
        return Diff(ErrorStats(0.0, 0.0, 0.0, 1.0, 1.0, of))
    if scaled:
        tol = _scaled(tol, wn)
    passed = _within(gn, wn, tol, of)
    if passed is not None:
        return passed
    d = _failing(gn, wn, tol, k, limit, of, strict_finite,
                 measure_share=got.dtype == torch.float64)
    if got.dtype in COARSE_FLOATS and want.dtype == torch.float64:
        d.float32_share = 1.0  # a float32 result of a float64 run: float32 by its dtype
    return d


def _failing(g: np.ndarray, w: np.ndarray, tol: Tolerance, k: int, limit: float, of: str,
             strict_finite: bool, *, measure_share: bool) -> Diff:
    """compare() where some element is out of tolerance: the full statistics.

    numpy, as _within (the hint corpora and every failing check come here, mostly with small
    tensors, where torch's dispatch per call cost more than the arithmetic); torch only for
    topk, whose order among equal errors the worst elements keep, and the cosine and ratio."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(g - w)
        wabs = np.abs(w)
        fin_g, fin_w = np.isfinite(g), np.isfinite(w)
        # An expected value beyond the largest number of got's dtype overflows there too: an
        # inf of its sign is the right answer in that dtype (exp(100) in float32), not a failure.
        overflow = fin_w & (wabs > limit) & np.isinf(g) & (np.sign(g) == np.sign(w))
        err[overflow] = 0.0
        # NaN/inf in got is otherwise always wrong; nan_to_num keeps the statistics finite.
        bad = ~fin_g & fin_w & ~overflow
        if strict_finite:
            bad |= ~fin_g | ~fin_w
        err = np.where(bad, np.inf, np.nan_to_num(err, nan=0.0))
        wrong = bad | (err > tol.atol + tol.rtol * wabs)
        rel = np.nan_to_num(err / np.maximum(wabs, tol.atol), nan=0.0, posinf=np.inf)
    # topk, not a full sort: at 1e6 elements the sort cost more than the comparison
    order = torch.topk(torch.from_numpy(err), min(k, err.size)).indices.tolist()
    worst = [(i, float(g[i]), float(w[i])) for i in order if wrong[i]]
    # cosine and best-fit ratio of the finite part; the non-finite entries are counted apart
    keep = ~bad & fin_g & fin_w
    gk, wk = g[keep], w[keep]
    stats = ErrorStats(float(err.max()), float(rel.max()), float(wrong.mean()),
                       *_cosine_ratio(torch.from_numpy(gk), torch.from_numpy(wk)), of,
                       int(bad.sum()), *ratio_range(gk, wk))
    scale = float(np.abs(wk).max()) if wk.size else 0.0
    share = float32_share(torch.from_numpy(gk)) if measure_share else 0.0
    return Diff(stats, worst, torch.from_numpy(wrong), scale, share)


def _complex_compare(got: Tensor, want: Tensor, tol: Tolerance, k: int, *, scaled: bool,
                     of: str, strict_finite: bool) -> Diff:
    """compare() of complex tensors on their (real, imaginary) parts, each part within the
    tolerance; flat indices (worst, mask) are the complex elements'."""
    def parts(t: Tensor) -> Tensor:
        t = t.detach().to(torch.complex128).resolve_conj().resolve_neg()
        return torch.view_as_real(t).reshape(-1)

    d = compare(parts(got), parts(want), tol, 2 * k, scaled=scaled, of=of,
                strict_finite=strict_finite)
    worst: list[tuple[int, float, float]] = []
    seen: set[int] = set()
    for i, g, w in d.worst:
        if i // 2 not in seen and len(worst) < k:
            seen.add(i // 2)
            worst.append((i // 2, g, w))
    mask = None if d.mask is None else d.mask.reshape(-1, 2).any(dim=1)
    return Diff(d.stats, worst, mask, d.scale, d.float32_share)


#: The floating dtypes coarser than float64: a result in one of them, from float64 inputs, was
#: computed at that precision whatever its values.
COARSE_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


#: float32_made judges at most this many values, evenly strided: a share estimated on 65536
#: values is within ~0.4% (one standard error at the worst share, 0.5), far inside the margin
#: hints.FLOAT32_CAST_SHARE leaves (fdstep.FORMAT_SAMPLE's reasoning), at a fixed cost per row.
SHARE_SAMPLE = 65536


def float32_made(got: Tensor) -> float:
    """The share of `got` that is float32 by its making: 1.0 for a float32 (or coarser) tensor,
    else its float32_share (of at most SHARE_SAMPLE values; 0 for anything but float64)."""
    if got.dtype in COARSE_FLOATS:
        return 1.0
    if got.dtype != torch.float64:
        return 0.0
    x = got.detach().reshape(-1)
    if x.numel() > SHARE_SAMPLE:
        x = x[::-(-x.numel() // SHARE_SAMPLE)]
    return float32_share(x.cpu())


def float32_share(x: Tensor) -> float:
    """The share of x's nonzero elements exactly representable in float32 (0 when none)."""
    x = x[x != 0]  # zeros (and small integers) are representable whatever computed them
    return float((x.float().double() == x).double().mean()) if x.numel() else 0.0


def _scaled(tol: Tolerance, w: np.ndarray) -> Tolerance:
    """`tol` with atol relative to w's largest finite magnitude, when above 1 (see compare)."""
    # two reductions, no |w| temporary (a 1e6-element temporary costs more than the passes)
    top = max(float(w.max()), -float(w.min())) if w.size else 0.0
    if not math.isfinite(top):
        with np.errstate(invalid="ignore"):
            finite = w[np.isfinite(w)]  # a copy: only when there is something to drop
        top = float(np.abs(finite).max()) if finite.size else 1.0
    return Tolerance(tol.atol * max(1.0, top), tol.rtol)


#: Elements per pass of _within: temporaries of this size stay in cache and are reused by the
#: allocator; whole-tensor temporaries of 1e6 elements cost page faults on every call (4x).
CHUNK = 1 << 14


def _within(g: np.ndarray, w: np.ndarray, tol: Tolerance, of: str) -> Diff | None:
    """The common case, chunk by chunk: every element within tolerance (or exactly equal: an
    infinity where the reference has the same one), with its largest errors; None when any
    element is not (a NaN anywhere counts), for the full path.

    numpy rather than torch: each torch call costs ~10 us of dispatch, which made this, run
    for every output and gradient of every variant, a quarter of a check of small tensors.
    The cosine and best-fit ratio only explain a failure: a pass reports 1 for both.
    """
    max_abs = max_rel = 0.0
    # inf - inf and the like give NaN, which fails the test as it should: no warnings
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, g.size, CHUNK):
            gs, ws = g[start:start + CHUNK], w[start:start + CHUNK]
            wabs = np.abs(ws)
            err = np.subtract(gs, ws)
            np.abs(err, out=err)
            bound = wabs * tol.rtol
            bound += tol.atol
            ok = err <= bound
            if not ok.all():
                bad = ~ok
                if not np.array_equal(gs[bad], ws[bad]):
                    return None
                err[bad] = 0.0
            max_abs = max(max_abs, float(err.max()))
            np.maximum(wabs, tol.atol, out=wabs)
            np.divide(err, wabs, out=err)
            max_rel = max(max_rel, float(err.max()))
    return Diff(ErrorStats(max_abs, max_rel, 0.0, 1.0, 1.0, of))


def _cosine_ratio(g: Tensor | np.ndarray, w: Tensor | np.ndarray) -> tuple[float, float]:
    """Cosine of the angle between g and w, and the best-fit ratio g ~ ratio * w."""
    gn, wn, dot = float((g * g).sum()) ** 0.5, float((w * w).sum()) ** 0.5, float((g * w).sum())
    cosine = dot / (gn * wn) if gn > 0 and wn > 0 else (1.0 if gn == wn else 0.0)
    ratio = dot / (wn * wn) if wn > 0 else (1.0 if gn == 0 else float("inf"))
    return cosine, ratio


def ratio_range(g: Tensor | np.ndarray, w: Tensor | np.ndarray
                ) -> tuple[float | None, float | None]:
    """The RATIO_QUANTILES of got/want over the elements where |want| is significant (see
    RATIO_FLOOR), or (None, None) with fewer than MIN_RATIO_ELEMENTS of them (thresholds of
    the factor hint: gradlab.checks.diagnosis.hints).

    numpy (float64): called for every low-precision tensor compared, where torch's per-call
    dispatch (quantile's sort above all) cost more than the arithmetic; numpy's default
    quantile interpolation is torch's ("linear")."""
    gn = g.detach().double().cpu().resolve_neg().numpy() if isinstance(g, Tensor) else g
    wn = w.detach().double().cpu().resolve_neg().numpy() if isinstance(w, Tensor) else w
    if not wn.size:
        return None, None
    wabs = np.abs(wn)
    big = wabs > RATIO_FLOOR * float(wabs.max())
    if int(np.count_nonzero(big)) < MIN_RATIO_ELEMENTS:
        return None, None
    lo, hi = quantiles(gn[big] / wn[big], RATIO_QUANTILES)
    return lo, hi


def quantiles(r: np.ndarray, qs: Sequence[float]) -> list[float]:
    """The `qs` quantiles of r, linearly interpolated as torch.quantile and np.quantile do
    (NaN when r holds one), from one partial sort: np.quantile's own overhead was most of
    ratio_range's time on small tensors."""
    n = r.size
    if np.isnan(r).any():
        return [math.nan for _ in qs]
    pos = [q * (n - 1) for q in qs]
    at = sorted({min(int(p) + d, n - 1) for p in pos for d in (0, 1)})
    part = np.partition(r, at)
    out = []
    for p in pos:
        i = int(p)
        a, b, f = float(part[i]), float(part[min(i + 1, n - 1)]), p - i
        # numpy's lerp: exact at both ends, monotonic in f
        out.append(a + (b - a) * f if f < 0.5 else b - (b - a) * (1 - f))
    return out


def unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    """A flat (row-major) index as a tuple of indices into `shape`."""
    idx = []
    for n in reversed(shape):
        flat, r = divmod(flat, n)
        idx.append(r)
    return tuple(reversed(idx))


def output_elements(d: Diff, k: int, shape: Sequence[int]) -> list[Element]:
    """The worst elements of output k."""
    return [Element(a, b, output=k, output_index=unravel(f, shape)) for f, a, b in d.worst]


def input_elements(d: Diff, i: int, shape: Sequence[int]) -> list[Element]:
    """The worst elements of input i's gradient."""
    return [Element(a, b, input=i, input_index=unravel(f, shape)) for f, a, b in d.worst]


def transposed_dims(got: Tensor, want: Tensor, tol: Tolerance) -> tuple[int, int] | None:
    """The pair of dims whose swap turns `got` into `want` (same-size dims only), or None."""
    if got.shape != want.shape:
        return None
    for a in range(want.dim()):
        for b in range(a + 1, want.dim()):
            if want.shape[a] == want.shape[b] and want.shape[a] > 1:
                if compare(got.transpose(a, b), want, tol).ok:
                    return (a, b)
    return None


def passing_tolerance(got: Tensor, want: Tensor, tol: Tolerance) -> Tolerance | None:
    """The tolerance under which `compare(got, want, it, scaled=True)` passes: tol's atol and
    rtol both scaled up by one common factor (twice the least that passes: a margin for other
    values and seeds), each rounded up to one significant digit; `tol` itself when it already
    passes, never tighter.  None when no tolerance helps: a non-finite value where the expected
    one is finite (or the other way round), or a zero tolerance against a nonzero error.
    """
    if compare(got, want, tol, scaled=True).ok:
        return tol
    g = got.detach().reshape(-1).to(torch.float64).cpu()
    w = want.detach().reshape(-1).to(torch.float64).cpu()
    err = (g - w).abs()
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))  # compare's own passes (NaN and inf)
    if got.is_floating_point():  # and its overflow to an inf of the right sign
        same |= ((w.abs() > torch.finfo(got.dtype).max) & torch.isinf(g)
                 & (torch.sign(g) == torch.sign(w)))
    err = torch.where(same, torch.zeros_like(err), err)
    if not bool(torch.isfinite(err).all()):
        return None
    scaled = _scaled(tol, w.numpy())
    bound = scaled.atol + scaled.rtol * w.abs()
    need = torch.where(err > 0, err / bound, torch.zeros_like(err))  # err/0 -> inf -> None
    factor = float(need.max())
    if not math.isfinite(factor):
        return None
    factor = max(factor, 1.0) * PASSING_MARGIN
    out = Tolerance(round_up(tol.atol * factor), round_up(tol.rtol * factor))
    # rounding only grows both; the check guards the last ulp of float arithmetic
    return out if compare(got, want, out, scaled=True).ok else None


#: How far beyond the least passing tolerance passing_tolerance goes: the error of an
#: approximate method varies with the values and the seed, a tolerance at the edge would not.
PASSING_MARGIN = 2.0


def round_up(x: float) -> float:
    """x rounded up to one significant digit (3.2e-7 -> 4e-7); 0 stays 0."""
    if x <= 0 or not math.isfinite(x):
        return x
    p = 10.0 ** math.floor(math.log10(x))
    out = math.ceil(x / p * (1 - 1e-12)) * p
    out = float(f"{out:.1g}")  # 3 * 1e-7 is 3.0000000000000004e-07: keep one digit
    return out if out >= x else float(f"{out + p:.1g}")

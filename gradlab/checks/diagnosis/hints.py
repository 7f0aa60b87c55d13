"""Hint decisions: which likely cause a measured failure names (words.HINTS words each code).

The modules that measure (diagnose, patterns, execute, fdcauses, variants, verdicts,
second_order, autocast) hand their facts here; a fact that costs a run comes as a callable,
asked only when the decision needs it.  Hints are decisions under uncertainty, silent when
unsure: every threshold says why that value and what pins it, a test in tests/ or a hint-corpus
entry (op-mutation, tests/data/corpus/, measured by benchmarks/hint_corpus.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from gradlab.model import Tolerance
from gradlab.results import CheckRow, ErrorStats, Pattern

if TYPE_CHECKING:  # torch-free at run time: plain decisions on facts measured elsewhere
    from torch import Tensor

# --- the error's shape: a constant factor, a sign, zero (diagnose.ratio_range measures) -------

#: The per-element ratio got/want is taken only where |want| is above this fraction of the
#: largest |want|: near-zero expected values give ratios of pure noise (finite-difference
#: rounding, a tolerance-sized error on a 1e-9 entry) that would hide a real constant factor.
#: Pins: test_the_ratio_spread_decides (1e-9 entries: no floor loses the factor 2).
RATIO_FLOOR = 0.1
#: Fewer significant elements than this measure no spread: one number is "a constant factor"
#: of any other, so the factor and sign hints stay silent (silent when unsure).
#: Pins: test_the_ratio_spread_decides (one element against one: silent).
MIN_RATIO_ELEMENTS = 2
#: The quantiles the spread is read between: a few outliers (an element at a kink, rounding
#: in a low-precision gradient) do not hide a factor that holds everywhere else.
#: Pins: test_ratio_quantiles_drop_a_few_outliers (the outer edge; no case pins the inner).
RATIO_QUANTILES = (0.05, 0.95)
#: A factor is constant when (ratio_hi - ratio_lo) / |ratio| is at most this: a float32
#: gradient or a finite difference agrees with a right one to ~1e-6 relative, while a GELU
#: derivative with a factor 3 forgotten in one term spreads its ratio over 0.71..1.36, and
#: sin(x) * x with its cos term doubled still spreads 1.99..2.01 at magnitudes of 1000 (the
#: magnitude variant), where that term dominates.  (bfloat16 rounding, ~1e-2, stays silent.)
#: Pins: test_ratio_spread_edges (both sides), test_the_ratio_spread_decides (5% varying).
RATIO_SPREAD = 1e-3
#: A factor must also stand this many spreads away from 1: a GELU derivative whose wrong term
#: vanishes at large magnitudes has ratios 0.99..1.0 and a best fit of 0.995, tight yet
#: straddling 1 (most elements right), which is no constant factor.
#: Pins: test_factor_clearance_edges (both sides).
FACTOR_CLEARANCE = 2.0
#: A best-fit ratio below this is a zero gradient (a float64 zero times anything).  Pins:
#: corpus "exp-t0", "mul-swap" (a larger one calls them zero), test_factor_cosine_and_zero_edges.
ZERO_RATIO = 1e-12
#: ... as is one orthogonal to the right one (cosine exactly 0) and this small against it.
#: Pins: test_factor_cosine_and_zero_edges.
ZERO_ORTHOGONAL_RATIO = 1e-6
#: |cosine| above this is one direction: a constant factor keeps (or flips) every element's
#: sign; one term of a sum wrong by a factor already spreads the ratio (RATIO_SPREAD decides).
#: Pins: test_factor_cosine_and_zero_edges (both sides).
FACTOR_COSINE = 0.999
#: A ratio within this of 1 is no factor, within this of -1 a sign flip (not "off by -1.0").
#: Pins: test_a_negated_backward_keeps_its_sign (a smaller one), corpus "tanh-x0.5" (a larger).
FACTOR_TO_ONE = 1e-3


def constant_ratio(s: ErrorStats, noise: float = 0.0) -> bool:
    """True when got/want is one constant (within RATIO_SPREAD, plus `noise`: the spread the
    dtype's rounding alone gives, as the reference's own run in that dtype measured it) over
    the significant elements, and that constant is clear of 1 (FACTOR_CLEARANCE): every such
    element is off by it.  Pins (noise): test_low_precision.py's bfloat16 softmax 1.5x."""
    if s.ratio_lo is None or s.ratio_hi is None or not math.isfinite(s.ratio) or s.ratio == 0:
        return False
    spread = s.ratio_hi - s.ratio_lo
    return (spread <= RATIO_SPREAD * abs(s.ratio) + noise * abs(s.ratio)
            and FACTOR_CLEARANCE * spread <= abs(s.ratio - 1))


class Compared(Protocol):
    """What a comparison measured (gradlab.checks.diagnosis.diagnose.Diff)."""

    stats: ErrorStats
    scale: float
    float32_share: float

    @property
    def ok(self) -> bool: ...


def factor_hint(d: Compared) -> str:
    """'constant_factor' / 'sign' / 'zero' / 'non_finite' when the error has that shape, else ''
    (a factor or a sign only where the per-element ratio is one constant: constant_ratio)."""
    if d.ok:
        return ""
    s = d.stats
    if s.nonfinite:
        return "non_finite"
    if abs(s.ratio) < ZERO_RATIO or (s.cosine == 0.0 and s.max_abs > 0
                                     and abs(s.ratio) < ZERO_ORTHOGONAL_RATIO):
        return "zero"
    if not constant_ratio(s, getattr(d, "noise", 0.0)):
        # a cosine near 1 alone is no constant factor: one term of a sum wrong by a factor
        # moves the ratio element by element while the cosine stays at 0.9996
        return ""
    if s.cosine > FACTOR_COSINE and abs(s.ratio - 1) > FACTOR_TO_ONE:
        return "constant_factor"
    if s.cosine < -FACTOR_COSINE:
        return "sign" if abs(s.ratio + 1) < FACTOR_TO_ONE else "constant_factor"
    return ""


# --- the error's level: precision_loss, approximate -----------------------------------------

#: A float64 result off by more than this, relative to its scale, is not float64 rounding
#: (float64 sums of thousands of terms stay below 1e-12); float32 rounding starts at eps32/2,
#: so 1e-9 leaves room for a value that passed through float32 in only a small term.
#: Pins: corpus "exp-f32", test_level_hint (a larger one); no case pins a smaller.
PRECISION_LOSS_LOW = 1e-9
#: (No level alone says float32: an ODE adjoint at its default tolerance is off by 3e-8 to
#: 1e-6 of its scale, as float32 rounding inside a float64 Function is.  precision_loss takes the
#: evidence of a result cast from float32, FLOAT32_CAST_SHARE; a float32 intermediate whose
#: result went on in float64 is `approximate`, whose words name both causes.)
#: A float64 result at least this share of whose nonzero elements are exact float32 values was
#: computed in float32 and cast: its error is float32's rounding, however deep (a float32 conv
#: summing a thousand terms is off by ~1e-5 of its scale), up to APPROXIMATE_REL.
#: Pins: corpus "exp-approx" (a smaller one calls it precision_loss), "exp-f32" (a larger
#: one calls it approximate), test_level_hint (both).
FLOAT32_CAST_SHARE = 0.9
#: An error at most this relative to the tensor's scale, with the direction kept (cosine above
#: APPROXIMATE_COSINE), is small but real: an approximate method (an adjoint solver at its
#: tolerance, a truncated series), or a bug too small to have a shape of its own.
#: Pins: corpus "exp-approx", test_level_hint (a smaller APPROXIMATE_REL, a larger cosine: both
#: silent); no case pins the other sides (a formula bug fails both at once).
APPROXIMATE_REL = 1e-2
APPROXIMATE_COSINE = 0.9999
#: The level hints (level_hint's codes).
LEVEL_HINTS = ("approximate", "precision_loss")


def level_hint(d: Compared, dtype: str) -> str:
    """'precision_loss' when a float64 result is only about float32-accurate, 'approximate'
    when the error is small everywhere but real, else ''.  Judged relative to the tensor's
    scale (its largest |want|): an element that cancels to ~0 carries its terms' rounding."""
    s = d.stats
    if d.ok or s.nonfinite or d.scale <= 0 or not math.isfinite(s.max_abs):
        return ""
    rel = s.max_abs / d.scale
    small = rel <= APPROXIMATE_REL and s.cosine > APPROXIMATE_COSINE
    if (dtype == "float64" and rel >= PRECISION_LOSS_LOW and small
            and d.float32_share >= FLOAT32_CAST_SHARE):
        return "precision_loss"
    return "approximate" if small else ""


def computed_in_float32(share: float, rel: float, dtype: str) -> bool:
    """Whether a result of a `dtype` run within its table all the same was computed in float32:
    a float64 run's result float32 by its making (FLOAT32_CAST_SHARE of its values, or its
    dtype) and off the reference by float32's rounding (PRECISION_LOSS_LOW up to
    APPROXIMATE_REL of its scale).  A float64 softmax computed in float32 inside is ~6e-8 off,
    under assert_close's rtol 1e-7: without this, a silent pass.  Pins:
    tests/test_precision.py (the float32-inside softmax warns, the float64 one does not)."""
    return (dtype == "float64" and share >= FLOAT32_CAST_SHARE
            and PRECISION_LOSS_LOW <= rel <= APPROXIMATE_REL)


# --- where the wrong elements lie (patterns.find_pattern measures) ----------------------------

#: Tile sizes a partial last tile is looked for with, largest first (Triton's and CUDA's usual
#: block sizes).  Pins: corpus "exp-tiles@3x20" (8 and 16), and
#: test_a_tail_starts_at_its_first_wrong_index_on_a_tile_boundary; none pins the larger ones.
TILES = (256, 128, 64, 32, 16, 8)
#: A border band is named only when it is at most this fraction of the smaller side (a wider
#: "band" is most of the tensor).  Pins: test_a_confined_error_names_its_pattern,
#: test_pattern_ranges_unit (a smaller one); no case pins a larger.
BORDER_FRACTION = 0.25
#: Below this many elements a "pattern" is as likely to be chance.  Pins: corpus
#: "exp-tiles@3x20", "conv2d-border0" (a larger one); no case pins a smaller.
MIN_ELEMENTS = 16
#: The wrong elements must fill at least this share of the region a pattern names: a couple
#: of scattered wrong elements always lie within some range of some dim (2 wrong of 48 in
#: "indices 3..5 of dim 1" is chance), while a real tile, band or group is mostly wrong.
#: Pins: test_pattern_ranges_unit (a larger one); no case pins a smaller (MAX_CHANCE holds).
MIN_DENSITY = 0.25
#: ... and be confined to it beyond chance: k wrong elements scattered at random all fall
#: in a region holding a share f of the tensor with probability f**k; a pattern is named
#: only below this (6 wrong of 16 in 12: 0.18, chance; 24 wrong of 120 in 24: 1e-17).
#: Pins: corpus "exp-absg" (no limit: a chance index_range), "exp-tiles@3x20", test_pattern_edges.
MAX_CHANCE = 1e-3
#: The hint a pattern of wrong elements gives a finding that has no better one.
PATTERN_HINTS = {"border": "border_band", "edges": "border_band", "tail": "tail_tile",
                 "slice": "index_range", "zero": "zero_region", "negative": "sign_region",
                 "positive": "sign_region", "ties": "near_ties", "range": "value_range",
                 "band": "magnitude_band"}


def pattern_holds(wrong: int, region: int, numel: int) -> bool:
    """`wrong` elements in a region of `region` of `numel` fill it (MIN_DENSITY), not by chance."""
    return not (wrong < MIN_DENSITY * region
                or wrong * math.log(region / numel) > math.log(MAX_CHANCE))


# --- a wrong gradient: the order of trust ----------------------------------------------------

#: Hints a better diagnosis replaces: none, or a zero gradient (a backward that ignores
#: grad_output gives J^T 1, which is zero, up to rounding, for outputs that sum to a
#: constant: softmax rows, a normalised layer).
#: Pins: corpus "softmax-nochain", "layernorm-nochain".
UNEXPLAINED = ("", "zero")


def gradient_hint(factor: str, level: str, pattern: Pattern | None,
                  transposed: Callable[[], bool], swapped: Callable[[], bool]) -> str:
    """A wrong gradient's hint, its facts in order of trust: the error's shape (factor_hint);
    else its level (small everywhere: where it crosses the tolerance, a transpose or swap
    within it, is chance); a pattern (it beats `zero`: a band never written is zero there);
    a transpose; another input's gradient (the last two measured only when asked)."""
    if not factor and level:
        return level
    if pattern is not None and factor in UNEXPLAINED:
        return PATTERN_HINTS[pattern.kind]
    if factor:
        return factor
    if transposed():
        return "transposed"
    return "swapped" if swapped() else ""


def explain(row: CheckRow, hint: str) -> None:
    """Give `row` and its findings without a better hint (UNEXPLAINED) the diagnosis `hint`."""
    row.hint = hint
    for f in row.findings:
        if f.hint in UNEXPLAINED:
            f.hint = hint


# --- variants: the layout's, or the values' (variants.py, verdicts.py measure) ----------------

#: The hint a failing variant gets when the base run of the same case passed.
ONLY_HINT = {"noncontiguous": "noncontiguous_only", "transposed": "transposed_only",
             "channels_last": "channels_last_only", "expanded": "expanded_only",
             "grad_output": "grad_output_layout", "requires_grad": "requires_grad_subset",
             "undefined_grad": "undefined_grad", "size1": "size1_only",
             "magnitude": "magnitude_only", "ragged": "ragged_only", "ties": "ties_only",
             "repeated_index": "repeated_index_only", "sentinel": "sentinel_only",
             "small": "small_only",
             "special": "special_only"}
#: A value variant's failure is value-level when the tolerance that would pass (with
#: passing_tolerance's margin of 2) is at most this many times the one used: an overflow gives
#: inf or NaN, a dropped tile or a wrong remainder an error the size of the value itself
#: (1e9 times float64's rtol, 1e3 times float32's), while a discretisation or series error that
#: varies with the values crosses its tolerance by a small factor.
#: Pins: test_a_magnitude_failure_near_the_tolerance_is_value_level (a smaller one), corpus
#: "bugclass-ragged_floor", "tanh-tiles@3x16" (a larger one: value_dependent, not ragged_only).
VALUE_LEVEL_FACTOR = 100.0
#: Finding hints a value-level failure keeps: they say more than a level would (no case pins it).
KEPT_HINTS = ("non_finite", "missing", "wrong_shape")


def value_level(hint: str, measured: Callable[[], str]) -> str:
    """A value-level finding's level: its level hint, none past KEPT_HINTS, else `measured`."""
    if hint in LEVEL_HINTS:
        return hint
    return "" if hint in KEPT_HINTS else measured()


def value_level_hint(hint: str, level: str) -> str:
    """A value-level finding's hint: its level; else `value_dependent` in place of none or a
    pattern (which elements cross the tolerance within an error that varies with the values
    is chance); a hint of the error's shape stays (a constant factor: repeated values that tie).
    Pins: test_tied_values_are_the_values_bug_not_the_expanded_layouts."""
    if level:
        return level
    return "value_dependent" if not hint or hint in PATTERN_HINTS.values() else hint


def advise_tolerance(level: str, factor: float) -> bool:
    """Whether a value-level finding gets the tolerance that would pass (`factor` times the
    one used): at its level, or near the bound (a factor 3 on tied values is a bug)."""
    return bool(level) or factor <= VALUE_LEVEL_FACTOR


# --- stochastic Functions (execute.py measures the draws) ------------------------------------

#: Hints a wrong random draw in backward cannot give by chance: they name what the gradient
#: is (None, a constant multiple of the right one, the right one ignoring grad_output), which a
#: mask other than forward's does not imitate.  Any other hint on a stochastic Function's
#: failing gradient (a range, a tile, a layout) may be the chance shape of two masks' mismatch.
#: Pins: test_the_rng_replay_decision.
RNG_INDEPENDENT_HINTS = frozenset({"missing", "constant_factor", "sign", "no_chain_rule",
                                   "wrong_shape", "wrong_dtype", "wrong_device"})
#: Contract findings a backward drawing numbers of its own makes by itself: run again on the
#: same graph (or after another forward) it draws other numbers, another gradient.
#: Pins: corpus "dropout-freshmask", test_contract_findings_of_a_drawing_backward_are_rng_replay.
RNG_CONTRACT_HINTS = frozenset({"not_reentrant", "state_outside_ctx"})


class Draws(Protocol):
    """What a run measured of torch's generators (gradlab.checks.numeric.execute.Run)."""

    drew: bool
    drew_backward: bool


def rng_hint(run: Draws, hint: str, follows: Callable[[], bool] | None = None) -> str:
    """A failing gradient's (or Jacobian's) hint: `rng_replay` when `run`'s draws are the likely
    cause, else `hint`.  Every evaluation starts from one RNG state: the draws are to blame
    when backward moved the generators (decisive), or when forward drew, `hint` is one a wrong
    mask can give, and a gradient follows the draws (`follows`, execute.draws_matter: not so
    for additive noise, whose gradient is then wrong for another reason)."""
    if run.drew_backward:
        return "rng_replay"
    if run.drew and hint not in RNG_INDEPENDENT_HINTS and (follows is None or follows()):
        return "rng_replay"
    return hint


# --- finite differences: kinks (fdcauses.py measures the slopes) -----------------------------

#: Left and right differences disagree when they differ by more than this many tolerances.
#: A smooth function's one-sided differences differ by about eps * |f''| (1e-6 * f''), so
#: at 10 tolerances (1e-4 at gradcheck's atol) only a curvature above ~100 looks like a kink;
#: a real kink differs by the jump of the derivative itself (1 for relu, 2 for abs).
#: Pins: test_a_kink_in_the_example_values_passes_one_sidedly and the twin of corpus
#: "relu-slope2_at_kink" (a larger one fails them); no case pins a smaller.
KINK_GAP = 10.0
#: Failing Jacobian columns judged one-sidedly at most (4 calls each): a failure in more input
#: elements than this is not a few unlucky example values.  Pins (at 0):
#: test_a_kink_in_the_example_values_passes_one_sidedly.
MAX_KINK_COLUMNS = 64


def is_kink(an: Tensor, sides: tuple[Tensor, Tensor, Tensor], tol: Tolerance) -> bool:
    """Every entry non-smooth (the left and right slopes disagree by KINK_GAP tolerances, or
    the central difference lies that far outside them) with `an` between left and right."""
    left, central, right = sides
    thr = tol.atol + tol.rtol * left.abs().maximum(right.abs())
    lo, hi = left.minimum(right), left.maximum(right)
    gap = KINK_GAP * thr
    rough = ((hi - lo) > gap) | (central < lo - gap) | (central > hi + gap)
    between = (an >= lo - thr) & (an <= hi + thr)
    return bool((rough & between).all())


# --- second order and autocast: whose failure is it ------------------------------------------

#: Hints a finite-difference check gets from rounding noise in what it differentiates (a
#: float32-accurate function: its differences are noise of ~10% over the step): precision_loss
#: replaces them.  Pins: corpus "exp-f32",
#: test_a_float32_backward_of_a_float64_function_is_precision_loss.
NOISE_HINTS = ("", "constant_factor", "second_order_only")


def second_order_hint(hint: str, first_ok: bool) -> str:
    """A failing second_order row's hint: `second_order_only` beside right first-order
    gradients (corpus "exp-inner_backward_x2", "tanh-detach"), else its own."""
    return "second_order_only" if first_ok else hint


def precision_blamed(row: CheckRow) -> None:
    """`row` fails on a float32-accurate function's noise: precision_loss, no noise hints."""
    row.hint = "precision_loss"
    for f in row.findings:
        if f.hint in NOISE_HINTS:
            f.hint = ""


def autocast_hint(failed: bool, without: Callable[[], str]) -> str:
    """A failing autocast row's hint: the plain float32 run's (`without`), else autocast_only."""
    return "" if not failed else without() or "autocast_only"


def plain_hint(failed_hints: Sequence[str]) -> str:
    """The hint of the plain float32 rows a failing autocast row is run again as: their own,
    `also_without_autocast` when they fail without one, '' when they pass (autocast_only).
    Pins: test_the_broken_function_is_flagged_with_its_hint (autocast_wrong: autocast_only)."""
    return next((h for h in failed_hints if h), "also_without_autocast" if failed_hints else "")


# --- crashes -----------------------------------------------------------------------------------

def crash_hint(exc: BaseException, variant: str = "", check: str = "") -> str:
    """The hint code for what autograd's own error message says, else 'crash'.  Pinned by
    corpus "mul-count" (wrong_count), "mulconstant-grad_for_float" (non_tensor_grad),
    "tanh-inplacesaved" (inplace_saved); a write into a stride-0 tensor raising by holdout
    "max_pool/grad_output_written" (the variant and check say which tensor was written)."""
    msg = str(exc)
    if "more than one element of the written-to tensor" in msg:
        return ("inplace_grad_output" if variant.startswith("grad_output") else
                "inplace_input" if check == "forward" else "inplace_saved")
    if "incorrect number of gradients" in msg:
        return "wrong_count"
    if "different than None" in msg and "not a Variable" in msg:
        return "non_tensor_grad"
    if "invalid gradient" in msg and "shape" in msg:
        return "wrong_shape"
    if "modified by an inplace operation" in msg:
        return "inplace_saved"
    return "crash"

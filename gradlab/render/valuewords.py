"""The words of the value variants' hints: a failure only at the values a variant made (size-1
dims, magnitudes, tiles, planted specials, ties, repeated or sentinel indices), and a rescaled
failure that is a method's constant.  A module of its own beside words.py, which splats them
into its HINTS."""

from __future__ import annotations

#: Each value variant's hint (gradlab.checks.diagnosis.hints.ONLY_HINT) and verdicts'
#: scale_constant, in words.
VALUE_HINTS: dict[str, str] = {
    "size1_only": "fails only for size-1 dimensions (a squeeze() shape edge case?)",
    "magnitude_only": "fails only at large input magnitudes, where the reference is finite "
                      "(an overflow or cancellation: exp(x) / (1 + exp(x)), a logsumexp "
                      "without the max shift?)",
    "ragged_only": "fails only for sizes that are no multiple of a tile (a launch grid of "
                   "n // BLOCK instead of cdiv(n, BLOCK), a remainder loop dropped?)",
    "small_only": "fails only at small input magnitudes, where the float64 reference is "
                  "accurate (a cancellation: 1 / (exp(x) - 1) instead of 1 / expm1(x), "
                  "log(1 + x) instead of log1p(x)?)",
    "special_only": "fails only at planted special values (0, ...): a removable singularity "
                    "(x/x, sin(x)/x) or a division by zero?",
    "ties_only": "fails only at tied values (slices repeated along each dim): the gradient "
                 "through a group of tied values does not total the reference's (every tied "
                 "maximum given the full gradient, instead of one of them or a share?)",
    "repeated_index_only": "fails only where an integer index repeats (a backward that "
                           "assigns, gw[idx] = g, instead of accumulating with index_add_ "
                           "keeps one occurrence of a repeated index?)",
    "scale_constant": "off only at inputs rescaled far from yours, every value finite, and "
                      "not by rounding alone (about as far off in float64 as in float32): an "
                      "absolute constant of the method (a damping epsilon, a broadening factor, "
                      "a solver's tolerance) that values of its own size meet, or a formula "
                      "that loses accuracy near 0 (log(1 + x) for log1p(x))?",
    "sentinel_only": "fails only where an integer index holds the value of an int argument "
                     "(a padding_idx or an ignore_index whose position still gets a gradient, "
                     "or is skipped where it should not be?)",
}

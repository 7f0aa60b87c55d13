"""The tolerances gradlab judges values with: one table per dtype, and the low-precision criterion's
constants.  Plain data, no torch; the README's tolerance table is rendered from here
(`readme_table`, kept equal by tests/test_tolerances.py).

- float64 (and complex128): torch.testing.assert_close's defaults, against the reference run in
  float64 on the same values.
- float32, float16, bfloat16 (and complex64): the low-precision criterion (FlashAttention's test
  criterion): the Function's error against a float64 gold (the reference run in float64 on the
  same values) may be at most `precision_factor` times the error the reference itself makes in
  that dtype, plus a floor of FLOOR_ULPS units in the last place at the values' magnitude; a
  tensor within the table passes too.  Where no float64 run of the reference is possible, the
  table alone applies.
- `strict`: the tighter table gradlab used before (STRICT_TOLERANCES), fixed, in every dtype.
- A dtype's tolerance set by a spec (`tolerances:`) or the API (`tolerances=`) is used as is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance for comparing two tensors (|a-b| <= atol + rtol*|b|)."""

    atol: float
    rtol: float


#: torch.testing.assert_close's default (rtol, atol) per dtype (torch/testing/_comparison.py,
#: `_DTYPE_PRECISIONS`, the same from torch 2.1 to 2.13), complex like its real dtype: the
#: ecosystem's idea of "equal" per dtype.  A correct float64 adjoint solver at its 1e-9
#: tolerance or an iterative solve at 4e-9 passes; a factor or sign error is far outside.
DEFAULT_TOLERANCES: Mapping[str, Tolerance] = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6),
    "float16": Tolerance(atol=1e-5, rtol=1e-3),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2),
}

#: The tighter table of gradlab 0.x, opt-in (`strict`): float64 at float64 rounding (a float64
#: result only float32-accurate fails it), the low-precision dtypes fixed and loose.
STRICT_TOLERANCES: Mapping[str, Tolerance] = {
    "float64": Tolerance(atol=1e-10, rtol=1e-9),
    "float32": Tolerance(atol=1e-4, rtol=1e-3),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2),
}

#: The finite-difference checks' (jacobian, second_order) default, torch.autograd.gradcheck's.
GRADCHECK_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-3)

#: The dtypes judged by the low-precision criterion (where a float64 reference run exists).
LOW_PRECISION = ("float32", "float16", "bfloat16")
#: k: the Function's error may be this many times the reference's own in the dtype
#: (FlashAttention's tests use 2).  Set per spec (`tolerances: {precision_factor: 3}`) or call.
PRECISION_FACTOR = 2.0
#: Where the reference's own error is at least this many units in the last place of the gold's
#: largest |value|, rounding is amplified by the problem's conditioning (a solve of condition
#: number ~1e3), and two backward-stable algorithms differ by their constants, not by a factor
#: near 1: the criterion's k is then AMPLIFIED_GAIN times larger.  Pins: torch-dxdt's Whittaker
#: smoother, a correct float32 Cholesky solve judged against an LU reference, 43-215 ulps off,
#: 2.3-5.2x the reference's error in the third-party corpus and up to 6.9x over 200 right-hand
#: sides; the 2% wrong attention scale of tests/test_low_precision.py, whose reference is
#: under one ulp off in bfloat16, keeps k; a wrong formula is off by 1e5x or more.
AMPLIFIED_ULPS = 16.0
AMPLIFIED_GAIN = 4.0
#: The criterion's floor, in units in the last place of the dtype at the tensor's largest |gold|
#: (FlashAttention 3's tests add about one: twice the rounding of `ref + 0.3 - 0.3`): where the
#: reference in the dtype happens to be exact (a copy, a sum of exact terms) the Function may
#: still round differently by one unit (another order of the same sum).  Two would hide the 2%
#: wrong attention scale in bfloat16 (tests/test_low_precision.py: 0.025 against a limit of
#: 0.020 with one, 0.028 with two).
FLOOR_ULPS = 1.0
#: Each dtype's machine epsilon (torch.finfo(dtype).eps), without torch.
#: "tf32": float32 convolutions and matmuls on a GPU with TF32 on (a 10-bit mantissa, as
#: float16's), the floor's format there (gradlab.checks.numeric.compare.floor_dtype).
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10,
       "bfloat16": 2.0 ** -7, "tf32": 2.0 ** -10}


def table(strict: bool = False) -> Mapping[str, Tolerance]:
    """The fixed per-dtype table: the ecosystem's, or the strict one."""
    return STRICT_TOLERANCES if strict else DEFAULT_TOLERANCES


def amplified_factor(ref_err: float, scale: float, dtype: str,
                     factor: float = PRECISION_FACTOR) -> float:
    """The criterion's k for a reference `ref_err` off at magnitude `scale`: `factor`, or
    AMPLIFIED_GAIN times it where that error is conditioning's (AMPLIFIED_ULPS)."""
    unit = ulp(scale, dtype)
    return factor * AMPLIFIED_GAIN if unit > 0 and ref_err >= AMPLIFIED_ULPS * unit else factor


def criterion_limit(ref_err: float, scale: float, dtype: str,
                    factor: float = PRECISION_FACTOR) -> float:
    """The largest error against the gold the low-precision criterion allows a tensor whose
    reference, run in `dtype`, is off by `ref_err` (max abs) and whose gold's largest |value|
    is `scale`: factor * ref_err + FLOOR_ULPS ulps at that magnitude."""
    return factor * ref_err + FLOOR_ULPS * ulp(scale, dtype)


def ulp(scale: float, dtype: str) -> float:
    """The unit in the last place of `dtype` at magnitude `scale` (0 for 0)."""
    if not scale > 0 or not math.isfinite(scale):
        return 0.0
    return 2.0 ** math.floor(math.log2(scale)) * EPS[dtype]


def readme_table() -> str:
    """The README's tolerance table (Markdown), between its tolerances markers."""
    lines = ["| dtype | default (atol, rtol) | judged by | `strict` (atol, rtol) |",
             "| --- | --- | --- | --- |"]
    for dtype, tol in DEFAULT_TOLERANCES.items():
        strict = STRICT_TOLERANCES[dtype]
        how = ("the table (torch.testing.assert_close's)" if dtype not in LOW_PRECISION else
               f"the table, or the reference's own error: at most {PRECISION_FACTOR:g}x it "
               f"({PRECISION_FACTOR * AMPLIFIED_GAIN:g}x where it is {AMPLIFIED_ULPS:g} ulp or "
               f"more: conditioning's) + "
               f"{FLOOR_ULPS:g} ulp (the table alone where no float64 reference run exists)")
        lines.append(f"| {dtype} | ({tol.atol:g}, {tol.rtol:g}) | {how} | "
                     f"({strict.atol:g}, {strict.rtol:g}) |")
    lines.append(f"| finite differences (jacobian, second_order) | "
                 f"({GRADCHECK_TOLERANCE.atol:g}, {GRADCHECK_TOLERANCE.rtol:g}) | "
                 "torch.autograd.gradcheck's, with a step the forward's noise permits | same |")
    return "\n".join(lines)

"""What is checked: dtypes, tolerances, tensor and case descriptions, the op definition, targets.

Plain data, no torch: spec loading builds these, the checks and the bench consume them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradlab.errors import unknown_name
from gradlab.tolerances import DEFAULT_TOLERANCES as DEFAULT_TOLERANCES
from gradlab.tolerances import GRADCHECK_TOLERANCE as GRADCHECK_TOLERANCE
from gradlab.tolerances import PRECISION_FACTOR, STRICT_TOLERANCES, table
from gradlab.tolerances import Tolerance as Tolerance

#: The dtypes a run is in (the case's floating tensors take the run's dtype); "double",
#: "float", "half" and a few more are accepted as aliases.
DTYPES = ("float64", "float32", "float16", "bfloat16")
#: Dtypes a tensor argument can have besides those: targets, indices, masks.  Such a tensor
#: keeps its dtype whatever dtype the run is in, and never requires grad.
INTEGER_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
#: Complex dtypes a tensor argument can have: such a tensor keeps its dtype in a run (complex128
#: in a float64 run, so the finite-difference checks see a complex64 argument in complex128),
#: and requires grad like a floating one; checked on its real view (checks.jacobian.realview).
COMPLEX_DTYPES = ("complex64", "complex128")
#: Every dtype a tensor argument can name.
TENSOR_DTYPES = DTYPES + INTEGER_DTYPES + COMPLEX_DTYPES
DTYPE_ALIASES = {"double": "float64", "float": "float32", "half": "float16", "bf16": "bfloat16",
                 "fp64": "float64", "fp32": "float32", "fp16": "float16", "long": "int64",
                 "int": "int32", "short": "int16", "byte": "uint8",
                 "cfloat": "complex64", "cdouble": "complex128"}
#: The value range of each integer dtype, [low, high).
INTEGER_RANGES = {"int64": (-(2**63), 2**63), "int32": (-(2**31), 2**31),
                  "int16": (-(2**15), 2**15), "int8": (-128, 128), "uint8": (0, 256),
                  "bool": (0, 2)}

#: Layouts a tensor argument can be created in.
LAYOUTS = ("contiguous", "channels_last", "transposed", "strided")

#: Check families, as named in specs, options and report rows:
#: - forward:      the Function's outputs against the reference on the same values;
#: - gradient:     input gradients against the reference's for the same random grad_output;
#: - contract:     what backward returns (count, None for non-tensors, shape/dtype/device) and
#:                 that nothing is modified in place that must not be;
#: - jacobian:     the analytical Jacobian against central finite differences in float64 (the
#:                 math of torch.autograd.gradcheck, gradlab's own code: dense or random probes);
#: - second_order: the same for the gradient function (gradgradcheck's math), or, for an op
#:                 that declares no double backward, that double backward raises;
#: - forward_ad:   forward mode (a custom Function's jvp: torch.func.jvp, jacfwd, dual numbers)
#:                 against central finite differences along the same tangents and the
#:                 reference's jvp, in float64 (gradcheck's check_forward_ad; a Function without
#:                 jvp where the reference has forward mode: information, the matrix's fwd);
#: - autocast:     forward and gradients under torch.autocast against the reference under the
#:                 same autocast (see gradlab.checks.numeric.autocast);
#: - capabilities: what else the Function supports, measured (see
#:   gradlab.checks.numeric.capabilities):
#:                 torch.compile, torch.func vmap and grad, a deterministic backward,
#:                 non-contiguous inputs, CUDA;
#: - edges:        the inputs at the edges of the case's signature (an empty size, a dim made
#:                 non-square, all-zero and one-sign values, an int argument at 0, a float
#:                 at its inverse, a rank more, float16's graph) against the reference
#:                 (gradlab.checks.families.edges);
#: - opcheck:      for a torch.library op only, torch.library.opcheck's test utilities, a row
#:                 each: schema and undeclared mutation, the fake kernel against the real one,
#:                 the autograd registration, AOT dispatch (gradlab.checks.numeric.opcheck).
CHECKS = ("forward", "gradient", "contract", "jacobian", "second_order", "forward_ad",
          "autocast", "capabilities", "edges", "opcheck", "explore")
#: Checks that run only when asked for by an option of their own (explore: `--explore`,
#: gradlab.check(explore=)); `checks:` and `--check` still narrow them.
OPT_IN_CHECKS = ("explore",)
#: Former check names, still accepted in specs and on the command line.
CHECK_ALIASES = {"gradcheck": "jacobian", "gradgradcheck": "second_order"}

#: Capabilities a Function can lack while its reference has them, found by a check of their
#: own (what a missing one is, warn or information: gradlab.checks.diagnosis.policy.MISSING;
#: `requires: [...]` in a spec makes it a failure).
WARN_CAPABILITIES = ("second_order", "autocast", "expanded_input", "forward_ad")
#: Capabilities measured by gradlab.checks.numeric.capabilities' probes, information when missing
#: (gradlab.checks.diagnosis.policy): the capability matrix shows them; `requires: [...]` makes a
#: missing one a failure.
INFO_CAPABILITIES = ("compile", "vmap", "func_grad", "deterministic", "noncontiguous", "cuda",
                     "batched_grad")
#: Every capability a spec can require.
CAPABILITIES = WARN_CAPABILITIES + INFO_CAPABILITIES
#: The columns of the capability matrix (gradlab.results.capabilities), in order.
MATRIX = ("first_order", "second_order", "forward_ad", "autocast", "compile", "vmap",
          "func_grad", "batched_grad", "deterministic", "noncontiguous", "cuda")
#: Capabilities measured only on request (--capabilities all) or when a spec requires them:
#: torch.compile costs seconds per op (importing torch._dynamo alone takes about 2 s).
COSTLY_CAPABILITIES = ("compile",)
#: The dtype torch.autocast computes in, per device type (CPU autocast supports bfloat16 only
#: among the 16-bit types most kernels have; CUDA's default is float16).
AUTOCAST_DTYPES = {"cpu": "bfloat16", "cuda": "float16"}

#: Variant families, as named in specs and options (see gradlab.checks.families.variants).
VARIANT_FAMILIES = ("noncontiguous", "transposed", "channels_last", "expanded", "grad_output",
                    "requires_grad", "undefined_grad", "size1", "magnitude", "ragged", "small",
                    "special", "ties", "repeated_index", "sentinel")


def canonical_dtype(name: str, allowed: Sequence[str] = DTYPES) -> str:
    """Map a dtype name or alias ('double') to its canonical name ('float64'), one of `allowed`
    (the run's dtypes by default; TENSOR_DTYPES for a tensor argument)."""
    key = str(name).lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in allowed:
        raise ValueError(unknown_name("dtype", name, allowed))
    return key


def is_integer_dtype(name: str | None) -> bool:
    """True for the integer and bool dtypes (tensors that never require grad)."""
    return name in INTEGER_DTYPES


def canonical_check(name: str) -> str:
    """A check name or former alias ('gradcheck') as its current name ('jacobian')."""
    name = CHECK_ALIASES.get(name, name)
    if name not in CHECKS:
        raise ValueError(unknown_name("check", name, CHECKS))
    return name


def non_overlapping(shape: Sequence[int], strides: tuple[int, ...]) -> bool:
    """True when no two indices of `shape` map to the same offset under `strides`."""
    dims = sorted((s, n) for s, n in zip(strides, shape, strict=True) if n > 1)
    reach = 0  # largest offset reachable by the smaller-stride dims so far
    for stride, n in dims:
        if stride <= reach:
            return False
        reach += stride * (n - 1)
    return True


# The tolerance tables and the low-precision criterion's constants live in gradlab.tolerances
# (torch-free, rendered into the README); re-exported here where the rest of gradlab reads them.
#: The key of `tolerances:` (spec) / `tolerances=` (API) that sets the finite-difference checks'
#: tolerance outright (beside the dtype keys).
FD_TOLERANCE_KEY = "finite_differences"


#: The kinds of fixed values: floating values are kept in float64 (exact for every float dtype),
#: integers in int64, masks as bool.
VALUE_KINDS = ("float64", "int64", "bool")


@dataclass(frozen=True)
class FixedValues:
    """A tensor's fixed values (inline in a spec or read from a file), row-major.

    Raw bytes of `kind` (one of VALUE_KINDS) rather than a tensor: plain data that pickles to a
    worker, compares by value, and keeps this module free of torch.
    """

    kind: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class TensorArg:
    """How to make one tensor argument of a case.

    dtype None means "the dtype the case is run in"; a fixed dtype (e.g. an index tensor) stays.
    An integer or bool dtype draws integers in [low, high) (bool: random masks) and never
    requires grad.  `values`, when given, replaces the random draw (cast to the dtype).
    layout: contiguous | channels_last (4-D) | transposed (`transpose` dims swapped in memory) |
    strided (explicit `strides`, in elements, over a buffer large enough for them).
    """

    shape: tuple[int, ...]
    dtype: str | None = None
    requires_grad: bool = True
    low: float = -1.0
    high: float = 1.0
    #: Push values away from zero by at least this much (keeps ReLU-like kinks out of the
    #: finite-difference stencil).
    min_abs: float = 0.0
    layout: str = "contiguous"
    transpose: tuple[int, int] = (-2, -1)
    strides: tuple[int, ...] | None = None
    values: FixedValues | None = None
    #: values the special variant plants at a few positions (besides 0:
    #: gradlab.checks.families.values)
    special: tuple[float, ...] = ()


@dataclass(frozen=True)
class Case:
    """One concrete call of an op: positional args (TensorArg or plain values) and kwargs."""

    name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: size-1 variants: each group lists (arg position, dim) pairs shrunk to 1 together (dims
    #: that must agree across args, e.g. a conv's out_channels in weight and bias).
    size1: tuple[tuple[tuple[int, int], ...], ...] = ()
    #: the special variant's values per tensor arg position (the API's; a spec's are on
    #: TensorArg.special)
    special: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    #: the spec's key path its arguments come from ('cases[0].args', 'args'; '' for the API's):
    #: what a spec error about them names (not part of what the case is).
    key: str = field(default="", compare=False)


@dataclass(frozen=True)
class OpDef:
    """Everything gradlab needs to check and bench one op.

    `function` is the custom implementation (usually `SomeFunction.apply`, or a callable that uses
    custom Functions inside), `reference` the same math in plain autograd.  Both take the case's
    positional args and kwargs.  `second_order` says whether double backward is supported: gradlab
    runs gradgradcheck when True and asserts that second order raises when False.
    """

    name: str
    summary: str
    function: Callable[..., Any]
    reference: Callable[..., Any] | None
    #: True: double backward supported (gradgradcheck runs); False: it must raise; None: unknown
    #: (user Functions): gradgradcheck runs and a "not differentiable twice" error is a skip.
    second_order: bool | None
    #: the tolerances a spec or API call set, per dtype (the others are DEFAULT_TOLERANCES').
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    #: dtypes `gradlab check OP` runs when no --dtype is given.
    dtypes: tuple[str, ...] = ("float64", "float32")
    #: devices the op can run on.
    devices: tuple[str, ...] = ("cpu", "cuda")
    #: the check cases (a bundled op's come from its spec file, gradlab/specs/NAME.yaml).
    cases: tuple[Case, ...] = ()
    #: bigger cases for `gradlab bench` (the check cases are used when empty).
    bench_cases: tuple[Case, ...] = ()
    #: the finite-difference checks' tolerance, set outright (`tolerances: {finite_differences:
    #: ...}`); None: see numerical_tolerance.
    fd_tolerance: Tolerance | None = None
    #: the tighter fixed table (gradlab.tolerances.STRICT_TOLERANCES) instead of the ecosystem's
    #: and the low-precision criterion (`tolerances: {strict: true}`, `strict_tolerances=True`).
    strict_tolerances: bool = False
    #: the low-precision criterion's k (gradlab.tolerances.PRECISION_FACTOR).
    precision_factor: float = PRECISION_FACTOR

    def tolerance(self, dtype: str) -> Tolerance:
        """The comparison tolerance for `dtype` (falls back to the fixed table)."""
        return self.tolerances.get(dtype, table(self.strict_tolerances)[dtype])

    def judged_by_criterion(self, dtype: str) -> bool:
        """Whether `dtype`'s rows take the low-precision criterion (gradlab.tolerances): a low
        precision dtype whose tolerance the user did not set, outside strict."""
        from gradlab.tolerances import LOW_PRECISION

        return (dtype in LOW_PRECISION and dtype not in self.tolerances
                and not self.strict_tolerances)

    def numerical_tolerance(self, dtype: str) -> Tolerance:
        """The finite-difference checks' tolerance (jacobian, second_order) in `dtype`, their
        numerical dtype: fd_tolerance when set; else gradcheck's, loosened per component to
        the user's tolerance for `dtype` where one was set (a Function off by design by 0.5%
        passes everywhere once its tolerance says so, and a tighter one keeps gradcheck's:
        finite differences are no more accurate than that)."""
        if self.fd_tolerance is not None:
            return self.fd_tolerance
        return loosest(GRADCHECK_TOLERANCE, self.tolerances.get(dtype))

    def autocast_tolerance(self, dtype: str, input_dtype: str) -> Tolerance:
        """The autocast check's fixed tolerance (two runs in the autocast dtype compared with
        each other, beside the low-precision criterion: gradlab.checks.numeric.autocast):
        `dtype`'s (the autocast dtype; the user's when set, else the strict table's),
        loosened per component to the user's tolerance for the inputs' dtype where one was set:
        an error by design (an approximate method) stays under autocast, beside its rounding."""
        base = self.tolerances.get(dtype, STRICT_TOLERANCES[dtype])
        return loosest(base, self.tolerances.get(input_dtype))


def loosest(base: Tolerance, other: Tolerance | None) -> Tolerance:
    """`base` loosened per component to `other` (base itself when other is None)."""
    if other is None:
        return base
    return Tolerance(max(base.atol, other.atol), max(base.rtol, other.rtol))


@dataclass(frozen=True)
class Target:
    """An op plus run settings from a spec; None fields fall back to the op's or the run's."""

    op: OpDef
    #: where it came from: "gradlab/specs/conv2d.yaml", "specs/x.yaml: ops[0]" or "python".
    source: str = "python"
    dtypes: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    #: the checks to run (None: all that apply).
    checks: frozenset[str] | None = None
    #: the variants to generate (None: all that apply).
    variants: frozenset[str] | None = None
    #: dtype of the finite-difference checks (jacobian, second_order).
    numerical_dtype: str = "float64"
    #: capabilities (CAPABILITIES) whose absence fails the run instead of warning.
    requires: frozenset[str] = frozenset()
    #: a variant running this many times longer than the base case is stopped (a declared
    #: skip; 0: never); None: the run's (Options.cost_envelope).
    cost_envelope: float | None = None

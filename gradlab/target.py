"""A Target: one op to check or bench, with the overrides its spec (or the API call) gave."""

from __future__ import annotations

from dataclasses import dataclass

from gradlab.ops.base import OpDef


@dataclass(frozen=True)
class Target:
    """An op plus run settings from a spec; None fields fall back to the op's or the run's."""

    op: OpDef
    #: where it came from: "bundled", "specs/x.yaml: ops[0]" or "python".
    source: str = "bundled"
    dtypes: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    #: the checks to run (None: all that apply).
    checks: frozenset[str] | None = None
    #: the variants to generate (None: all that apply).
    variants: frozenset[str] | None = None
    #: dtype of the numerical (finite-difference) checks.
    gradcheck_dtype: str = "float64"

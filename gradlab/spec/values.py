"""Parsing the plain values inside a spec: numbers, shapes, dtypes, names, switches, tolerances;
and the key paths every error names.

Every parser takes the key path of what it parses and raises a SpecError naming it.  Tensors
are gradlab.spec.tensors', args and cases gradlab.spec.arguments'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gradlab.errors import SpecError, shown, unknown_name
from gradlab.model import (
    CHECK_ALIASES,
    DEFAULT_TOLERANCES,
    DTYPES,
    FD_TOLERANCE_KEY,
    GRADCHECK_TOLERANCE,
    INTEGER_DTYPES,
    Tolerance,
    canonical_dtype,
)

#: A mapping key shown as is in a key path; any other key is shown quoted.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,39}")


def key_name(k: Any) -> str:
    """A mapping key from the file as a key path part: plain names as they are, anything else
    (other types, spaces, line breaks, very long names) as a short repr."""
    return k if isinstance(k, str) and _PLAIN_KEY.fullmatch(k) else shown(k)


def first_unknown(keys: Iterable[Any]) -> str:
    """The first of `keys` in sorted order, as a key path part (keys of mixed types sort by
    their text: 1 and 'a' do not compare)."""
    return key_name(min(keys, key=str))


def fail(key: str, message: str) -> SpecError:
    """The error for `key` (a key path such as ops[0].args[1].shape)."""
    return SpecError(message, key=key)


def join(prefix: str, key: str | int) -> str:
    """The key path of `key` under `prefix`: a.b, a[0], or b at the top level."""
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def parse_number(v: Any, key: str) -> float:
    """A finite int or float (not a bool), as a float.

    NaN never compares: a NaN bound or tolerance would let every comparison pass.
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise fail(key, f"expected a number, got {shown(v)}")
    if not math.isfinite(v):
        raise fail(key, f"expected a finite number, got {v!r}")
    return float(v)


def check_finite(v: Any, key: str) -> Any:
    """A plain value with no NaN or infinity anywhere inside (lists and mappings searched)."""
    if isinstance(v, float) and not math.isfinite(v):
        raise fail(key, f"expected a finite number, got {v!r}")
    if isinstance(v, list):
        for i, x in enumerate(v):
            check_finite(x, join(key, i))
    if isinstance(v, Mapping):
        for k, x in v.items():
            check_finite(x, join(key, str(k)))
    return v


def parse_shape(v: Any, key: str, *, positive: bool) -> tuple[int, ...]:
    """A list of positive (or non-negative) ints."""
    what = "positive" if positive else "non-negative"
    if not isinstance(v, list) or not all(is_int(n) and (n > 0 if positive else n >= 0)
                                          for n in v):
        raise fail(key, f"expected a list of {what} ints, got {shown(v)}")
    return tuple(v)


def parse_dtype(v: Any, key: str, allowed: Sequence[str] = DTYPES) -> str:
    """A dtype name or alias, as its canonical name (one of `allowed`: a run's dtypes unless
    said otherwise)."""
    try:
        return canonical_dtype(str(v), allowed)
    except ValueError as exc:
        if str(v) in INTEGER_DTYPES:
            raise fail(key, f"{v} is a dtype for tensor arguments (dtype: {v} on a tensor); a "
                            f"run's dtypes are {', '.join(allowed)}") from None
        raise fail(key, str(exc)) from None


def parse_names(v: Any, key: str, allowed: Sequence[str] | None = None,
                kind: str = "name") -> list[str]:
    """A name or a list of names (each one of `allowed` when given; `kind` words an unknown
    one: 'unknown device ...')."""
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(x, str) for x in items):
        raise fail(key, f"expected a list of names, got {shown(v)}")
    if allowed is not None:
        for i, x in enumerate(items):
            if x not in allowed:
                raise fail(join(key, i), unknown_name(kind, x, allowed))
    return items


def parse_switches(v: Any, key: str, allowed: Sequence[str],
                   kind: str = "name") -> frozenset[str]:
    """A list of names to keep, or a mapping name: true/false over all of `allowed`."""
    if isinstance(v, bool):
        return frozenset(allowed) if v else frozenset()
    if isinstance(v, Mapping):
        keep = set(allowed)
        for name, on in v.items():
            if name not in allowed:
                raise fail(join(key, key_name(name)), unknown_name(kind, name, allowed))
            if not isinstance(on, bool):
                raise fail(join(key, key_name(name)), f"expected true or false, got {shown(on)}")
            if not on:
                keep.discard(name)
        return frozenset(keep)
    return frozenset(parse_names(v, key, allowed, kind))


def aliased(v: Any) -> Any:
    """Check names with former aliases (gradcheck, gradgradcheck) replaced by the current ones."""
    if isinstance(v, str):
        return CHECK_ALIASES.get(v, v)
    if isinstance(v, list):
        return [CHECK_ALIASES.get(x, x) if isinstance(x, str) else x for x in v]
    if isinstance(v, Mapping):
        return {CHECK_ALIASES.get(k, k) if isinstance(k, str) else k: x for k, x in v.items()}
    return v


def parse_tolerances(v: Any, key: str, base: Mapping[str, Tolerance]) -> dict[str, Tolerance]:
    """dtype: {atol, rtol} over `base` (a missing atol or rtol keeps the base's, or the
    default's); the finite_differences key is parse_fd_tolerance's."""
    if not isinstance(v, Mapping):
        raise fail(key, f"expected a mapping dtype: {{atol, rtol}}, got {shown(v)}")
    out = dict(base)
    for name, tol in v.items():
        if name in (FD_TOLERANCE_KEY, *JUDGEMENT_KEYS):
            continue
        dk = join(key, key_name(name))
        try:
            dtype = canonical_dtype(str(name))
        except ValueError:
            raise fail(dk, unknown_name("key", name, [*DTYPES, FD_TOLERANCE_KEY, *JUDGEMENT_KEYS],
                                        "keys")) from None
        out[dtype] = parse_tolerance(tol, dk, out.get(dtype, DEFAULT_TOLERANCES[dtype]))
    return out


#: The keys of `tolerances:` that choose how values are judged rather than set a dtype's:
#: `strict: true` (the tighter fixed table) and `precision_factor: K` (the low-precision
#: criterion's k; gradlab.tolerances).
JUDGEMENT_KEYS = ("strict", "precision_factor")


def parse_judgement(v: Any, key: str) -> dict[str, Any]:
    """The OpDef fields `tolerances:`'s JUDGEMENT_KEYS set (strict_tolerances,
    precision_factor), each checked."""
    out: dict[str, Any] = {}
    if not isinstance(v, Mapping):
        return out
    if "strict" in v:
        if not isinstance(v["strict"], bool):
            raise fail(join(key, "strict"), f"expected true or false, got {shown(v['strict'])}")
        out["strict_tolerances"] = v["strict"]
    if "precision_factor" in v:
        k = parse_number(v["precision_factor"], join(key, "precision_factor"))
        if k < 1:
            raise fail(join(key, "precision_factor"), f"expected a number >= 1, got {k:g}")
        out["precision_factor"] = k
    return out


def parse_fd_tolerance(v: Any, key: str, base: Tolerance | None) -> Tolerance | None:
    """The finite_differences entry of `tolerances:` (v is the whole mapping): the
    finite-difference checks' tolerance, a missing atol or rtol kept from `base` or gradcheck's;
    `base` when the entry is absent."""
    if not isinstance(v, Mapping) or FD_TOLERANCE_KEY not in v:
        return base
    return parse_tolerance(v[FD_TOLERANCE_KEY], join(key, FD_TOLERANCE_KEY),
                           base or GRADCHECK_TOLERANCE)


def parse_tolerance(tol: Any, key: str, old: Tolerance) -> Tolerance:
    """{atol: X, rtol: Y}, each a finite number >= 0 (a missing one is old's)."""
    if not isinstance(tol, Mapping) or not set(tol) <= {"atol", "rtol"}:
        raise fail(key, f"expected {{atol: X, rtol: Y}}, got {shown(tol)}")
    atol = parse_number(tol.get("atol", old.atol), join(key, "atol"))
    rtol = parse_number(tol.get("rtol", old.rtol), join(key, "rtol"))
    for name, x in (("atol", atol), ("rtol", rtol)):
        if x < 0:
            raise fail(join(key, name), f"expected a number >= 0, got {x:g}")
    return Tolerance(atol, rtol)

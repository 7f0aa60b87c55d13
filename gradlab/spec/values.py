"""Parsing the values inside a spec: tensors, args, kwargs, size1 groups, cases, settings.

Every parser takes the key path of what it parses and raises a SpecError naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gradlab.errors import SpecError, shown
from gradlab.model import (
    CHECK_ALIASES,
    DEFAULT_TOLERANCES,
    DTYPES,
    LAYOUTS,
    Case,
    TensorArg,
    Tolerance,
    canonical_dtype,
    non_overlapping,
)

CASE_KEYS = {"name", "args", "kwargs", "size1"}
TENSOR_KEYS = {"shape", "dtype", "requires_grad", "low", "high", "min_abs", "layout", "transpose",
               "strides"}

#: size1: groups of (arg position, dim) pairs shrunk to 1 together.
Size1 = tuple[tuple[tuple[int, int], ...], ...]

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


def parse_dtype(v: Any, key: str) -> str:
    """A dtype name or alias, as its canonical name."""
    try:
        return canonical_dtype(str(v))
    except ValueError:
        raise fail(key, f"unknown dtype {shown(v)} (expected one of {', '.join(DTYPES)})") from None


def _layout(v: Mapping[str, Any], key: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """The layout fields of a tensor mapping (layout, transpose, strides), checked on `shape`."""
    layout = v.get("layout", "strided" if "strides" in v else "contiguous")
    if layout not in LAYOUTS:
        raise fail(join(key, "layout"), f"expected one of {', '.join(LAYOUTS)}, got "
                                        f"{shown(layout)}")
    kw: dict[str, Any] = {"layout": layout}
    ndim = len(shape)
    if layout == "channels_last" and ndim != 4:
        raise fail(join(key, "layout"), f"channels_last needs a 4-D shape, got {ndim}-D")
    if layout == "transposed":
        if ndim < 2:
            raise fail(join(key, "layout"), "transposed needs at least 2 dims")
        t = v.get("transpose", [-2, -1])
        if (not isinstance(t, list) or len(t) != 2 or not all(is_int(d) and -ndim <= d < ndim
                                                              for d in t)):
            raise fail(join(key, "transpose"), f"expected two dims of a {ndim}-D shape, "
                                               f"got {shown(t)}")
        kw["transpose"] = tuple(t)
    if layout == "strided":
        if "strides" not in v:
            raise fail(join(key, "strides"), "layout strided needs strides")
        strides = parse_shape(v["strides"], join(key, "strides"), positive=False)
        if len(strides) != ndim:
            raise fail(join(key, "strides"), f"expected {ndim} strides, got {len(strides)}")
        if not non_overlapping(shape, strides):
            raise fail(join(key, "strides"), f"strides {list(strides)} make elements overlap")
        kw["strides"] = strides
    return kw


def parse_tensor(v: Mapping[str, Any], key: str) -> TensorArg:
    """A tensor argument from its mapping (the mapping has a `shape`)."""
    unknown = set(v) - TENSOR_KEYS
    if unknown:
        raise fail(join(key, first_unknown(unknown)),
                   f"unknown key (tensor keys: {', '.join(sorted(TENSOR_KEYS))})")
    kw: dict[str, Any] = {"shape": parse_shape(v["shape"], join(key, "shape"), positive=True)}
    if "dtype" in v:
        kw["dtype"] = parse_dtype(v["dtype"], join(key, "dtype"))
    if "requires_grad" in v:
        if not isinstance(v["requires_grad"], bool):
            raise fail(join(key, "requires_grad"), f"expected true or false, got "
                                                   f"{shown(v['requires_grad'])}")
        kw["requires_grad"] = v["requires_grad"]
    for name in ("low", "high", "min_abs"):
        if name in v:
            kw[name] = parse_number(v[name], join(key, name))
    if kw.get("low", -1.0) >= kw.get("high", 1.0):
        raise fail(join(key, "high"), "high must be greater than low")
    kw |= _layout(v, key, kw["shape"])
    return TensorArg(**kw)


def parse_value(v: Any, key: str) -> Any:
    """A positional argument: a tensor spec (mapping with `shape`), {value: X}, or plain X."""
    if isinstance(v, Mapping):
        if "shape" in v:
            return parse_tensor(v, key)
        if set(v) == {"value"}:
            return check_finite(v["value"], join(key, "value"))
        raise fail(key, "expected a tensor spec (a mapping with 'shape') or {value: ...}, got "
                        f"keys {shown(sorted(v, key=str))}")
    return check_finite(v, key)


def parse_args(v: Any, key: str) -> tuple[Any, ...]:
    """A list of positional arguments."""
    if not isinstance(v, list):
        raise fail(key, f"expected a list of arguments, got {shown(v)}")
    return tuple(parse_value(a, join(key, i)) for i, a in enumerate(v))


def parse_kwargs(v: Any, key: str) -> dict[str, Any]:
    """A mapping of plain keyword arguments (tensors must be positional)."""
    if not isinstance(v, Mapping):
        raise fail(key, f"expected a mapping of keyword arguments, got {shown(v)}")
    out = {}
    for k, a in v.items():
        value = parse_value(a, join(key, key_name(k)))
        if isinstance(value, TensorArg):
            raise fail(join(key, key_name(k)), "tensors must be positional args (in args)")
        out[str(k)] = value
    return out


def parse_size1(v: Any, key: str, n_args: int) -> Size1:
    """size1: a list of groups, each a list of [arg, dim] pairs shrunk to 1 together."""
    if not isinstance(v, list):
        raise fail(key, f"expected a list of groups of [arg, dim] pairs, got {shown(v)}")
    groups = []
    for g, group in enumerate(v):
        if not isinstance(group, list) or not group:
            raise fail(join(key, g), f"expected a list of [arg, dim] pairs, got {shown(group)}")
        pairs = []
        for p, pair in enumerate(group):
            if (not isinstance(pair, list) or len(pair) != 2 or not all(is_int(n) for n in pair)
                    or not 0 <= pair[0] < n_args):
                raise fail(join(join(key, g), p), f"expected [arg index < {n_args}, dim], "
                                                  f"got {shown(pair)}")
            pairs.append((pair[0], pair[1]))
        groups.append(tuple(pairs))
    return tuple(groups)


def parse_base(entry: Mapping[str, Any], key: str) -> Case:
    """The base case of an op mapping: its top-level args, kwargs and size1."""
    args = parse_args(entry.get("args", []), join(key, "args"))
    kwargs = parse_kwargs(entry["kwargs"], join(key, "kwargs")) if "kwargs" in entry else {}
    size1 = parse_size1(entry["size1"], join(key, "size1"), len(args)) if "size1" in entry else ()
    return Case("base", args, kwargs, size1)


def parse_case(c: Any, key: str, index: int, base: Case | None) -> Case:
    """One case mapping; what it leaves out comes from `base` (args replace, kwargs merge)."""
    if not isinstance(c, Mapping):
        raise fail(key, f"expected a mapping with name/args/kwargs, got {shown(c)}")
    unknown = set(c) - CASE_KEYS
    if unknown:
        raise fail(join(key, first_unknown(unknown)),
                   f"unknown key (case keys: {', '.join(sorted(CASE_KEYS))})")
    if "args" in c:
        args = parse_args(c["args"], join(key, "args"))
    elif base is not None:
        args = base.args
    else:
        raise fail(key, "a case needs args (there are no base args to inherit)")
    kwargs = dict(base.kwargs) if base is not None else {}
    if "kwargs" in c:
        kwargs |= parse_kwargs(c["kwargs"], join(key, "kwargs"))
    size1 = parse_size1(c["size1"], join(key, "size1"), len(args)) if "size1" in c else (
        base.size1 if base is not None else ())
    return Case(str(c.get("name", f"case{index}")), args, kwargs, size1)


def parse_cases(entries: Any, key: str, base: Case | None) -> tuple[Case, ...]:
    """A non-empty list of cases with distinct names."""
    if not isinstance(entries, list) or not entries:
        raise fail(key, f"expected a non-empty list of cases, got {shown(entries)}")
    cases = tuple(parse_case(c, join(key, i), i, base) for i, c in enumerate(entries))
    names = [c.name for c in cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise fail(key, f"case name {shown(dup)} is used twice")
    return cases


def parse_names(v: Any, key: str, allowed: Sequence[str] | None = None) -> list[str]:
    """A name or a list of names (each one of `allowed` when given)."""
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(x, str) for x in items):
        raise fail(key, f"expected a list of names, got {shown(v)}")
    if allowed is not None:
        for i, x in enumerate(items):
            if x not in allowed:
                raise fail(join(key, i), f"expected one of {', '.join(allowed)}, got {shown(x)}")
    return items


def parse_switches(v: Any, key: str, allowed: Sequence[str]) -> frozenset[str]:
    """A list of names to keep, or a mapping name: true/false over all of `allowed`."""
    if isinstance(v, bool):
        return frozenset(allowed) if v else frozenset()
    if isinstance(v, Mapping):
        keep = set(allowed)
        for name, on in v.items():
            if name not in allowed:
                raise fail(join(key, key_name(name)), f"unknown name (expected one of "
                                                 f"{', '.join(allowed)})")
            if not isinstance(on, bool):
                raise fail(join(key, key_name(name)), f"expected true or false, got {shown(on)}")
            if not on:
                keep.discard(name)
        return frozenset(keep)
    return frozenset(parse_names(v, key, allowed))


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
    """dtype: {atol, rtol} over `base` (a missing atol or rtol keeps the base's)."""
    if not isinstance(v, Mapping):
        raise fail(key, f"expected a mapping dtype: {{atol, rtol}}, got {shown(v)}")
    out = dict(base)
    for name, tol in v.items():
        dk = join(key, key_name(name))
        dtype = parse_dtype(name, dk)
        if not isinstance(tol, Mapping) or not set(tol) <= {"atol", "rtol"}:
            raise fail(dk, f"expected {{atol: X, rtol: Y}}, got {shown(tol)}")
        old = out.get(dtype, DEFAULT_TOLERANCES[dtype])
        out[dtype] = Tolerance(parse_number(tol.get("atol", old.atol), join(dk, "atol")),
                               parse_number(tol.get("rtol", old.rtol), join(dk, "rtol")))
    return out

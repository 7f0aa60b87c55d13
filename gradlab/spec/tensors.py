"""Tensor arguments in a spec: shape, dtype, random ranges, layout, and fixed values.

A mapping with `shape`, `values` or `file` is a tensor.  Floating tensors take the run's dtype
unless they name one; integer and bool tensors (targets, indices, masks) keep theirs and never
require grad.  Fixed values come inline (`values:`) or from a .pt/.npy file (gradlab.spec.
tensorfile), and are checked here: shape, finiteness, integer ranges.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gradlab.errors import did_you_mean, shown, unknown_name
from gradlab.model import (
    INTEGER_RANGES,
    LAYOUTS,
    TENSOR_DTYPES,
    FixedValues,
    TensorArg,
    is_integer_dtype,
    non_overlapping,
)
from gradlab.spec.tensorfile import UNREAD, Fixed, read_tensor_file
from gradlab.spec.values import (
    fail,
    first_unknown,
    is_int,
    join,
    key_name,
    parse_dtype,
    parse_number,
    parse_shape,
)

TENSOR_KEYS = {"shape", "dtype", "requires_grad", "const", "low", "high", "min_abs", "layout",
               "transpose", "strides", "values", "file", "key", "special"}
#: The keys that make a mapping a tensor (any other mapping is an error, or `{value: X}`).
TENSOR_MARKERS = ("shape", "values", "file")


def is_tensor_spec(v: Any) -> bool:
    """True for a mapping that describes a tensor."""
    return isinstance(v, Mapping) and any(k in v for k in TENSOR_MARKERS)


def misspelled_tensor(v: Mapping[Any, Any], key: str) -> None:
    """A mapping that is no tensor spec only because a key is misspelled ('shap'): the error
    names that key and the one meant."""
    for k in sorted(v, key=str):
        if k not in TENSOR_KEYS and did_you_mean(k, TENSOR_MARKERS):
            raise fail(join(key, key_name(k)), "unknown key " + unknown_name(
                "", k, sorted(TENSOR_KEYS), "tensor keys"))


def _layout(v: Mapping[str, Any], key: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """The layout fields of a tensor mapping (layout, transpose, strides), checked on `shape`."""
    layout = v.get("layout", "strided" if "strides" in v else "contiguous")
    if layout not in LAYOUTS:
        raise fail(join(key, "layout"), unknown_name("layout", layout, LAYOUTS))
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


def _nested(v: Any, key: str) -> tuple[tuple[int, ...], list[Any]]:
    """Inline values (a number, or nested lists of equal lengths) -> (shape, flat values)."""
    if not isinstance(v, list):
        return (), [v]
    if not v:
        raise fail(key, "expected a non-empty list of values")
    parts = [_nested(x, join(key, i)) for i, x in enumerate(v)]
    shape = parts[0][0]
    for i, (s, _) in enumerate(parts):
        if s != shape:
            raise fail(join(key, i), f"ragged values: shape {list(s)} where the first item "
                                     f"has {list(shape)}")
    return (len(v), *shape), [x for _, flat in parts for x in flat]


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The index of element `flat` of a row-major `shape`."""
    index = []
    for n in reversed(shape):
        flat, i = divmod(flat, n)
        index.append(i)
    return index[::-1]


def _inline(v: Any, key: str, dtype: str | None) -> Fixed:
    """`values:` -> their shape, kind and bytes (floats unless dtype or all-bool says else)."""
    shape, flat = _nested(v, key)
    if dtype is None and all(isinstance(x, bool) for x in flat):
        dtype = "bool"
    kind = "bool" if dtype == "bool" else "int64" if is_integer_dtype(dtype) else "float64"
    for i, x in enumerate(flat):
        where = key + "".join(f"[{j}]" for j in _unravel(i, shape))
        if kind != "bool" and isinstance(x, bool):
            raise fail(where, f"expected a number, got {x!r} (true/false only in a bool "
                              "tensor)")
        if kind == "bool" and not (isinstance(x, bool) or x in (0, 1)):
            raise fail(where, f"expected true, false, 0 or 1, got {shown(x)}")
        if kind == "int64" and not is_int(x):
            raise fail(where, f"expected an integer for {dtype}, got {shown(x)}")
        if kind == "float64":
            parse_number(x, where)
    if kind == "float64":
        data = array("d", [float(x) for x in flat]).tobytes()
    elif kind == "int64":
        low, high = INTEGER_RANGES[dtype or "int64"]
        bad = next((x for x in flat if not low <= x < high), None)
        if bad is not None:
            raise fail(key, f"value {bad} does not fit {dtype} ([{low}, {high}))")
        data = array("q", flat).tobytes()
    else:
        data = bytes(int(x) for x in flat)
    return Fixed(shape, FixedValues(kind, data), dtype)


def _fixed(v: Mapping[str, Any], key: str, dtype: str | None,
           folder: Path | None) -> Fixed | None:
    """The tensor's fixed values (inline or from its file), or None when they are drawn."""
    if "values" in v and "file" in v:
        raise fail(join(key, "file"), "give values or file, not both")
    if "key" in v and "file" not in v:
        raise fail(join(key, "key"), "key picks a tensor from a file: it needs file")
    for name in ("low", "high", "min_abs"):
        if name in v and ("values" in v or "file" in v):
            raise fail(join(key, name), f"{name} shapes random values: it does not apply to "
                                        "fixed values or file")
    if "values" in v:
        return _inline(v["values"], join(key, "values"), dtype)
    if "file" in v:
        return read_tensor_file(v["file"], v.get("key"), key, folder, dtype)
    return None


def _grad_flag(v: Mapping[str, Any], key: str, dtype: str | None) -> bool:
    """requires_grad (or its opposite `const`): true for floating tensors unless said else."""
    if "requires_grad" in v and "const" in v:
        raise fail(join(key, "const"), "give requires_grad or const, not both")
    for name in ("requires_grad", "const"):
        if name in v and not isinstance(v[name], bool):
            raise fail(join(key, name), f"expected true or false, got {shown(v[name])}")
    wants = v["requires_grad"] if "requires_grad" in v else not v.get("const", False)
    if is_integer_dtype(dtype):
        if v.get("requires_grad") is True:
            raise fail(join(key, "requires_grad"), f"{dtype} tensors cannot require grad "
                                                   "(only floating tensors can)")
        return False
    return bool(wants)


def _ranges(v: Mapping[str, Any], key: str, dtype: str | None) -> dict[str, Any]:
    """low/high/min_abs: a float range, integers in [low, high), nothing for a bool mask."""
    if dtype == "bool":
        for name in ("low", "high", "min_abs"):
            if name in v:
                raise fail(join(key, name), f"a bool tensor is a random mask: {name} does not "
                                            "apply")
        return {}
    if is_integer_dtype(dtype):
        assert dtype is not None
        if "min_abs" in v:
            raise fail(join(key, "min_abs"), "min_abs applies to floating tensors only")
        if "high" not in v:
            raise fail(key, f"random {dtype} values need high (integers are drawn from "
                            "[low, high), low 0 by default), or give values or file")
        bounds = []
        for name, default in (("low", 0), ("high", None)):
            b = v.get(name, default)
            if not is_int(b):
                raise fail(join(key, name), f"expected an integer, got {shown(b)}")
            bounds.append(b)
        low, high = bounds
        lo, hi = INTEGER_RANGES[dtype]
        if not lo <= low < high <= hi:
            raise fail(join(key, "high"), f"expected {lo} <= low < high <= {hi} for {dtype}, "
                                          f"got [{low}, {high})")
        return {"low": float(low), "high": float(high)}
    kw = {name: parse_number(v[name], join(key, name)) for name in ("low", "high", "min_abs")
          if name in v}
    if kw.get("low", -1.0) >= kw.get("high", 1.0):
        raise fail(join(key, "high"), "high must be greater than low")
    return kw


def parse_tensor(v: Mapping[str, Any], key: str, folder: Path | None = None) -> TensorArg:
    """A tensor argument from its mapping (see is_tensor_spec); `folder`: where a relative
    `file` is (the spec file's folder; None: the current directory)."""
    unknown = set(v) - TENSOR_KEYS
    if unknown:
        raise fail(join(key, first_unknown(unknown)),
                   "unknown key " + unknown_name("", min(unknown, key=str), sorted(TENSOR_KEYS),
                                                 "tensor keys"))
    dtype = parse_dtype(v["dtype"], join(key, "dtype"), TENSOR_DTYPES) if "dtype" in v else None
    fixed = _fixed(v, key, dtype, folder)
    if fixed is UNREAD:
        return _unread(v, key, dtype)
    if "shape" in v:
        shape = parse_shape(v["shape"], join(key, "shape"), positive=True)
        if fixed is not None and fixed.shape != shape:
            raise fail(join(key, "shape"), f"shape {list(shape)} does not match the values' "
                                           f"shape {list(fixed.shape)}")
    elif fixed is not None:
        shape = fixed.shape
        if any(n == 0 for n in shape):
            raise fail(key, f"the values have an empty shape {list(shape)}")
    else:
        raise fail(key, "a tensor needs shape, values or file")
    if fixed is not None and dtype is None:
        dtype = fixed.dtype
    kw: dict[str, Any] = {"shape": shape, "dtype": dtype,
                          "requires_grad": _grad_flag(v, key, dtype)}
    if fixed is None:
        kw |= _ranges(v, key, dtype)
    else:
        kw["values"] = fixed.values
    kw |= _layout(v, key, shape)
    if "special" in v:
        kw["special"] = _special(v["special"], join(key, "special"), dtype, fixed is not None)
    return TensorArg(**kw)


def _unread(v: Mapping[str, Any], key: str, dtype: str | None) -> TensorArg:
    """A tensor whose file is left unread (gradlab.spec.tensorfile.files_unread): what can be
    checked without its values; the shape checks wait for them."""
    shape = parse_shape(v["shape"], join(key, "shape"), positive=True) if "shape" in v else (1,)
    layout = v.get("layout", "strided" if "strides" in v else "contiguous")
    if layout not in LAYOUTS:
        raise fail(join(key, "layout"), unknown_name("layout", layout, LAYOUTS))
    if "special" in v:
        _special(v["special"], join(key, "special"), dtype, True)
    return TensorArg(shape=shape, dtype=dtype, requires_grad=_grad_flag(v, key, dtype))


def _special(v: Any, key: str, dtype: str | None, fixed: bool) -> tuple[float, ...]:
    """`special: [0, 1]`: finite values the special variant plants (drawn floating tensors)."""
    if is_integer_dtype(dtype) or fixed:
        raise fail(key, "special values are planted in drawn floating tensors only")
    if not isinstance(v, list) or not v:
        raise fail(key, f"expected a list of numbers, got {shown(v)}")
    return tuple(parse_number(x, join(key, k)) for k, x in enumerate(v))

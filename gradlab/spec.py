"""YAML op specs -> validated Targets.  Every error names the file and the key path.

A spec file holds one op (a mapping) or several under `ops:`.  See docs/specs.md for the format.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradlab.errors import LoadError, SpecError, UnknownOpError
from gradlab.model import (
    CHECK_ALIASES,
    CHECKS,
    DEFAULT_TOLERANCES,
    DTYPES,
    LAYOUTS,
    VARIANT_FAMILIES,
    Case,
    OpDef,
    Target,
    TensorArg,
    Tolerance,
    canonical_check,
    canonical_dtype,
    non_overlapping,
)

OP_KEYS = {"op", "function", "reference", "name", "second_order", "dtypes", "devices",
           "tolerances", "checks", "variants", "numerical_dtype", "gradcheck_dtype", "args",
           "kwargs", "cases", "bench", "size1"}
CASE_KEYS = {"name", "args", "kwargs", "size1"}
TENSOR_KEYS = {"shape", "dtype", "requires_grad", "low", "high", "min_abs", "layout", "transpose",
               "strides"}
DEVICES = ("cpu", "cuda")


def _fail(key: str, message: str) -> SpecError:
    return SpecError(message, key=key)


def _join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else key


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(key, f"expected a number, got {v!r}")
    return float(v)


def _shape(v: Any, key: str, *, positive: bool) -> tuple[int, ...]:
    what = "positive" if positive else "non-negative"
    if not isinstance(v, list) or not all(_is_int(n) and (n > 0 if positive else n >= 0)
                                          for n in v):
        raise _fail(key, f"expected a list of {what} ints, got {v!r}")
    return tuple(v)


def _dtype(v: Any, key: str) -> str:
    try:
        return canonical_dtype(str(v))
    except ValueError:
        raise _fail(key, f"unknown dtype {v!r} (expected one of {', '.join(DTYPES)})") from None


def parse_tensor(v: Mapping[str, Any], key: str) -> TensorArg:
    """A tensor argument from its mapping (the mapping has a `shape`)."""
    unknown = set(v) - TENSOR_KEYS
    if unknown:
        raise _fail(_join(key, sorted(unknown)[0]),
                    f"unknown key (tensor keys: {', '.join(sorted(TENSOR_KEYS))})")
    kw: dict[str, Any] = {"shape": _shape(v["shape"], _join(key, "shape"), positive=True)}
    if "dtype" in v:
        kw["dtype"] = _dtype(v["dtype"], _join(key, "dtype"))
    if "requires_grad" in v:
        if not isinstance(v["requires_grad"], bool):
            raise _fail(_join(key, "requires_grad"), f"expected true or false, got "
                                                     f"{v['requires_grad']!r}")
        kw["requires_grad"] = v["requires_grad"]
    for name in ("low", "high", "min_abs"):
        if name in v:
            kw[name] = _number(v[name], _join(key, name))
    if kw.get("low", -1.0) >= kw.get("high", 1.0):
        raise _fail(_join(key, "high"), "high must be greater than low")
    layout = v.get("layout", "strided" if "strides" in v else "contiguous")
    if layout not in LAYOUTS:
        raise _fail(_join(key, "layout"), f"expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    kw["layout"] = layout
    ndim = len(kw["shape"])
    if layout == "channels_last" and ndim != 4:
        raise _fail(_join(key, "layout"), f"channels_last needs a 4-D shape, got {ndim}-D")
    if layout == "transposed":
        if ndim < 2:
            raise _fail(_join(key, "layout"), "transposed needs at least 2 dims")
        t = v.get("transpose", [-2, -1])
        if (not isinstance(t, list) or len(t) != 2 or not all(_is_int(d) and -ndim <= d < ndim
                                                              for d in t)):
            raise _fail(_join(key, "transpose"), f"expected two dims of a {ndim}-D shape, "
                                                 f"got {t!r}")
        kw["transpose"] = tuple(t)
    if layout == "strided":
        if "strides" not in v:
            raise _fail(_join(key, "strides"), "layout strided needs strides")
        strides = _shape(v["strides"], _join(key, "strides"), positive=False)
        if len(strides) != ndim:
            raise _fail(_join(key, "strides"), f"expected {ndim} strides, got {len(strides)}")
        if not non_overlapping(kw["shape"], strides):
            raise _fail(_join(key, "strides"), f"strides {list(strides)} make elements overlap")
        kw["strides"] = strides
    return TensorArg(**kw)


def parse_value(v: Any, key: str) -> Any:
    """A positional argument: a tensor spec (mapping with `shape`), {value: X}, or plain X."""
    if isinstance(v, Mapping):
        if "shape" in v:
            return parse_tensor(v, key)
        if set(v) == {"value"}:
            return v["value"]
        raise _fail(key, "expected a tensor spec (a mapping with 'shape') or {value: ...}, got "
                         f"keys {sorted(v)}")
    return v


def _args(v: Any, key: str) -> tuple[Any, ...]:
    if not isinstance(v, list):
        raise _fail(key, f"expected a list of arguments, got {v!r}")
    return tuple(parse_value(a, _join(key, i)) for i, a in enumerate(v))


def _kwargs(v: Any, key: str) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise _fail(key, f"expected a mapping of keyword arguments, got {v!r}")
    out = {}
    for k, a in v.items():
        value = parse_value(a, _join(key, str(k)))
        if isinstance(value, TensorArg):
            raise _fail(_join(key, str(k)), "tensors must be positional args (in args)")
        out[str(k)] = value
    return out


def _size1(v: Any, key: str, n_args: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """size1: a list of groups, each a list of [arg, dim] pairs shrunk to 1 together."""
    if not isinstance(v, list):
        raise _fail(key, f"expected a list of groups of [arg, dim] pairs, got {v!r}")
    groups = []
    for g, group in enumerate(v):
        if not isinstance(group, list) or not group:
            raise _fail(_join(key, g), f"expected a list of [arg, dim] pairs, got {group!r}")
        pairs = []
        for p, pair in enumerate(group):
            if (not isinstance(pair, list) or len(pair) != 2 or not all(_is_int(n) for n in pair)
                    or not 0 <= pair[0] < n_args):
                raise _fail(_join(_join(key, g), p), f"expected [arg index < {n_args}, dim], "
                                                     f"got {pair!r}")
            pairs.append((pair[0], pair[1]))
        groups.append(tuple(pairs))
    return tuple(groups)


def _cases(entries: Any, key: str, base: Case | None) -> tuple[Case, ...]:
    if not isinstance(entries, list) or not entries:
        raise _fail(key, f"expected a non-empty list of cases, got {entries!r}")
    cases = []
    for i, c in enumerate(entries):
        ck = _join(key, i)
        if not isinstance(c, Mapping):
            raise _fail(ck, f"expected a mapping with name/args/kwargs, got {c!r}")
        unknown = set(c) - CASE_KEYS
        if unknown:
            raise _fail(_join(ck, sorted(unknown)[0]),
                        f"unknown key (case keys: {', '.join(sorted(CASE_KEYS))})")
        if "args" in c:
            args = _args(c["args"], _join(ck, "args"))
        elif base is not None:
            args = base.args
        else:
            raise _fail(ck, "a case needs args (there are no base args to inherit)")
        kwargs = dict(base.kwargs) if base is not None else {}
        if "kwargs" in c:
            kwargs |= _kwargs(c["kwargs"], _join(ck, "kwargs"))
        size1 = _size1(c["size1"], _join(ck, "size1"), len(args)) if "size1" in c else (
            base.size1 if base is not None else ())
        name = str(c.get("name", f"case{i}"))
        cases.append(Case(name, args, kwargs, size1))
    names = [c.name for c in cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise _fail(key, f"case name {dup!r} is used twice")
    return tuple(cases)


def load_object(ref: str, key: str) -> Any:
    """Import `package.module:attr` (attr may be dotted)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise _fail(key, f"expected 'package.module:attr', got {ref!r}")
    module_name, _, attr = ref.partition(":")
    # Specs usually sit next to the user's code: let `module:attr` find it from the cwd.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise _fail(key, f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _fail(key, f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def as_callable(obj: Any) -> Callable[..., Any]:
    """An autograd.Function subclass becomes its `apply`; any other callable stays."""
    import torch

    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        apply: Callable[..., Any] = obj.apply
        return apply
    if not callable(obj):
        raise LoadError(f"{obj!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _list_of(v: Any, key: str, allowed: Sequence[str] | None = None) -> list[str]:
    items = v if isinstance(v, list) else [v]
    if not items or not all(isinstance(x, str) for x in items):
        raise _fail(key, f"expected a list of names, got {v!r}")
    if allowed is not None:
        for i, x in enumerate(items):
            if x not in allowed:
                raise _fail(_join(key, i), f"expected one of {', '.join(allowed)}, got {x!r}")
    return items


def _switches(v: Any, key: str, allowed: Sequence[str]) -> frozenset[str]:
    """A list of names to keep, or a mapping name: true/false over all of `allowed`."""
    if isinstance(v, bool):
        return frozenset(allowed) if v else frozenset()
    if isinstance(v, Mapping):
        keep = set(allowed)
        for name, on in v.items():
            if name not in allowed:
                raise _fail(_join(key, str(name)), f"unknown name (expected one of "
                                                   f"{', '.join(allowed)})")
            if not isinstance(on, bool):
                raise _fail(_join(key, str(name)), f"expected true or false, got {on!r}")
            if not on:
                keep.discard(name)
        return frozenset(keep)
    return frozenset(_list_of(v, key, allowed))


def _aliased(v: Any) -> Any:
    """Check names with former aliases (gradcheck, gradgradcheck) replaced by the current ones."""
    if isinstance(v, str):
        return CHECK_ALIASES.get(v, v)
    if isinstance(v, list):
        return [CHECK_ALIASES.get(x, x) if isinstance(x, str) else x for x in v]
    if isinstance(v, Mapping):
        return {CHECK_ALIASES.get(k, k) if isinstance(k, str) else k: x for k, x in v.items()}
    return v


def _tolerances(v: Any, key: str, base: Mapping[str, Tolerance]) -> dict[str, Tolerance]:
    if not isinstance(v, Mapping):
        raise _fail(key, f"expected a mapping dtype: {{atol, rtol}}, got {v!r}")
    out = dict(base)
    for name, tol in v.items():
        dk = _join(key, str(name))
        dtype = _dtype(name, dk)
        if not isinstance(tol, Mapping) or not set(tol) <= {"atol", "rtol"}:
            raise _fail(dk, f"expected {{atol: X, rtol: Y}}, got {tol!r}")
        old = out.get(dtype, DEFAULT_TOLERANCES[dtype])
        out[dtype] = Tolerance(_number(tol.get("atol", old.atol), _join(dk, "atol")),
                               _number(tol.get("rtol", old.rtol), _join(dk, "rtol")))
    return out


def parse_op(entry: Any, key: str) -> Target:
    """One op mapping -> Target (the key path prefixes every error)."""
    from gradlab import ops

    if not isinstance(entry, Mapping):
        raise _fail(key or "(top level)", f"expected a mapping, got {type(entry).__name__}")
    unknown = set(entry) - OP_KEYS
    if unknown:
        raise _fail(_join(key, sorted(unknown)[0]),
                    f"unknown key (op keys: {', '.join(sorted(OP_KEYS))})")
    if ("op" in entry) == ("function" in entry):
        raise _fail(key or "(top level)", "give exactly one of 'op' (a bundled op) or "
                                          "'function' (package.module:Attr)")
    if "op" in entry:
        try:
            op = ops.load(str(entry["op"]))
        except UnknownOpError as exc:
            raise _fail(_join(key, "op"), str(exc)) from None
        if "reference" in entry:
            op = replace(op, reference=as_callable(load_object(entry["reference"],
                                                                _join(key, "reference"))))
    else:
        fn = as_callable(load_object(entry["function"], _join(key, "function")))
        ref: Callable[..., Any] | None = None
        if "reference" in entry:
            ref = as_callable(load_object(entry["reference"], _join(key, "reference")))
        name = str(entry.get("name", str(entry["function"]).rpartition(":")[2]))
        if "args" not in entry and "cases" not in entry:
            raise _fail(key or "(top level)", "a user function needs args or cases")
        op = OpDef(name=name, summary=str(entry["function"]), function=fn, reference=ref,
                   cases=(), second_order=None)
    if "name" in entry:
        op = replace(op, name=str(entry["name"]))
    if "second_order" in entry:
        so = entry["second_order"]
        if so not in (True, False, "auto"):
            raise _fail(_join(key, "second_order"), f"expected true, false or auto, got {so!r}")
        op = replace(op, second_order=None if so == "auto" else so)
    base: Case | None = None
    if "args" in entry or "kwargs" in entry:
        args = _args(entry.get("args", []), _join(key, "args"))
        kwargs = _kwargs(entry["kwargs"], _join(key, "kwargs")) if "kwargs" in entry else {}
        size1 = _size1(entry["size1"], _join(key, "size1"), len(args)) if "size1" in entry else ()
        base = Case("base", args, kwargs, size1)
    elif op.cases:
        base = op.cases[0]
    if "cases" in entry:
        op = replace(op, cases=_cases(entry["cases"], _join(key, "cases"), base))
    elif "args" in entry or "kwargs" in entry:
        assert base is not None
        op = replace(op, cases=(base,))
    if "bench" in entry:
        op = replace(op, bench_cases=_cases(entry["bench"], _join(key, "bench"), base))
    if "tolerances" in entry:
        op = replace(op, tolerances=_tolerances(entry["tolerances"], _join(key, "tolerances"),
                                                op.tolerances))
    dtypes = (tuple(_dtype(d, _join(_join(key, "dtypes"), i))
                    for i, d in enumerate(_list_of(entry["dtypes"], _join(key, "dtypes"))))
              if "dtypes" in entry else None)
    devices = (tuple(_list_of(entry["devices"], _join(key, "devices"), DEVICES))
               if "devices" in entry else None)
    checks = (frozenset(canonical_check(c) for c in _switches(
        _aliased(entry["checks"]), _join(key, "checks"), CHECKS)) if "checks" in entry else None)
    variants = (_switches(entry["variants"], _join(key, "variants"), VARIANT_FAMILIES)
                if "variants" in entry else None)
    # numerical_dtype, formerly gradcheck_dtype (still accepted)
    nkey = "numerical_dtype" if "numerical_dtype" in entry else "gradcheck_dtype"
    gdtype = _dtype(entry[nkey], _join(key, nkey)) if nkey in entry else "float64"
    return Target(op=op, source="", dtypes=dtypes, devices=devices, checks=checks,
                  variants=variants, numerical_dtype=gdtype)


def parse_document(doc: Any) -> list[Target]:
    """A loaded YAML document -> Targets (errors carry key paths, not the file)."""
    if doc is None:
        raise _fail("(top level)", "the file is empty")
    if isinstance(doc, Mapping) and "ops" in doc:
        extra = set(doc) - {"ops"}
        if extra:
            raise _fail(sorted(extra)[0], "unknown key beside 'ops'")
        entries = doc["ops"]
        if not isinstance(entries, list) or not entries:
            raise _fail("ops", f"expected a non-empty list of ops, got {entries!r}")
        return [parse_op(e, f"ops[{i}]") for i, e in enumerate(entries)]
    if not isinstance(doc, Mapping):
        raise _fail("(top level)", f"expected a mapping (one op) or 'ops: [...]', got "
                                   f"{type(doc).__name__}")
    return [parse_op(doc, "")]


def load_file(path: str | Path) -> list[Target]:
    """Load and validate one YAML spec file."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", source=str(p)) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"invalid YAML: {where}{problem}", source=str(p)) from None
    try:
        targets = parse_document(doc)
    except SpecError as exc:
        raise exc.at(source=str(p)) from None
    except LoadError as exc:
        raise SpecError(str(exc), source=str(p)) from None
    return [replace(t, source=f"{p}" + (f": ops[{i}]" if len(targets) > 1 else ""))
            for i, t in enumerate(targets)]


def resolve(what: str) -> list[Target]:
    """OP name, SPEC.yaml or DIR (every *.yaml / *.yml in it, sorted) -> Targets."""
    from gradlab import ops

    # A bare bundled-op name wins over a same-named folder in the working directory.
    if ops.entry(what) is not None and "/" not in what and not what.endswith((".yaml", ".yml")):
        return [Target(op=ops.load(what), source="bundled")]
    p = Path(what)
    if p.is_dir():
        files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
        if not files:
            raise SpecError("no *.yaml spec files in this folder", source=str(p))
        return [t for f in files for t in load_file(f)]
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise SpecError("no such file", source=str(p))
        return load_file(p)
    if ops.entry(what) is None:
        raise UnknownOpError(f"{what!r} is neither a bundled op ({', '.join(ops.names())}) nor "
                             f"a spec file or folder")
    return [Target(op=ops.load(what), source="bundled")]

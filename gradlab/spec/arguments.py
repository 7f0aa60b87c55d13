"""A spec's arguments and cases: positional args, kwargs, size1 groups, and the cases built on a
base (`args` replace the base's, `kwargs` merge, `set` replaces single arguments).

Every parser takes the key path of what it parses and raises a SpecError naming it; `folder` is
where a tensor's relative `file` is (the spec file's folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradlab.errors import shown, unknown_name
from gradlab.model import Case, TensorArg
from gradlab.spec.tensors import (
    TENSOR_MARKERS,
    is_tensor_spec,
    misspelled_tensor,
    parse_tensor,
)
from gradlab.spec.values import check_finite, fail, first_unknown, is_int, join, key_name

CASE_KEYS = {"name", "args", "kwargs", "size1", "set"}

#: size1: groups of (arg position, dim) pairs shrunk to 1 together.
Size1 = tuple[tuple[tuple[int, int], ...], ...]


def parse_value(v: Any, key: str, folder: Path | None = None) -> Any:
    """A positional argument: a tensor spec (see gradlab.spec.tensors), {value: X}, or plain X."""
    if isinstance(v, Mapping):
        if is_tensor_spec(v):
            return parse_tensor(v, key, folder)
        if set(v) == {"value"}:
            return check_finite(v["value"], join(key, "value"))
        misspelled_tensor(v, key)
        raise fail(key, f"expected a tensor spec (a mapping with {', '.join(TENSOR_MARKERS)}) "
                        f"or {{value: ...}}, got keys {shown(sorted(v, key=str))}")
    return check_finite(v, key)


def parse_args(v: Any, key: str, folder: Path | None = None) -> tuple[Any, ...]:
    """A list of positional arguments."""
    if not isinstance(v, list):
        raise fail(key, f"expected a list of arguments, got {shown(v)}")
    return tuple(parse_value(a, join(key, i), folder) for i, a in enumerate(v))


def parse_kwarg(v: Any, key: str, folder: Path | None = None) -> Any:
    """One keyword argument.  A tensor is passed but never differentiated (the checks take
    gradients of positional tensors only), so it must not ask for grad."""
    value = parse_value(v, key, folder)
    if isinstance(value, TensorArg):
        if isinstance(v, Mapping) and v.get("requires_grad") is True:
            raise fail(join(key, "requires_grad"), "keyword tensors are passed, never "
                                                   "differentiated: put it in args to check "
                                                   "its gradient")
        value = replace(value, requires_grad=False)
    return value


def parse_kwargs(v: Any, key: str, folder: Path | None = None) -> dict[str, Any]:
    """A mapping of keyword arguments (tensors included, see parse_kwarg)."""
    if not isinstance(v, Mapping):
        raise fail(key, f"expected a mapping of keyword arguments, got {shown(v)}")
    out = {}
    for k, a in v.items():
        if not (isinstance(k, str) and k.isidentifier()):
            raise fail(join(key, key_name(k)), "expected a keyword argument name")
        out[k] = parse_kwarg(a, join(key, k), folder)
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


def parse_base(entry: Mapping[str, Any], key: str, folder: Path | None = None) -> Case:
    """The base case of an op mapping: its top-level args, kwargs and size1."""
    args = parse_args(entry.get("args", []), join(key, "args"), folder)
    kwargs = (parse_kwargs(entry["kwargs"], join(key, "kwargs"), folder) if "kwargs" in entry
              else {})
    size1 = parse_size1(entry["size1"], join(key, "size1"), len(args)) if "size1" in entry else ()
    return Case("base", args, kwargs, size1, key=join(key, "args"))


def apply_set(v: Any, key: str, args: tuple[Any, ...], kwargs: dict[str, Any],
              own_kwargs: Mapping[str, Any], folder: Path | None) -> tuple[Any, ...]:
    """`set:` over a case's args and kwargs: an int key replaces the positional argument there,
    a name sets that keyword argument (updating `kwargs`); the args come back."""
    if not isinstance(v, Mapping) or not v:
        raise fail(key, f"expected a mapping of argument positions or keyword names to values, "
                        f"got {shown(v)}")
    new = list(args)
    for k, a in v.items():
        if is_int(k):
            where = join(key, k)
            if not 0 <= k < len(new):
                last = f"0 to {len(new) - 1}" if new else "none"
                raise fail(where, f"no argument at position {k} (the case's positions: {last})")
            new[k] = parse_value(a, where, folder)
        elif isinstance(k, str) and k.isidentifier():
            where = join(key, k)
            if k in own_kwargs:
                raise fail(where, "also given in this case's kwargs: give it once")
            kwargs[k] = parse_kwarg(a, where, folder)
        else:
            raise fail(join(key, key_name(k)), "expected an argument position (0, 1, ...) or a "
                                               "keyword argument name")
    return tuple(new)


def parse_case(c: Any, key: str, index: int, base: Case | None,
               folder: Path | None = None) -> Case:
    """One case mapping; what it leaves out comes from `base` (args replace, kwargs merge, set
    replaces single arguments of either)."""
    if not isinstance(c, Mapping):
        raise fail(key, f"expected a mapping with name/args/kwargs/set, got {shown(c)}")
    unknown = set(c) - CASE_KEYS
    if unknown:
        raise fail(join(key, first_unknown(unknown)),
                   "unknown key " + unknown_name("", min(unknown, key=str), sorted(CASE_KEYS),
                                                 "case keys"))
    if "args" in c:
        args = parse_args(c["args"], join(key, "args"), folder)
    elif base is not None:
        args = base.args
    else:
        raise fail(key, "a case needs args (there are no base args to inherit)")
    kwargs = dict(base.kwargs) if base is not None else {}
    own = parse_kwargs(c["kwargs"], join(key, "kwargs"), folder) if "kwargs" in c else {}
    kwargs |= own
    if "set" in c:
        args = apply_set(c["set"], join(key, "set"), args, kwargs, own, folder)
    size1 = parse_size1(c["size1"], join(key, "size1"), len(args)) if "size1" in c else (
        base.size1 if base is not None else ())
    own_key = next((join(key, k) for k in ("set", "args") if k in c), None)
    return Case(str(c.get("name", f"case{index}")), args, kwargs, size1,
                key=own_key or (base.key if base is not None else key))


def parse_cases(entries: Any, key: str, base: Case | None,
                folder: Path | None = None) -> tuple[Case, ...]:
    """A non-empty list of cases with distinct names."""
    if not isinstance(entries, list) or not entries:
        raise fail(key, f"expected a non-empty list of cases, got {shown(entries)}")
    cases = tuple(parse_case(c, join(key, i), i, base, folder) for i, c in enumerate(entries))
    names = [c.name for c in cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise fail(key, f"case name {shown(dup)} is used twice")
    return cases

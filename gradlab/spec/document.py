"""A loaded YAML document -> Targets: one op mapping, or several under `ops:`.

`op: NAME` starts from what `lookup(NAME)` gives: for the specs gradlab reads, the bundled op with
its bundled spec's cases and base (see gradlab.spec.files); `function: package.module:Attr`
starts from nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from gradlab import ops
from gradlab.errors import UnknownOpError, shown, unknown_name
from gradlab.fileio import size_text
from gradlab.guard import ESTIMATE_DTYPE, tensor_bytes
from gradlab.model import (
    CAPABILITIES,
    CHECKS,
    VARIANT_FAMILIES,
    Case,
    OpDef,
    Target,
    canonical_check,
)
from gradlab.spec.arguments import parse_base, parse_cases
from gradlab.spec.imports import Imports, op_ref, parse_imports, pending
from gradlab.spec.tensors import is_tensor_spec, parse_tensor
from gradlab.spec.values import (
    aliased,
    fail,
    first_unknown,
    is_int,
    join,
    key_name,
    parse_dtype,
    parse_fd_tolerance,
    parse_judgement,
    parse_names,
    parse_number,
    parse_switches,
    parse_tolerances,
)

OP_KEYS = {"op", "function", "reference", "name", "second_order", "dtypes", "devices",
           "tolerances", "checks", "variants", "numerical_dtype", "gradcheck_dtype", "args",
           "kwargs", "cases", "bench", "size1", "requires", "cost_envelope", "import"}
DEVICES = ("cpu", "cuda")

class Start(NamedTuple):
    """What a spec's `op: NAME` starts from."""

    #: the op, with the cases and bench cases a spec without its own inherits;
    op: OpDef
    #: the case a spec without top-level args/kwargs takes them (and size1) from.
    base: Case | None = None


#: NAME -> what `op: NAME` starts from (raises UnknownOpError for unknown names).
OpLookup = Callable[[str], Start]


def module_start(name: str) -> Start:
    """The bundled op's module OpDef alone: no cases, no base (how bundled spec files start)."""
    return Start(ops.lazy(name))


def _bundled_op(entry: Mapping[str, Any], key: str, lookup: OpLookup,
                folder: Path | None) -> Start:
    """`op: NAME`: the looked-up op, with the spec's own reference if it names one."""
    try:
        op, base = lookup(str(entry["op"]))
    except UnknownOpError as exc:
        raise fail(join(key, "op"), str(exc)) from None
    imports = imports_of(entry, key)  # checked whether a reference uses them or not
    if "reference" in entry:
        op = replace(op, reference=pending(entry["reference"], join(key, "reference"), folder,
                                           imports))
    return Start(op, base)


def imports_of(entry: Mapping[str, Any], key: str) -> Imports:
    """The modules a spec's `import:` names, imported before its function and reference (the
    module that registers a torch.library op, say)."""
    return parse_imports(entry["import"], join(key, "import")) if "import" in entry else ()


def default_name(ref: str) -> str:
    """An op's name when the spec gives none: a torch.library op's `namespace::name`, else
    the attribute's name."""
    found = op_ref(ref)
    return found[1] if found is not None else ref.rpartition(":")[2]


def _user_op(entry: Mapping[str, Any], key: str, folder: Path | None) -> OpDef:
    """`function: package.module:Attr` (or a torch.library op, `namespace::name`, with the
    modules `import:` names): a new op, named after Attr (the op's `namespace::name`) unless
    `name` says otherwise
    (its callables imported once the whole spec is valid: gradlab.spec.files.import_callables)."""
    imports = imports_of(entry, key)
    fn = pending(entry["function"], join(key, "function"), folder, imports)
    ref = (pending(entry["reference"], join(key, "reference"), folder, imports)
           if "reference" in entry else None)
    name = str(entry.get("name", default_name(fn.ref)))
    if "args" not in entry and "cases" not in entry:
        raise fail(key or "(top level)", "a user function needs args or cases")
    return OpDef(name=name, summary=str(entry["function"]), function=fn, reference=ref,
                 cases=(), second_order=None)


def _with_facts(op: OpDef, entry: Mapping[str, Any], key: str) -> OpDef:
    """The spec's `name` and `second_order` over the op's."""
    if "name" in entry:
        op = replace(op, name=str(entry["name"]))
    if "second_order" in entry:
        so = entry["second_order"]
        if so not in (True, False, "auto"):
            raise fail(join(key, "second_order"), f"expected true, false or auto, got {shown(so)}")
        op = replace(op, second_order=None if so == "auto" else so)
    return op


def _with_cases(op: OpDef, entry: Mapping[str, Any], key: str, base: Case | None,
                folder: Path | None) -> OpDef:
    """The spec's cases and bench cases; what the spec leaves out stays the op's.

    Cases inherit from the spec's top-level args/kwargs/size1, else from `base`.
    """
    if "args" in entry or "kwargs" in entry:
        base = parse_base(entry, key, folder)
    if "cases" in entry:
        op = replace(op, cases=parse_cases(entry["cases"], join(key, "cases"), base, folder))
    elif "args" in entry or "kwargs" in entry:
        assert base is not None
        op = replace(op, cases=(base,))
    if "bench" in entry:
        op = replace(op, bench_cases=parse_cases(entry["bench"], join(key, "bench"), base,
                                                 folder))
    return op


def _target(op: OpDef, entry: Mapping[str, Any], key: str) -> Target:
    """The Target of `op` with the spec's run settings (dtypes, devices, checks, ...)."""
    dtypes = (tuple(parse_dtype(d, join(join(key, "dtypes"), i))
                    for i, d in enumerate(parse_names(entry["dtypes"], join(key, "dtypes"))))
              if "dtypes" in entry else None)
    devices = (tuple(parse_names(entry["devices"], join(key, "devices"), DEVICES, "device"))
               if "devices" in entry else None)
    checks = (frozenset(canonical_check(c) for c in parse_switches(
        aliased(entry["checks"]), join(key, "checks"), CHECKS, "check"))
        if "checks" in entry else None)
    variants = (parse_switches(entry["variants"], join(key, "variants"), VARIANT_FAMILIES,
                               "variant family") if "variants" in entry else None)
    # numerical_dtype, formerly gradcheck_dtype (still accepted)
    nkey = "numerical_dtype" if "numerical_dtype" in entry else "gradcheck_dtype"
    ndtype = parse_dtype(entry[nkey], join(key, nkey)) if nkey in entry else "float64"
    requires = (frozenset(parse_names(entry["requires"], join(key, "requires"), CAPABILITIES,
                                      "capability")) if "requires" in entry else frozenset())
    return Target(op=op, source="", dtypes=dtypes, devices=devices, checks=checks,
                  variants=variants, numerical_dtype=ndtype, requires=requires,
                  cost_envelope=envelope_factor(entry, key))


def envelope_factor(entry: Mapping[str, Any], key: str) -> float | None:
    """`cost_envelope: 20`: how many times longer than the base case a variant may run (0:
    never stopped); None when the spec does not say."""
    if "cost_envelope" not in entry:
        return None
    factor = parse_number(entry["cost_envelope"], join(key, "cost_envelope"))
    if factor != 0 and factor < 1:
        raise fail(join(key, "cost_envelope"), f"expected a factor >= 1 (0: never stop a "
                                               f"variant), got {factor:g}")
    return factor


def parse_op(entry: Any, key: str, lookup: OpLookup, folder: Path | None = None) -> Target:
    """One op mapping -> Target (the key path prefixes every error); `folder` is the spec
    file's (where `function:` modules and tensor files are looked for first)."""
    if not isinstance(entry, Mapping):
        raise fail(key or "(top level)", f"expected a mapping, got {type(entry).__name__}")
    unknown = set(entry) - OP_KEYS
    if unknown:
        raise fail(join(key, first_unknown(unknown)),
                   "unknown key " + unknown_name("", min(unknown, key=str), sorted(OP_KEYS),
                                                 "op keys"))
    if ("op" in entry) == ("function" in entry):
        raise fail(key or "(top level)", "give exactly one of 'op' (a bundled op) or "
                                         "'function' (package.module:Attr)")
    op, base = (_bundled_op(entry, key, lookup, folder) if "op" in entry
                else Start(_user_op(entry, key, folder)))
    op = _with_cases(_with_facts(op, entry, key), entry, key, base, folder)
    if "tolerances" in entry:
        tk = join(key, "tolerances")
        op = replace(op, tolerances=parse_tolerances(entry["tolerances"], tk, op.tolerances),
                     fd_tolerance=parse_fd_tolerance(entry["tolerances"], tk, op.fd_tolerance),
                     **parse_judgement(entry["tolerances"], tk))
    return _target(op, entry, key)


def parse_targets(doc: Any, lookup: OpLookup, folder: Path | None = None) -> list[Target]:
    """A loaded YAML document -> Targets (errors carry key paths, not the file); `folder`: the
    spec file's, None for a document from elsewhere (the current directory then)."""
    if doc is None:
        raise fail("(top level)", "the file is empty")
    if isinstance(doc, Mapping) and "ops" in doc:
        extra = set(doc) - {"ops"}
        if extra:
            raise fail(first_unknown(extra), "unknown key beside 'ops'")
        entries = doc["ops"]
        if not isinstance(entries, list) or not entries:
            raise fail("ops", f"expected a non-empty list of ops, got {shown(entries)}")
        return [parse_op(e, f"ops[{i}]", lookup, folder) for i, e in enumerate(entries)]
    if not isinstance(doc, Mapping):
        raise fail("(top level)", f"expected a mapping (one op) or 'ops: [...]', got "
                                  f"{type(doc).__name__}")
    return [parse_op(doc, "", lookup, folder)]


#: (key path, raw value) of one argument in a document.
Found = tuple[str, Any]


def check_memory(doc: Any, limit: int) -> None:
    """Refuse, at its key path, a case whose tensors need more than `limit` bytes (see
    gradlab.guard).  Runs on a document parse_targets accepted, before anything is allocated.

    Tensors read from a file are left out: MAX_TENSOR_FILE_BYTES bounds them."""
    many = isinstance(doc, Mapping) and "ops" in doc
    for i, entry in enumerate(doc["ops"] if many else [doc]):
        key = f"ops[{i}]" if many else ""
        args = _found_args(entry.get("args"), join(key, "args"))
        kwargs = _found_kwargs(entry.get("kwargs"), join(key, "kwargs"))
        _check_args([*args, *kwargs.values()], join(key, "args"), limit)
        for part in ("cases", "bench"):
            for j, c in enumerate(entry.get(part) or []):
                if isinstance(c, Mapping):
                    _check_case(c, join(join(key, part), j), args, kwargs, limit)


def _found_args(args: Any, key: str) -> list[Found]:
    return [(join(key, i), a) for i, a in enumerate(args)] if isinstance(args, list) else []


def _found_kwargs(kwargs: Any, key: str) -> dict[str, Found]:
    return ({str(k): (join(key, key_name(k)), a) for k, a in kwargs.items()}
            if isinstance(kwargs, Mapping) else {})


def _check_case(c: Mapping[str, Any], key: str, base_args: list[Found],
                base_kwargs: dict[str, Found], limit: int) -> None:
    """One case's tensors, its own args or the base's with its kwargs and `set` over them."""
    args = _found_args(c["args"], join(key, "args")) if "args" in c else list(base_args)
    kwargs = base_kwargs | _found_kwargs(c.get("kwargs"), join(key, "kwargs"))
    changes = c.get("set")
    for k, a in (changes.items() if isinstance(changes, Mapping) else ()):
        if is_int(k) and 0 <= k < len(args):
            args[k] = (join(join(key, "set"), k), a)
        elif isinstance(k, str):
            kwargs[k] = (join(join(key, "set"), k), a)
    _check_args([*args, *kwargs.values()], join(key, "args") if set(c) <= {"name", "args"}
                else key, limit)


def _check_args(args: list[Found], key: str, limit: int) -> None:
    """One case's arguments against the limit: names the one tensor over it, else `key`."""
    sizes = [(join(where, "shape" if "shape" in a else "values"),
              tensor_bytes(parse_tensor(a, where))) for where, a in args
             if is_tensor_spec(a) and "file" not in a]
    total = sum(n for _, n in sizes)
    if total <= limit:
        return
    where, most = max(sizes, key=lambda s: s[1])
    if most > limit:
        raise fail(where, f"needs {size_text(most)} for {ESTIMATE_DTYPE}, more "
                                         f"than the {size_text(limit)} limit")
    raise fail(key, f"its tensors need {size_text(total)} for {ESTIMATE_DTYPE}, more than the "
                    f"{size_text(limit)} limit")

"""Spec files -> Targets: a YAML file, a folder of them, or a bundled op's own spec file.

A bundled op's cases live only in its spec file, gradlab/specs/NAME.yaml (package data): the bare
name `NAME` loads that file, and a spec saying `op: NAME` without args or cases inherits its cases
and bench cases (`bundled_start`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gradlab import ops
from gradlab.errors import LoadError, SpecError, UnknownOpError, unknown_name
from gradlab.guard import default_limit
from gradlab.model import Case, OpDef, Target
from gradlab.spec.arguments import parse_base
from gradlab.spec.document import OpLookup, Start, check_memory, module_start, parse_targets
from gradlab.spec.imports import Pending
from gradlab.spec.reader import read_document, read_yaml
from gradlab.spec.tensorfile import files_unread


def bundled_source(name: str) -> str:
    """How a bundled spec file is named in targets and errors."""
    return f"gradlab/{ops.SPEC_FOLDER}/{name}.yaml"


def parse_spec(doc: Any, source: str, lookup: OpLookup, max_memory: int | None = None,
               folder: Path | None = None, imports: bool = True) -> list[Target]:
    """Validate the YAML document read from `source` (errors and targets name it); a case
    whose tensors need more than `max_memory` bytes (default: gradlab.guard.default_limit())
    is an error too.  `folder`: the spec file's (modules and tensor files are looked for there
    first).  Nothing imports torch until the whole document is valid: tensor files are read
    on a second pass (gradlab.spec.tensorfile.files_unread), and the modules `function:` and
    `reference:` name are imported last; with `imports=False` not at all (import_callables
    does it later)."""
    try:
        with files_unread() as unread:  # no torch until the whole document is valid
            targets = parse_targets(doc, lookup, folder)
        check_memory(doc, default_limit() if max_memory is None else max_memory)
        if unread:  # again, with the tensors read from files (their shapes checked)
            targets = parse_targets(doc, lookup, folder)
    except SpecError as exc:
        # An error in an inherited bundled spec already names its own file.
        raise (exc if exc.source else exc.at(source=source)) from None
    except LoadError as exc:
        raise SpecError(str(exc), source=source) from None
    targets = [replace(t, op=_sourced(t.op, source),
                       source=source + (f": ops[{i}]" if len(targets) > 1 else ""))
               for i, t in enumerate(targets)]
    return import_callables(targets) if imports else targets


def _sourced(op: OpDef, source: str) -> OpDef:
    """`op` with its Pending callables naming the file they came from."""
    def named(fn: Any) -> Any:
        return fn.at(source) if isinstance(fn, Pending) else fn

    return replace(op, function=named(op.function), reference=named(op.reference))


def look_up_callables(targets: list[Target]) -> None:
    """A SpecError naming file and key for a module or attribute a spec names that is certainly
    missing, found without importing anything (Pending.look_up): before torch or a worker."""
    for t in targets:
        for fn in (t.op.function, t.op.reference):
            if isinstance(fn, Pending):
                fn.look_up()


def import_callables(targets: list[Target]) -> list[Target]:
    """`targets` with the modules their specs name imported (Pending -> the callable); an
    import error, or an attribute the module lacks, is a SpecError naming file and key."""
    def loaded(fn: Any) -> Any:
        return fn.load() if isinstance(fn, Pending) else fn

    return [replace(t, op=replace(t.op, function=loaded(t.op.function),
                                  reference=loaded(t.op.reference))) for t in targets]


def bundled_document(name: str) -> Any:
    """The YAML document of bundled op `name`'s spec file."""
    source = bundled_source(name)
    try:
        text = ops.spec_file(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", source=source) from None
    return read_yaml(text, source)


def load_bundled(name: str, max_memory: int | None = None) -> list[Target]:
    """The targets of bundled op `name`'s spec file (what `gradlab check NAME` runs)."""
    # `op: NAME` in the bundled file itself starts from the module's OpDef: no recursion.
    return parse_spec(bundled_document(name), bundled_source(name), module_start, max_memory)


@functools.cache
def bundled_start(name: str) -> Start:
    """What `op: NAME` starts from: the op with its spec file's cases and bench cases, and as
    base the spec file's top-level args/kwargs/size1, else its first case's args alone."""
    doc = bundled_document(name)
    (target, *_) = parse_spec(doc, bundled_source(name), module_start)
    op = replace(ops.lazy(name), cases=target.op.cases, bench_cases=target.op.bench_cases)
    if isinstance(doc, Mapping) and ("args" in doc or "kwargs" in doc):
        return Start(op, parse_base(doc, ""))
    return Start(op, Case("base", op.cases[0].args) if op.cases else None)


def bundled_op(name: str) -> OpDef:
    """Bundled op `name` with the cases and bench cases of its spec file."""
    return bundled_start(name).op


def parse_document(doc: Any) -> list[Target]:
    """A loaded YAML document -> Targets (errors carry key paths, not the file).

    `op: NAME` without args or cases inherits the cases of the bundled spec of NAME.
    """
    return import_callables(parse_targets(doc, bundled_start))


def load_file(path: str | Path, max_memory: int | None = None,
              imports: bool = True) -> list[Target]:
    """Load and validate one YAML spec file (within the limits of gradlab.spec.reader; a case
    needing more than `max_memory` bytes is refused; `imports`: see parse_spec)."""
    p = Path(path)
    return parse_spec(read_document(p, str(p)), str(p), bundled_start, max_memory,
                      p.resolve().parent, imports)


def resolve(what: str, max_memory: int | None = None, imports: bool = True) -> list[Target]:
    """OP name, SPEC.yaml or DIR (every *.yaml / *.yml in it, sorted) -> Targets.

    max_memory: refuse a case whose tensors need more bytes (default: a fraction of the
    available memory, gradlab.guard.default_limit); imports=False: every file validated, no
    module imported (import_callables, once they all are: a spec error comes in milliseconds)."""
    # A bare bundled-op name wins over a same-named folder in the working directory.
    if ops.entry(what) is not None and "/" not in what and not what.endswith((".yaml", ".yml")):
        return load_bundled(what, max_memory)
    p = Path(what)
    if p.is_dir():
        files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
        if not files:
            raise SpecError("no *.yaml spec files in this folder", source=str(p))
        targets = [t for f in files for t in load_file(f, max_memory, imports=False)]
        return import_callables(targets) if imports else targets
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise SpecError("no such file", source=str(p))
        return load_file(p, max_memory, imports)
    raise UnknownOpError(unknown_name("op", what, ops.names(), "bundled ops") +
                         ", and no spec file or folder of that name")

"""Recorded ops as a spec folder: one YAML file per op (its cases: the recorded signatures),
their tensors in `tensors/`, and the modules that make a script's or a checkout's Functions
importable (`gradlab_recorded_*.py`, see gradlab.record.shim).

A spec written here names no `reference:`: `gradlab check DIR` runs what runs without one
(finite differences, the variants against the Function's own run), and a reference can be
added to the YAML by hand.  Tensors are saved contiguous with their values; a recorded
non-contiguous layout is the spec's `strides:`/`layout:` (an overlapping one, such as an
expanded tensor's, cannot be: the case says so in a comment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gradlab.fileio import atomic_write, atomic_write_with, safe_name
from gradlab.model import non_overlapping
from gradlab.record.merge import SPEC_FLOATS, Call, OpRecord

SHIM_PREFIX = "gradlab_recorded_"
TENSORS = "tensors"


@dataclass
class Written:
    """What a spec folder got: spec files, and per op the calls replayed as cases."""

    specs: list[Path] = field(default_factory=list)
    #: op name -> (spec file, cases written)
    cases: dict[str, tuple[str, int]] = field(default_factory=dict)
    shims: dict[str, str] = field(default_factory=dict)  # source file -> shim module
    stems: set[str] = field(default_factory=set)


def flow(v: Any) -> str:
    """One YAML value on one line."""
    return yaml.safe_dump(v, default_flow_style=True, width=math.inf,
                          sort_keys=False).strip().removesuffix("\n...").strip()


def call_dtype(call: Call) -> str | None:
    """The dtype a call runs in: its first differentiated floating tensor's, else its first
    floating tensor's; None without floating tensors."""
    floats = [a for a in [*call.args, *call.kwargs.values()] if a.get("dtype") in SPEC_FLOATS]
    wanted = [a for a in floats if a["requires_grad"]] or floats
    return str(wanted[0]["dtype"]) if wanted else None


def tensor_yaml(a: dict[str, Any], key: str, file: str, dtype: str | None, keyword: bool,
                notes: list[str]) -> dict[str, Any]:
    """A recorded tensor as a spec's tensor mapping (values from `file`, picked by `key`)."""
    out: dict[str, Any] = {"file": file, "key": key}
    floating = a["dtype"] in SPEC_FLOATS
    if (floating and a["dtype"] != dtype) or (not floating and a["dtype"] != "int64"):
        out["dtype"] = a["dtype"]
    if floating and not a["requires_grad"] and not keyword:
        out["requires_grad"] = False
    shape, strides = list(a["shape"]), list(a["strides"])
    contiguous = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    if any(s != c for s, c, n in zip(strides, contiguous, shape, strict=True) if n > 1):
        if len(shape) == 4 and strides == channels_last(shape):
            out["layout"] = "channels_last"
        elif non_overlapping(shape, tuple(strides)) and min(strides, default=1) > 0:
            out["strides"] = strides
        else:
            notes.append(f"{key} was recorded with overlapping strides {strides} (an expanded "
                         f"tensor): replayed contiguous, the expanded variant feeds stride 0")
    return out


def channels_last(shape: list[int]) -> list[int]:
    _, c, h, w = shape
    return [h * w * c, 1, w * c, c]


def case_lines(op: OpRecord, call: Call, k: int, stem: str, folder: Path,
               dtype: str | None) -> list[str]:
    """One case of the spec: its tensors saved to tensors/STEM-K.pt, its YAML lines."""
    import torch

    file = f"{TENSORS}/{stem}-{k}.pt"
    tensors: dict[str, Any] = {}
    notes: list[str] = []

    def arg(a: dict[str, Any], key: str, keyword: bool) -> str:
        if "tensor" in a:
            tensors[key] = a["tensor"]
            return flow(tensor_yaml(a, key, file, dtype, keyword, notes))
        v = a["value"]
        return flow({"value": v} if isinstance(v, dict) else v)

    if op.info.get("backward") is not False and not any(
            a.get("requires_grad") for a in call.args if a.get("dtype") in SPEC_FLOATS):
        notes.append("recorded with no tensor requiring grad: its floating tensors are "
                     "differentiated here (`requires_grad: false` on one keeps it constant)")
        call = Call(call.signature, [{**a, "requires_grad": True} if "tensor" in a else a
                                     for a in call.args], call.kwargs)
    args = [arg(a, f"a{i}", False) for i, a in enumerate(call.args)]
    kwargs = [f"{name}: {arg(a, f'k_{name}', True)}" for name, a in call.kwargs.items()]
    if tensors:
        atomic_write_with(folder / file, lambda f: torch.save(tensors, f))
    lines = [f"  # signature {k} of {op.name}: {note}" for note in notes]
    lines += [f"  - name: call{k}", "    args:" if args else "    args: []"]
    lines += [f"      - {a}" for a in args]
    if kwargs:
        lines += ["    kwargs:", *(f"      {kw}" for kw in kwargs)]
    return lines


def function_ref(op: OpRecord, folder: Path, written: Written) -> str:
    """The spec's `function:` for `op`: its module and name, through a shim module in the
    folder unless the module is installed."""
    info = op.info
    if info["how"] == "installed":
        return f"{info['module']}:{info['qualname']}"
    source = str(info["file"])
    if source not in written.shims:
        written.shims[source] = write_shim(info, folder, set(written.shims.values()))
    return f"{written.shims[source]}:{info['qualname']}"


def write_shim(info: dict[str, Any], folder: Path, taken: set[str]) -> str:
    """A module in the folder that exposes what `info`'s source file defines."""
    stem = safe_name(Path(info["file"]).stem).replace("-", "_").replace(".", "_")
    name, n = f"{SHIM_PREFIX}{stem}", 2
    while name in taken:
        name, n = f"{SHIM_PREFIX}{stem}_{n}", n + 1
    what = ("a script, run without its `if __name__ == \"__main__\":` block"
            if info["how"] == "script" else f"module {info['module']}")
    text = (f'"""Written by gradlab record: what the specs in this folder name from\n'
            f"{info['file']}\n({what}).\"\"\"\n\n"
            "from gradlab.record.shim import expose\n\n"
            f"expose(globals(), how={info['how']!r}, module={info['module']!r},\n"
            f"       file={info['file']!r}, root={info.get('root')!r})\n")
    atomic_write(folder / f"{name}.py", text)
    return name


def group_by_run(calls: list[Call]) -> dict[tuple[str | None, str], list[Call]]:
    """Calls grouped by what one spec op runs them in: dtype and device."""
    groups: dict[tuple[str | None, str], list[Call]] = {}
    for call in calls:
        devices = {a["device"].partition(":")[0] for a in [*call.args, *call.kwargs.values()]
                   if "device" in a}
        groups.setdefault((call_dtype(call), min(devices, default="cpu")), []).append(call)
    return groups


def header(op: OpRecord, command: str) -> list[str]:
    info = op.info
    where = f" from {info['file']}" if info.get("file") else ""
    return [f"# Recorded by gradlab record: {command}",
            f"# {op.kind} {op.name}{where}: {op.calls} calls, "
            f"{sum(not c.unreplayable for c in op.stored)} distinct signatures replayed",
            "# Add `reference: module:function` (the same math in plain autograd) to check "
            "forward values and gradients against it."]


def op_entry(op: OpRecord, ref: str, dtype: str | None, device: str, many: bool) -> list[str]:
    """An op mapping's keys before its cases (indented under `ops:` when `many`)."""
    name = str(op.info["qualname"]).rpartition(".")[2]
    if many:
        name = f"{name}_{dtype or 'nofloat'}_{device}"
    lines = [f"function: {ref}", f"name: {flow(name)}"]
    if dtype is not None:
        lines.append(f"dtypes: [{dtype}]")
    if device != "cpu":
        lines.append(f"devices: [{device}]")
    lines.append("cases:")
    return lines


def file_stem(op: OpRecord, written: Written) -> str:
    """The op's file name: its own name, with its module's when another op has that name."""
    stem = safe_name(op.name.rpartition("::" if op.kind == "custom_op" else ":")[2])
    if stem in written.stems:
        stem = safe_name(op.name.replace("::", ".").replace(":", ".").lstrip("_"))
    written.stems.add(stem)
    return stem


def write_op(op: OpRecord, folder: Path, command: str, written: Written) -> Path | None:
    """The spec file of one op (None when none of its calls can be replayed)."""
    calls = [c for c in op.stored if not c.unreplayable]
    if op.unreplayable or not calls:
        return None
    ref = function_ref(op, folder, written)
    stem = file_stem(op, written)
    path = folder / f"{stem}.yaml"
    groups = group_by_run(calls)
    many = len(groups) > 1
    lines = header(op, command) + (["ops:"] if many else [])
    k = 0
    for (dtype, device), members in groups.items():
        entry = op_entry(op, ref, dtype, device, many)
        block: list[str] = []
        for call in members:
            k += 1
            block += case_lines(op, call, k, stem, folder, dtype)
        if many:
            entry = [f"  - {entry[0]}", *(f"    {e}" for e in entry[1:])]
            block = [f"  {b}" for b in block]
        lines += entry + block
    atomic_write(path, "\n".join(lines) + "\n")
    written.specs.append(path)
    written.cases[op.name] = (path.name, k)
    return path


def write_specs(ops: list[OpRecord], folder: Path, command: str) -> Written:
    """Every replayable op of `ops` as a spec file in `folder`."""
    (folder / TENSORS).mkdir(parents=True, exist_ok=True)
    written = Written()
    for op in ops:
        write_op(op, folder, command, written)
    return written

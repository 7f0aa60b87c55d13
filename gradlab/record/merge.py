"""The raw files of a recorded command's processes (gradlab.record.hook) read back as data.

Each process wrote its stored calls (`raw/<pid>-<n>.pt`) and, at exit, its counts
(`raw/<pid>-counts.pt`).  Here they become one `OpRecord` per op: its calls counted over every
process, its distinct signatures (the first `max_signatures`, in the order they were stored),
the calls left out and why, and why a call cannot be replayed.  Nothing is dropped silently: a
call left out is counted with its reason, one that cannot be replayed is listed with its.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Dtypes a spec's tensor can have (gradlab.model's floating and integer ones).
SPEC_FLOATS = ("float64", "float32", "float16", "bfloat16")
SPEC_INTEGERS = ("int64", "int32", "int16", "int8", "uint8", "bool")
RAW_CALL = re.compile(r"(\d+)-(\d+)\.pt")


@dataclass
class Call:
    """One stored call: its signature and arguments (see hook.entry)."""

    signature: str
    args: list[dict[str, Any]]
    kwargs: dict[str, dict[str, Any]]
    #: why it cannot be replayed ("" when it can)
    unreplayable: str = ""


@dataclass
class OpRecord:
    """One op's calls over every process of the command."""

    info: dict[str, Any]
    calls: int = 0
    #: reason -> calls left out for it (over the signature limit, over the size cap, ...)
    left_out: dict[str, int] = field(default_factory=dict)
    stored: list[Call] = field(default_factory=list)
    #: why no call of this op can be replayed ("" when they can)
    unreplayable: str = ""

    @property
    def name(self) -> str:
        return str(self.info["name"])

    @property
    def kind(self) -> str:
        return str(self.info["kind"])


def load(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def read_raw(raw: Path, max_signatures: int) -> tuple[list[OpRecord], list[str]]:
    """The ops recorded under `raw`, in the order first stored, and the processes' errors."""
    ops: dict[str, OpRecord] = {}
    calls = sorted((p for p in raw.glob("*.pt") if RAW_CALL.fullmatch(p.name)),
                   key=lambda p: tuple(int(x) for x in RAW_CALL.fullmatch(p.name).groups()))
    for path in calls:
        rec = load(path)
        op = ops.setdefault(rec["op"]["name"], OpRecord(rec["op"]))
        if any(c.signature == rec["signature"] for c in op.stored):
            continue  # one signature stored by two processes
        if len(op.stored) >= max_signatures:
            reason = f"over the limit of {max_signatures} signatures per op"
            op.left_out[reason] = op.left_out.get(reason, 0) + 1
            continue
        op.stored.append(Call(rec["signature"], rec["args"], rec["kwargs"]))
    for path in sorted(raw.glob("*-counts.pt")):
        for c in load(path):
            op = ops.setdefault(c["op"]["name"], OpRecord(c["op"]))
            op.calls += int(c["calls"])
            for reason, n in c["left_out"].items():
                op.left_out[reason] = op.left_out.get(reason, 0) + int(n)
    errors = [f"process {p.name.partition('-')[0]}: {p.read_text(errors='replace').strip()}"
              for p in sorted(raw.glob("*-error.txt"))]
    records = list(ops.values())
    for op in records:
        op.calls = max(op.calls, len(op.stored))  # a process killed before its counts
        judge(op)
    return records, errors


def judge(op: OpRecord) -> None:
    """Set why `op`, or each of its stored calls, cannot be replayed."""
    info = op.info
    if info.get("unreplayable"):
        op.unreplayable = str(info["unreplayable"])
    elif info.get("how") == "script":
        op.unreplayable = script_problem(Path(info["file"]))
    for call in op.stored:
        call.unreplayable = call_problem(call)


def call_problem(call: Call) -> str:
    """Why a stored call's arguments cannot be a spec's case ("" when they can)."""
    named = [(f"argument {i}", a) for i, a in enumerate(call.args)]
    named += [(f"keyword {k}", a) for k, a in call.kwargs.items()]
    for where, a in named:
        if "unreplayable" in a:
            return f"{where} is {a['unreplayable']}"
        if "dtype" in a:
            if a["dtype"] not in (*SPEC_FLOATS, *SPEC_INTEGERS):
                return f"{where} is a {a['dtype']} tensor (a spec takes {', '.join(SPEC_FLOATS)}"\
                       f" and integer or bool tensors)"
            if a["device"].partition(":")[0] not in ("cpu", "cuda"):
                return f"{where} is on device {a['device']} (a spec runs on cpu or cuda)"
    devices = {a["device"].partition(":")[0] for _, a in named if "device" in a}
    if len(devices) > 1:
        return f"its tensors are on several devices ({', '.join(sorted(devices))})"
    return ""


#: Statements a script may run at import and still be imported to replay its Functions.
DEFINING = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
            ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Pass)


def main_guard(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`"""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in test.comparators))


def defining(nodes: list[ast.stmt]) -> ast.stmt | None:
    """The first statement of `nodes` that does work at import (None: they only define)."""
    for node in nodes:
        if isinstance(node, DEFINING) or main_guard(node):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, (ast.If, ast.Try)):
            parts = [*node.body, *node.orelse]
            if isinstance(node, ast.Try):
                parts += [*node.finalbody, *(s for h in node.handlers for s in h.body)]
            inner = defining(parts)
            if inner is None:
                continue
            return inner
        return node
    return None


def script_problem(path: Path) -> str:
    """Why a script's Functions cannot be imported from it ("" when they can): importing it
    runs its top level, which must only define things (the program under
    `if __name__ == "__main__":` does not run on import)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return f"defined in the script {path}, which cannot be read again: {exc}"
    node = defining(tree.body)
    if node is None:
        return ""
    text = ast.get_source_segment(path.read_text(encoding="utf-8"), node) or ""
    first = text.splitlines()[0][:60] if text else type(node).__name__
    return (f"defined in the script {path}, whose line {node.lineno} ({first!r}) runs at "
            f"import: importing it to replay a call would run the program (put that under "
            f"`if __name__ == \"__main__\":`)")

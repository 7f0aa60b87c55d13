"""`gradlab record`'s end summary: plain lines for stderr, after the command's own output."""

from __future__ import annotations

from typing import Any


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def status_text(status: int) -> str:
    import signal

    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return "not found (exit 127)" if status == 127 else f"exit code {status}"


def record_lines(done: Any, folder: str) -> list[str]:
    """What was recorded, per op: calls, cases written, calls left out or not replayable and
    why; then where the specs are and how to check them."""
    ops = done.ops
    cases = sum(n for _, n in done.written.cases.values())
    lines = [f"gradlab record: the command ended: {status_text(done.status)}; "
             f"{plural(len(ops), 'op')} called, {plural(cases, 'case')} written to {folder}"]
    for op in ops:
        spec, n = done.written.cases.get(op.name, ("", 0))
        where = f" -> {spec} ({plural(n, 'case')})" if spec else ""
        lines.append(f"  {op.kind} {op.name}: {plural(op.calls, 'call')}{where}")
        lines += [f"    not recorded: {plural(k, 'call')}: {reason}"
                  for reason, k in op.left_out.items()]
        if op.unreplayable:
            lines.append(f"    not replayable: {op.unreplayable}")
        lines += [f"    not replayable: signature {i}: {c.unreplayable}"
                  for i, c in enumerate(op.stored, 1) if c.unreplayable]
    lines += [f"  recorder error in {e}" for e in done.errors]
    if done.written.specs:
        lines.append(f"check them: gradlab check {folder}  (what could not be replayed: "
                     f"{folder}/record/unreplayable.yaml)")
    elif not ops:
        lines.append("  no custom autograd.Function or torch.library op was called (a Python "
                     "started with -I or -E does not load the recorder)")
    return lines

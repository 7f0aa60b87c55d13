"""Running a recorded command: its environment, its signals, its exit status; then the folder.

The command runs as a child with this process's stdin, stdout and stderr (its output reaches
them unchanged); its Python processes get the recorder through `boot/sitecustomize.py` on
PYTHONPATH (see there).  While it runs, Ctrl-C reaches it from the terminal as it would
without gradlab (this process ignores SIGINT), and SIGTERM/SIGHUP sent to this process are
passed on to it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gradlab.fileio import atomic_write
from gradlab.record import merge, specs

HERE = Path(__file__).resolve().parent
BOOT = HERE / "boot"
#: The default limits: distinct signatures kept per op, and bytes of tensors per call (a
#: test's tensors are small; a training step's activations are what 4 MiB leaves out).
MAX_SIGNATURES = 3
MAX_BYTES = 4 << 20
RECORD = "record"
PASSED_ON = (signal.SIGTERM, signal.SIGHUP)


def recorder_env(folder: Path, max_signatures: int, max_bytes: int,
                 env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's) with the recorder switched on for `folder`."""
    out = dict(os.environ if env is None else env)
    path = out.get("PYTHONPATH", "")
    out["PYTHONPATH"] = f"{BOOT}{os.pathsep}{path}" if path else str(BOOT)
    out["GRADLAB_RECORD_DIR"] = str(folder.resolve() / RECORD)
    out["GRADLAB_RECORD_LIB"] = str(HERE)
    out["GRADLAB_RECORD_MAX_SIGNATURES"] = str(max_signatures)
    out["GRADLAB_RECORD_MAX_BYTES"] = str(max_bytes)
    return out


@contextmanager
def signals_to(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGINT ignored here (the terminal sends it to the child too), SIGTERM/SIGHUP passed on."""
    def pass_on(signum: int, frame: Any) -> None:
        proc.send_signal(signum)

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, *PASSED_ON)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in PASSED_ON:
        signal.signal(s, pass_on)
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def run_command(command: Sequence[str], env: dict[str, str]) -> int:
    """The command's exit status: its code, or minus the signal that ended it; 127 when it
    cannot be started (a shell's code)."""
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError:
        return 127
    with signals_to(proc):
        return proc.wait()


@dataclass
class Recorded:
    """A recorded command: its status, its ops, and what the folder got."""

    status: int
    ops: list[merge.OpRecord]
    written: specs.Written
    errors: list[str] = field(default_factory=list)


def finish(folder: Path, command: str, status: int, max_signatures: int) -> Recorded:
    """The raw calls under `folder/record/raw` as spec files, the record's own files written
    (record/summary.yaml, record/unreplayable.yaml), the raw files removed."""
    raw = folder / RECORD / "raw"
    ops, errors = merge.read_raw(raw, max_signatures) if raw.is_dir() else ([], [])
    written = specs.write_specs(ops, folder, command)
    done = Recorded(status, ops, written, errors)
    atomic_write(folder / RECORD / "summary.yaml", yaml.safe_dump(summary(done), sort_keys=False))
    atomic_write(folder / RECORD / "unreplayable.yaml",
                 yaml.safe_dump(unreplayable(ops), sort_keys=False))
    shutil.rmtree(raw, ignore_errors=True)
    return done


def summary(done: Recorded) -> dict[str, Any]:
    """The record as plain data: per op its calls, cases written and calls left out."""
    return {"exit_status": done.status, "errors": done.errors, "ops": [
        {"op": op.name, "kind": op.kind, "calls": op.calls,
         "spec": done.written.cases.get(op.name, (None, 0))[0],
         "cases": done.written.cases.get(op.name, (None, 0))[1],
         "left_out": dict(op.left_out),
         "unreplayable": op.unreplayable or sorted({c.unreplayable for c in op.stored
                                                     if c.unreplayable})}
        for op in done.ops]}


def unreplayable(ops: list[merge.OpRecord]) -> list[dict[str, Any]]:
    """Every op or call that cannot be replayed, with its reason."""
    out: list[dict[str, Any]] = []
    for op in ops:
        if op.unreplayable:
            out.append({"op": op.name, "calls": op.calls, "reason": op.unreplayable})
            continue
        out += [{"op": op.name, "signature": c.signature, "reason": c.unreplayable}
                for c in op.stored if c.unreplayable]
    return out

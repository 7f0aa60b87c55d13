"""Repro files: a failing case's inputs saved with torch.save, beside the command that re-runs it
(the caller says how that command reads: the CLI knows its own command line).

A repro file's name is fixed by (op, case, dtype, device), so a re-run replaces it; op and case
names are shortened and tamed for the file system (gradlab.fileio.safe_name), and the file is
written atomically, so a reader never loads half of one.  Errors here propagate: the runner
turns them into a note on the failing rows and never loses the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from gradlab.cases import materialize
from gradlab.fileio import atomic_write_with, safe_name
from gradlab.model import Case, Target
from gradlab.results import CheckRow


def repro_path(folder: str | Path, op: str, case: str, dtype: str, device: str) -> Path:
    """Where the repro file of one (op, case, dtype, device) goes."""
    return Path(folder) / f"repro_{safe_name(op)}_{safe_name(case)}_{dtype}_{device}.pt"


def save_failures(rows: list[CheckRow], target: Target, case: Case, dtype: str, device: str,
                  seed: int, folder: str, command: Callable[[str, str, str], str] | None) -> None:
    """Save the inputs of a failing (case, dtype, device) once; point its rows at the file."""
    failed = [r for r in rows if r.failed]
    if not failed:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = repro_path(out, target.op.name, case.name, dtype, device)
    inputs = materialize(case, dtype, device, seed)
    payload = {"op": target.op.name, "case": case.name, "dtype": dtype, "device": device,
               "seed": seed, "source": target.source,
               "args": [a.detach() if isinstance(a, torch.Tensor) else a for a in inputs.args],
               "kwargs": inputs.kwargs,
               "failures": [r.as_dict() for r in failed]}
    atomic_write_with(path, lambda f: torch.save(payload, f))
    line = command(case.name, dtype, device) if command else ""
    for r in failed:
        r.repro, r.repro_command = str(path), line

"""Repro files: a failing case's inputs saved with torch.save, and a command to re-run it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from gradlab.cases import materialize
from gradlab.model import Case, Target
from gradlab.results import CheckRow

if TYPE_CHECKING:
    from gradlab.engine import Options


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def save_failures(rows: list[CheckRow], target: Target, case: Case, dtype: str, device: str,
                  seed: int, options: Options) -> None:
    """Save the inputs of a failing (case, dtype, device) once; point its rows at the file."""
    failed = [r for r in rows if r.failed]
    if not failed or not options.repro_dir:
        return
    folder = Path(options.repro_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"repro_{_slug(target.op.name)}_{_slug(case.name)}_{dtype}_{device}.pt"
    inputs = materialize(case, dtype, device, seed)
    torch.save({"op": target.op.name, "case": case.name, "dtype": dtype, "device": device,
                "seed": seed, "source": target.source,
                "args": [a.detach() if isinstance(a, torch.Tensor) else a for a in inputs.args],
                "kwargs": inputs.kwargs,
                "failures": [r.as_dict() for r in failed]}, path)
    command = ""
    if options.repro_command:
        command = options.repro_command.format(case=shlex.quote(case.name), dtype=dtype,
                                               device=device, seed=seed)
    for r in failed:
        r.repro = f"{path} ; {command}" if command else str(path)

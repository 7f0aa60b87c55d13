"""Repro files: a failing case's inputs saved with torch.save, beside the command that re-runs it
(the caller says how that command reads: the CLI knows its own command line)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from gradlab.cases import materialize
from gradlab.model import Case, Target
from gradlab.results import CheckRow


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def save_failures(rows: list[CheckRow], target: Target, case: Case, dtype: str, device: str,
                  seed: int, folder: str, command: Callable[[str, str, str], str] | None) -> None:
    """Save the inputs of a failing (case, dtype, device) once; point its rows at the file."""
    failed = [r for r in rows if r.failed]
    if not failed:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"repro_{_slug(target.op.name)}_{_slug(case.name)}_{dtype}_{device}.pt"
    inputs = materialize(case, dtype, device, seed)
    torch.save({"op": target.op.name, "case": case.name, "dtype": dtype, "device": device,
                "seed": seed, "source": target.source,
                "args": [a.detach() if isinstance(a, torch.Tensor) else a for a in inputs.args],
                "kwargs": inputs.kwargs,
                "failures": [r.as_dict() for r in failed]}, path)
    line = command(case.name, dtype, device) if command else ""
    for r in failed:
        r.repro, r.repro_command = str(path), line


@dataclass(frozen=True)
class ReproCommand:
    """How the `gradlab check` command line that re-runs one case of a run reads: what the run
    was given, its seed, and the case (a class rather than a closure so that it travels to
    worker processes)."""

    what: tuple[str, ...]
    seed: int

    def __call__(self, case: str, dtype: str, device: str) -> str:
        head = "gradlab check " + " ".join(shlex.quote(w) for w in self.what)
        tail = f" --seed {self.seed}" if self.seed else ""
        return f"{head} --case {shlex.quote(case)} --dtype {dtype} --device {device}{tail}"

"""Repro files: a failing case's inputs saved with torch.save, the command that re-runs the case,
and reading a file back (`gradlab repro FILE.pt`).

A file holds a dict: op, case, dtype, device, seed and source (the spec it came from), the
case's concrete args and kwargs exactly as the Function got them (tensors with their strides),
which of them require grad, and the failing rows as plain data.

A repro file's name is fixed by (op, case, dtype, device), so a re-run replaces it; op and case
names are shortened and tamed for the file system (gradlab.fileio.safe_name), and the file is
written atomically, so a reader never loads half of one.  Errors here propagate: the runner
turns them into a note on the failing rows and never loses the rows.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# torch is imported where a file is written or read: the CLI's parent process builds
# ReproCommand without it (see gradlab.checks.warm)
from gradlab.fileio import atomic_write_with, safe_name
from gradlab.model import Case, Target
from gradlab.results import CheckRow


def repro_path(folder: str | Path, op: str, case: str, dtype: str, device: str) -> Path:
    """Where the repro file of one (op, case, dtype, device) goes."""
    return Path(folder) / f"repro_{safe_name(op)}_{safe_name(case)}_{dtype}_{device}.pt"


def save_failures(rows: list[CheckRow], target: Target, case: Case, dtype: str, device: str,
                  seed: int, folder: str, command: Callable[[str, str, str], str] | None) -> None:
    """Save the inputs of a failing (case, dtype, device) once; point its rows at the file."""
    import torch

    from gradlab.cases import materialize

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
               "requires_grad": [isinstance(a, torch.Tensor) and a.requires_grad
                                 for a in inputs.args],
               "kwargs": inputs.kwargs,
               "failures": [r.as_dict() for r in failed]}
    atomic_write_with(path, lambda f: torch.save(payload, f))
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
    #: the run's --path folders (its Functions may only import from there).
    paths: tuple[str, ...] = ()

    def __call__(self, case: str, dtype: str, device: str) -> str:
        head = "gradlab check " + " ".join(shlex.quote(w) for w in self.what)
        tail = f" --seed {self.seed}" if self.seed else ""
        tail += "".join(f" --path {shlex.quote(p)}" for p in self.paths)
        return f"{head} --case {shlex.quote(case)} --dtype {dtype} --device {device}{tail}"


def load_repro(path: str | Path) -> tuple[Target, str, str, int]:
    """The target of a saved failing case, its one case made of the saved inputs, and the
    dtype, device and seed it ran with.  Raises GradlabError with a one-line reason."""
    from dataclasses import replace

    import torch

    from gradlab.errors import GradlabError
    from gradlab.spec import resolve

    try:
        data = torch.load(path, weights_only=True)
        source, op, case = str(data["source"]), str(data["op"]), str(data["case"])
        dtype, device, seed = str(data["dtype"]), str(data["device"]), int(data["seed"])
        args, kwargs = list(data["args"]), dict(data["kwargs"])
        for i, needs in enumerate(data.get("requires_grad", [])):
            if needs:
                args[i].requires_grad_(True)
    except Exception as exc:  # torch.load raises whatever its unpickler meets
        raise GradlabError(f"{path}: not a gradlab repro file ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    if source == "python":
        raise GradlabError(f"{path}: saved from the Python API, which gradlab cannot re-import: "
                           "torch.load it and pass its args to gradlab.check")
    spec = source.split(": ops[")[0]
    target = next((t for t in resolve(spec) if t.op.name == op), None)
    if target is None:
        raise GradlabError(f"{path}: {spec} has no op named {op!r} any more")
    old = next((c for c in target.op.cases if c.name == case), None)
    saved = Case(case, tuple(args), kwargs, old.size1 if old is not None else ())
    return replace(target, op=replace(target.op, cases=(saved,))), dtype, device, seed

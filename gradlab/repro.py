"""Repro files: a failing case's inputs saved with torch.save, the command that re-runs one failing
row (op, case, variant, dtype, device), and reading a file back (`gradlab repro FILE.pt`).

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
# ReproCommand without it (see gradlab.checks.run.warm)
from gradlab.fileio import atomic_write_with, safe_name
from gradlab.model import Case, Target
from gradlab.results import CheckRow


def repro_path(folder: str | Path, op: str, case: str, dtype: str, device: str) -> Path:
    """Where the repro file of one (op, case, dtype, device) goes."""
    return Path(folder) / f"repro_{safe_name(op)}_{safe_name(case)}_{dtype}_{device}.pt"


def save_failures(rows: list[CheckRow], target: Target, case: Case, dtype: str, device: str,
                  seed: int, folder: str, command: Callable[[CheckRow], str] | None) -> None:
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
    for r in failed:  # each row its own command: it re-runs that row alone
        r.repro, r.repro_command = str(path), command(r) if command else ""


#: The checks of a case's per-dtype item (its base run and variants); the others are its
#: numerical item's (gradlab.checks.run.plan).
CASE_CHECKS = ("forward", "gradient", "contract")
#: The dtype an edges row re-runs in (its points are judged in float64: checks.families.edges).
EDGES_DTYPE = "float64"


@dataclass(frozen=True)
class ReproCommand:
    """The `gradlab check` command line that re-runs exactly one failing row of a run: its op,
    case, variant, dtype and device, with what else of the run decides the row (seed, --path,
    --check, --mode, --capabilities, --strict).  A class rather than a closure so that it
    travels to worker processes.

    The row's base case runs too (a variant is judged against it) but only the row's variant
    and check are reported (--variant, --show).  A base row names the checks of its own work
    item (see CASE_CHECKS) so that the other item is not run; a variant row needs none (the
    numerical checks run on the base case only)."""

    what: tuple[str, ...]
    seed: int
    #: the run's --path folders (its Functions may only import from there).
    paths: tuple[str, ...] = ()
    #: the run's --check values (none: every check).
    checks: tuple[str, ...] = ()
    mode: str = "auto"
    capabilities: str = "default"
    strict: bool = False

    def __call__(self, row: CheckRow) -> str:
        from gradlab.model import CHECKS

        checks = list(self.checks)
        # a numerical item's rows are its base case's, whatever they name (a capability, an
        # opcheck utility): --variant takes variant families only
        variant = row.variant if row.check in CASE_CHECKS else "base"
        pick = ["--variant", variant]
        dtype = row.dtype
        if row.check == "edges":
            # the edges run after the case and every variant pass, in the case item, judged in
            # float64 (float16's row too): no --variant narrowing them away
            checks = [c for c in (checks or CHECKS) if c in (*CASE_CHECKS, "edges")]
            pick, dtype = [], EDGES_DTYPE
        elif variant == "base":
            mine = set(CASE_CHECKS) if row.check in CASE_CHECKS else set(CHECKS) - set(CASE_CHECKS)
            checks = [c for c in (checks or CHECKS) if c in mine]
        # --show: of what runs, only this row's check is reported (one row)
        words = ["gradlab", "check", *self.what, "--op", row.op, "--case", row.case, *pick,
                 *(w for c in checks for w in ("--check", c)),
                 "--show", row.check, "--dtype", dtype, "--device", row.device]
        if self.seed:
            words += ["--seed", str(self.seed)]
        words += [w for p in self.paths for w in ("--path", p)]
        if self.mode != "auto":
            words += ["--mode", self.mode]
        if self.capabilities != "default":
            words += ["--capabilities", self.capabilities]
        if self.strict:
            words.append("--strict")
        return shlex.join(words)


def load_repro(path: str | Path) -> tuple[Target, str, str, int]:
    """The target of a saved failing case, its one case made of the saved inputs, and the
    dtype, device and seed it ran with.  Raises GradlabError with a one-line reason."""
    from dataclasses import replace

    import torch

    from gradlab.errors import GradlabError
    from gradlab.spec import resolve

    try:
        # on the CPU: a GPU run's file opens anywhere (the re-run puts the inputs on its device)
        data = torch.load(path, weights_only=True, map_location="cpu")
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

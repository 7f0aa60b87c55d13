"""Run-wide options and the context every row of one case shares."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import crash_hint
from gradlab.model import CAPABILITIES, COSTLY_CAPABILITIES, INFO_CAPABILITIES, OpDef, Target
from gradlab.results import ERROR, SKIP, CheckRow
from gradlab.watchdog import envelope

#: The capabilities a run measures unless told otherwise: all but the costly ones.
DEFAULT_MEASURED = frozenset(INFO_CAPABILITIES) - frozenset(COSTLY_CAPABILITIES)
#: --capabilities all.
ALL_MEASURED = frozenset(INFO_CAPABILITIES)
#: The choices of --capabilities (and of gradlab.check's `capabilities`).
MEASURED_CHOICES = {"default": DEFAULT_MEASURED, "all": ALL_MEASURED}


def measured_capabilities(choice: str) -> frozenset[str]:
    """The capabilities a run measures for --capabilities CHOICE (ValueError naming the
    choices for another word)."""
    if choice not in MEASURED_CHOICES:
        raise ValueError(f"expected one of {', '.join(MEASURED_CHOICES)}, got {choice!r}")
    return MEASURED_CHOICES[choice]


@dataclass(frozen=True)
class Options:
    """Run-wide settings (spec settings override dtypes/devices/checks per target)."""

    dtypes: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    seed: int = 0
    checks: frozenset[str] | None = None
    #: False switches all variants off; a set keeps only those variant families.
    variants: bool | frozenset[str] = True
    #: of those families, only the variants these names pick (gradlab.select.variant_picked:
    #: a variant's own name or its family; None: every variant) - a repro's one variant.
    variant_names: frozenset[str] | None = None
    #: "auto" picks dense or fast per cost; "dense" / "fast" force one.
    mode: str = "auto"
    #: stop starting new cases once this many seconds have passed.
    budget: float | None = None
    #: where failing cases save their inputs (None: not saved).
    repro_dir: str | None = None
    #: the command line that re-runs one failing row of the run (gradlab.repro.ReproCommand).
    repro_command: Callable[[CheckRow], str] | None = None
    #: intra-op CPU threads during the run (see gradlab.torchstate); None leaves torch's alone.
    threads: int | None = 1
    #: every `warn` row (gradlab.checks.diagnosis.policy: a warn-level capability or cause) fails
    #: the run; information stays information.
    strict: bool = False
    #: cases on a device this machine lacks are declared skips instead of failing the run.
    skip_unavailable: bool = False
    #: run each work item in a worker process (see gradlab.checks.run.isolate): a segfault, exit
    #: or hang fails that item only.  Needs picklable targets (every spec's are).
    isolate: bool = False
    #: worker processes running items side by side when isolated (each one item at a time).
    jobs: int = 1
    #: seconds one work item may take in a worker before it is stopped (None: no limit).
    timeout: float | None = None
    #: healthy workers stay up after the run for the next one (gradlab.checks.run.isolate.IDLE):
    #: the pytest plugin runs one item per run.
    keep_workers: bool = False
    #: a variant running longer than this many times the base case (and than
    #: gradlab.watchdog.ENVELOPE_FLOOR_S) is stopped: a declared skip (None: never stopped).
    cost_envelope: float | None = 20.0
    #: keep each failing gradient's |got - want| map on its Finding (for plots; costs memory).
    error_maps: bool = False
    #: stop after the first case with a failing row (its other dtypes and devices still run).
    fail_fast: bool = False
    #: the information capabilities measured (see gradlab.checks.numeric.capabilities); a spec's
    #: `requires` adds its own.
    capabilities: frozenset[str] = DEFAULT_MEASURED


@dataclass
class CaseContext:
    """What every row of one (target, case, dtype, device) shares, and the rows made so far."""

    target: Target
    case: Any
    dtype: str
    device: str
    options: Options
    rows: list[CheckRow] = field(default_factory=list)
    #: the base case's seconds, the variants' cost envelope is measured against.
    base_seconds: float | None = None

    @property
    def op(self) -> OpDef:
        return self.target.op

    def row(self, variant: str, check: str, status: str, **kw: Any) -> CheckRow:
        """A new row of this case, appended to `rows`."""
        r = CheckRow(self.op.name, self.case.name, kw.pop("dtype", self.dtype), self.device,
                     variant, check, status, **kw)
        self.rows.append(r)
        return r

    def capability_row(self, variant: str, check: str, capability: str, **kw: Any) -> CheckRow:
        """A capability the Function lacks where the reference has it: the row status
        gradlab.checks.diagnosis.policy gives it (a warn kind: `warn`, a failure under --strict; an
        information kind: a pass whose reason says what is missing), a failure when the spec
        requires it."""
        assert capability in CAPABILITIES, capability
        required = capability in self.target.requires
        if policy.informational(capability) and not required:
            kw.pop("hint", None)  # information, not a likely cause: the reason says it
        return self.row(variant, check, policy.missing_status(
            capability, required=required, strict=self.options.strict), **kw)

    def measures(self, capability: str) -> bool:
        """Whether this run measures an information capability (asked for, or required)."""
        return capability in self.options.capabilities or capability in self.target.requires

    def within_envelope(self, variant: str) -> AbstractContextManager[None]:
        """Run a variant within the op's cost envelope (gradlab.watchdog.envelope): one that
        runs far longer than the base case (its rows' seconds, as the first variant starts)
        is stopped, a declared skip."""
        if self.base_seconds is None:
            self.base_seconds = max((r.seconds for r in self.rows), default=0.0)
        spec = self.target.cost_envelope  # the spec's, over the run's
        return envelope(self.options.cost_envelope if spec is None else spec,
                        self.base_seconds, lambda note: self.row(
            variant, "gradient", SKIP, declared=True, reason="cost_envelope", note=note))

    def crash_row(self, variant: str, check: str, exc: BaseException, **kw: Any) -> CheckRow:
        """An error row for an exception raised by the Function (or the reference)."""
        return self.row(variant, check, ERROR, hint=kw.pop("hint", crash_hint(exc, variant, check)),
                        note=first_line(exc), crash_location=crash_location(exc), **kw)


def first_line(exc: BaseException) -> str:
    """'TypeError: the first line of the message' (at most 300 characters)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def _user_frame(filename: str) -> bool:
    """A frame of the code under check: not torch's, not gradlab's own machinery (the bundled
    ops and kernels are code under check)."""
    if "/torch/" in filename:
        return False
    if "/gradlab/" in filename:
        return "/gradlab/ops/" in filename or "/gradlab/kernels/" in filename
    return True


def raised_in_user_code(exc: BaseException) -> bool:
    """True when a frame of the traceback is the checked code's (a crash of the Function or
    its reference), False when only gradlab and torch are on it (a gradlab bug)."""
    return any(_user_frame(fr.filename) for fr in traceback.extract_tb(exc.__traceback__))


def crash_location(exc: BaseException) -> str:
    """file:line of the innermost frame outside torch and gradlab (the user's code)."""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if "/torch/" not in fr.filename and "/gradlab/checks/" not in fr.filename:
            return f"{fr.filename}:{fr.lineno} in {fr.name}"
    return ""

"""The context every row of one case shares, and the run-wide settings a check reads."""

from __future__ import annotations

import traceback
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from gradlab.checks.diagnosis import policy
from gradlab.checks.diagnosis.hints import crash_hint
from gradlab.frames import is_checked_code, is_machinery
from gradlab.model import CAPABILITIES, OpDef, Target
from gradlab.results import ERROR, SKIP, CheckRow
from gradlab.watchdog import envelope


class Settings(Protocol):
    """The run-wide settings a check reads (gradlab.checks.run.options.Options has them all,
    and how the run is carried out besides, which no check reads)."""

    @property
    def strict(self) -> bool: ...
    @property
    def mode(self) -> str: ...
    @property
    def error_maps(self) -> bool: ...
    @property
    def capabilities(self) -> frozenset[str]: ...
    @property
    def cost_envelope(self) -> float | None: ...
    @property
    def max_memory(self) -> int | None: ...
    @property
    def devices(self) -> tuple[str, ...] | None: ...
    @property
    def dtypes(self) -> tuple[str, ...] | None: ...
    @property
    def skip_unavailable(self) -> bool: ...
    @property
    def variants(self) -> bool | frozenset[str]: ...
    @property
    def variant_names(self) -> frozenset[str] | None: ...


@dataclass
class CaseContext:
    """What every row of one (target, case, dtype, device) shares, and the rows made so far."""

    target: Target
    case: Any
    dtype: str
    device: str
    options: Settings
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


def raised_in_user_code(exc: BaseException) -> bool:
    """True when a frame of the traceback is the checked code's (a crash of the Function or
    its reference), False when only gradlab and torch are on it (a gradlab bug)."""
    return any(is_checked_code(fr.filename) for fr in traceback.extract_tb(exc.__traceback__))


def crash_location(exc: BaseException) -> str:
    """file:line of the innermost frame outside torch and gradlab's checks (the user's code;
    whose a frame is: gradlab.frames, from the packages' real folders)."""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if not is_machinery(fr.filename):
            return f"{fr.filename}:{fr.lineno} in {fr.name}"
    return ""

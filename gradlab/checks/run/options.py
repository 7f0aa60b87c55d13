"""A check run's options: what the caller asks of it (dtypes, devices, checks, variants,
limits, isolation, strictness), and the capabilities a run measures unless told otherwise.

Plain data, torch-free: the CLI's parent process, the API and the pytest plugin build it.  The
checks read only the settings they judge by (gradlab.checks.numeric.context.Settings); how the
run is carried out (isolation, jobs, budget, repro files) is the run machinery's alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from gradlab.model import COSTLY_CAPABILITIES, INFO_CAPABILITIES
from gradlab.results import CheckRow

#: Values of an on-by-default switch in the environment (GRADLAB_ISOLATE, GRADLAB_FORKSERVER)
#: that turn it off.
OFF = ("0", "false", "no", "off")


def switched_off(name: str) -> bool:
    """Whether environment variable `name` turns its on-by-default switch off."""
    return os.environ.get(name, "1").strip().lower() in OFF


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
    #: seconds one case (all its work items) may take in workers before it is stopped (None: no
    #: limit; gradlab.checks.run.isolate.run_parallel).
    timeout: float | None = None
    #: bytes a case may take (`--max-memory`; None: gradlab.guard.default_limit()): bounds what
    #: the numerical checks build (gradlab.checks.numeric.numerical.DENSE_MEMORY_FRACTION).
    max_memory: int | None = None
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
    #: seconds of the explore search per case and device (0: not run; `--explore [BUDGET]`).
    explore: float = 0.0

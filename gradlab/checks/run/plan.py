"""The work items of a check run, in order: per case, each dtype on each device, then the case's
numerical item.  torch-free: the CLI's parent process and its workers plan alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gradlab.checks.run.options import Options
from gradlab.model import CHECKS, OPT_IN_CHECKS, Case, Target

#: One work item: ("case" | "numerical", target, case, dtype, device).
Item = tuple[str, Target, Case, str, str]
#: The checks a "numerical" item makes: once per case and device, whatever the dtypes.
PER_CASE_CHECKS = frozenset({"jacobian", "second_order", "forward_ad", "autocast",
                             "capabilities", "opcheck", "explore"})


def enabled_checks(target: Target, options: Options) -> frozenset[str]:
    """The checks that run for `target`: all (the opt-in ones when their option asks), narrowed
    by the spec and by the options."""
    checks = frozenset(CHECKS) - (frozenset() if options.explore else frozenset(OPT_IN_CHECKS))
    for chosen in (target.checks, options.checks):
        if chosen is not None:
            checks &= chosen
    return checks


def plan(targets: Sequence[Target], options: Options) -> Iterator[Item]:
    """The work items in order: ("case", t, case, dtype, device) then ("numerical", ...)."""
    for t in targets:
        checks = enabled_checks(t, options)
        numerical = bool(checks & PER_CASE_CHECKS)
        # a case item makes only forward, gradient and contract rows (variants included)
        per_dtype = bool(checks & {"forward", "gradient", "contract", "edges"})
        for case in t.op.cases:
            for device in options.devices or t.devices or ("cpu",):
                for dtype in (options.dtypes or t.dtypes or t.op.dtypes) if per_dtype else ():
                    yield "case", t, case, dtype, device
                if numerical:
                    yield "numerical", t, case, t.numerical_dtype, device

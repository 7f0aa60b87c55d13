"""The config format of the third-party corpus (issue 28), as configs_independent.py defines it:
one correct custom autograd.Function from a package on the index, with a plain-autograd
reference written here from the math.

A config file (configs_lead.py, configs_independent.py, configs_bugs.py) defines ``CONFIGS``
(correct Functions: gradlab should pass them) and/or ``BUGS`` (Functions with a real bug, each
shown without gradlab in demos/: gradlab must fail them), lists of objects with these fields
(configs_independent.py has its own copy of the dataclass; run_corpus.py reads the fields, not
the type).  Importing a config file must not import the third-party package:
each ``make()`` imports what it needs, so a package that is missing or broken fails that config
only (run_corpus.py reports it as a harness error, not as a gradlab failure).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: make()'s result: (fn, args, kwargs) -- fn as ``gradlab.check(fn, ...)`` takes it (a Function
#: subclass or a callable), float64 example args (tensors to differentiate require grad; plain
#: values and integer tensors stay as they are), extra ``gradlab.check`` keyword arguments
#: (``{}`` for the defaults; the harness sets ``dtypes`` itself).
Made = tuple[Callable[..., Any], Sequence[Any], dict[str, Any]]


@dataclass(frozen=True)
class Config:
    """One corpus entry.  name: "package:function:case", unique over all config files;
    package: "pip-name==version" as install.sh pins it; reference: fn's math in plain autograd,
    with fn's signature; why: one line on what the Function computes and what the case
    exercises; measured: errors measured without gradlab, if any; seen_by (a bug's config):
    the checks whose fail or error row catches its bug (run_corpus.py asserts it there)."""

    name: str
    package: str
    make: Callable[[], Made]
    reference: Callable[..., Any]
    why: str
    measured: str = ""
    seen_by: tuple[str, ...] = ()

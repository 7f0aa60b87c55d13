"""The config format of the third-party corpus (issue 28): one correct custom autograd.Function
from a package on the index, with a plain-autograd reference written here.

A config file (configs_lead.py, configs_independent.py) defines ``CONFIGS: list[Config]``.
Importing it must not import the third-party package: each ``make()`` imports what it needs,
so a package that is missing or broken fails that config only (run_corpus.py reports it as a
harness error, not as a gradlab failure).

``make()`` returns ``(fn, args, reference, kwargs)``:
  fn         the callable (or Function subclass) gradlab checks, as ``gradlab.check(fn, ...)``
  args       example args in float64; tensors to differentiate have ``requires_grad=True``
  reference  the same math in plain autograd (no custom Function inside)
  kwargs     extra ``gradlab.check`` keyword arguments (``{}`` for the defaults; the harness
             sets ``dtypes`` itself and nothing here should loosen tolerances)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Made = tuple[Callable[..., Any], Sequence[Any], Callable[..., Any], dict[str, Any]]


@dataclass(frozen=True)
class Config:
    """One corpus entry: `name` is unique over all config files; `package` is its PyPI name."""

    name: str
    package: str
    make: Callable[[], Made]
    #: one line: which Function, what the case exercises (batch dims, size-1 dims, ...).
    note: str = ""

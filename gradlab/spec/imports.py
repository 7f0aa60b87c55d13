"""The Python objects a spec names: `package.module:attr`, and Functions as callables."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradlab.errors import LoadError, one_line, shown
from gradlab.spec.values import fail


def load_object(ref: str, key: str) -> Any:
    """Import `package.module:attr` (attr may be dotted)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise fail(key, f"expected 'package.module:attr', got {shown(ref)}")
    module_name, _, attr = ref.partition(":")
    # Specs usually sit next to the user's code: let `module:attr` find it from the cwd.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:
        # a module that calls sys.exit() on import is a bad reference, not the end of gradlab
        raise fail(key, f"cannot import {shown(module_name)}: {type(exc).__name__}: "
                        f"{one_line(str(exc), 200)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise fail(key, f"module {shown(module_name)} has no attribute {shown(attr)}")
        obj = getattr(obj, part)
    return obj


def as_callable(obj: Any) -> Callable[..., Any]:
    """An autograd.Function subclass becomes its `apply`; any other callable stays."""
    import torch

    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        apply: Callable[..., Any] = obj.apply
        return apply
    if not callable(obj):
        raise LoadError(f"{shown(obj)} is not callable")
    return obj  # type: ignore[no-any-return]


def load_callable(ref: Any, key: str) -> Callable[..., Any]:
    """`package.module:attr` imported and made callable (a Function becomes its apply)."""
    return as_callable(load_object(ref, key))

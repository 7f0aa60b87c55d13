"""What this torch has of the features that arrived after gradlab's floor (pyproject: torch>=2.1).

Each feature is probed, not read off the version number (a nightly or a backport has what it
has), and named with the torch release that brought it, so a check that needs one it lacks is a
declared skip whose note names that release (reason `old_torch`) instead of a traceback.
docs/ci.md: the torch range the suite runs on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch


@dataclass(frozen=True)
class Feature:
    """A torch feature newer than the floor: what it is and the release that brought it."""

    what: str
    since: str


def _node_metadata() -> bool:
    node = torch.ones(1, requires_grad=True).exp().grad_fn
    return hasattr(node, "_input_metadata")


def _amp_custom_fwd() -> bool:
    return hasattr(torch.amp, "custom_fwd")


def _autocast_device_query() -> bool:
    try:
        torch.is_autocast_enabled("cpu")
    except TypeError:
        return False
    return True


def _apply_kwargs() -> bool:
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, k: float = 1.0) -> torch.Tensor:
            return x * k

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
            return g, None

    try:
        Scaled.apply(torch.ones(1), k=2.0)
    except TypeError:  # "apply() takes no keyword arguments"
        return False
    return True


def _library_custom_op() -> bool:
    if not hasattr(torch.library, "custom_op"):
        return False
    from torch._library.infer_schema import infer_schema

    def probe(x: torch.Tensor) -> torch.Tensor:  # a string annotation: postponed in this module
        return x

    try:  # reads the signature only: nothing is registered
        infer_schema(probe, mutates_args=())
    except ValueError:  # torch 2.4: string annotations are not types
        return False
    return True


def _library_opcheck() -> bool:
    return hasattr(torch.library, "opcheck")


def _compile_traces_functions() -> bool:
    # the higher-order op dynamo traces a custom Function's forward and backward into
    import torch._functorch.autograd_function as functorch_functions

    return hasattr(functorch_functions, "autograd_function_apply")


#: name -> (the feature, its probe).  Probed once per process, on first use.
FEATURES: dict[str, tuple[Feature, Callable[[], bool]]] = {
    "node_metadata": (Feature("the output metadata of autograd nodes (Node._input_metadata)",
                              "2.5"), _node_metadata),
    "amp_custom_fwd": (Feature("torch.amp.custom_fwd/custom_bwd with a device type", "2.4"),
                       _amp_custom_fwd),
    "autocast_device_query": (Feature("torch.is_autocast_enabled(device_type)", "2.4"),
                              _autocast_device_query),
    "apply_kwargs": (Feature("keyword arguments to a Function's apply", "2.13"), _apply_kwargs),
    "library_custom_op": (Feature("torch.library.custom_op with string annotations", "2.5"),
                          _library_custom_op),
    "library_opcheck": (Feature("torch.library.opcheck", "2.4"), _library_opcheck),
    "compile_traces_functions": (Feature("torch.compile tracing custom Functions whole "
                                         "(without a graph break)", "2.3"),
                                 _compile_traces_functions),
}


@cache
def has(name: str) -> bool:
    """Whether this torch has the feature `name` (a key of FEATURES)."""
    return FEATURES[name][1]()


def missing_note(name: str) -> str:
    """The note of a skip for lack of `name`: this torch, the feature, the release needed."""
    feature = FEATURES[name][0]
    return (f"torch {torch.__version__} lacks {feature.what} "
            f"(torch {feature.since} or newer)")


def opcheck_utils() -> tuple[str, ...]:
    """The test utilities this torch's opcheck has (`test_schema`, ...; empty without opcheck).
    Read from its table: torch.library names them only in opcheck's docstring."""
    if not has("library_opcheck"):
        return ()
    from torch.testing._internal.optests import generate_tests

    return tuple(getattr(generate_tests, "ALL_TEST_UTILS", {}))


class KeywordApply:
    """A Function's `apply` for a torch whose apply takes no keyword arguments (before 2.13):
    keywords are bound to forward's parameters and passed by position, as a newer apply does.
    `__self__` is the Function (what a bound `apply` has), and it pickles by the class."""

    def __init__(self, function: type[torch.autograd.Function]) -> None:
        self.__self__ = function
        self.__name__ = "apply"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        forward = inspect.signature(self.__self__.forward)
        params = list(forward.parameters.values())
        # forward(ctx, ...), unless setup_context takes ctx instead
        ctx = [None] if self.__self__.setup_context is torch.autograd.Function.setup_context \
            else []
        if all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
            # defaults too, as a newer apply binds them (setup_context sees every input)
            bound = forward.bind(*ctx, *args, **kwargs)
            bound.apply_defaults()
            args, kwargs = tuple(bound.args[len(ctx):]), {}
        return self.__self__.apply(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (KeywordApply, (self.__self__,))


def function_apply(function: type[torch.autograd.Function]) -> Callable[..., Any]:
    """What calls a Function: its own `apply`, or KeywordApply on a torch whose apply takes
    no keywords."""
    return function.apply if has("apply_kwargs") else KeywordApply(function)

"""The opcheck check: torch.library.opcheck's own test utilities on a torch.library op.

A case whose checked callable is a torch.library op (gradlab.customops.LibraryOp: a custom_op or
triton_op function, `torch.ops.ns.name`, a spec's `function: ns::name`) gets one row per
utility, each one call of `torch.library.opcheck(op, args, kwargs, test_utils=UTIL)` on the
case's values in the numerical dtype (opcheck copies them):

- schema:                torch's SchemaCheckMode: an input written that the schema does not
                         declare mutable (`mutates_args`), an output aliasing an input;
- autograd_registration: an op with a backend kernel but none at an autograd key;
- faketensor:            the fake (meta) kernel's outputs against the real kernel's (shape,
                         dtype, strides);
- aot_dispatch_dynamic, aot_dispatch_static: the op traced by AOTAutograd with fake tensors, as
                         torch.compile runs it, against eager (static where torch has it).

None of them checks a gradient's value (opcheck compares a compiled backward with the eager
one): gradlab's own gradient, jacobian and second_order rows do, on the same op.  Which cause a
failure names is read off the exception (CAUSES, UTIL_HINTS); a failure of the AOT utilities
that the fake kernel's explains takes its hint.  Nothing here copies opcheck: it is called.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gradlab.cases import Inputs
from gradlab.checks.diagnosis import policy
from gradlab.checks.numeric.context import CaseContext, first_line
from gradlab.customops import LibraryOp
from gradlab.results import ERROR, PASS, SKIP
from gradlab.torchcompat import has, missing_note, opcheck_utils

#: The utilities run, in opcheck's own order (faketensor before the AOT ones, whose failures
#: a wrong fake kernel often explains); a row's variant is the name without `test_`.
UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
         "test_aot_dispatch_dynamic", "test_aot_dispatch_static")
#: Words in a failure's message that name its cause, tried in order, whatever the utility
#: (custom_op's own aliasing check fires in every one; a missing fake kernel in the AOT ones).
CAUSES = (("not defined as mutable but was mutated", "undeclared_mutation"),
          ("not defined to alias", "undeclared_alias"),
          ("may not alias any inputs", "undeclared_alias"),
          ("not allowed to directly return inputs", "undeclared_alias"),
          ("no fake impl", "fake_missing"), ("'Meta' backend", "fake_missing"),
          ("no autograd formula", "autograd_missing"))
#: The hint of a failure whose message names none of CAUSES: the utility's own.
UTIL_HINTS = {"test_schema": "schema_violation",
              "test_autograd_registration": "autograd_registration",
              "test_faketensor": "fake_mismatch", "test_aot_dispatch_dynamic": "aot_dispatch",
              "test_aot_dispatch_static": "aot_dispatch"}
#: The utilities that run the op on fake tensors: under Triton's interpreter a triton_op's
#: kernel runs on their (absent) memory and fails whatever the op (measured: "Attempted to set
#: the storage of a tensor on device meta ..."), so they are declared skips there.
FAKE_UTILS = ("test_faketensor", "test_aot_dispatch_dynamic", "test_aot_dispatch_static")
#: Exceptions of an op whose output shape depends on its values (nonzero, NMS): with static
#: shapes it cannot be traced, by definition, and torch.compile breaks the graph there, while
#: with dynamic shapes a fake kernel making an unbacked size traces it.  torch.library.opcheck
#: runs only the dynamic utility by default; a static failure of this kind, where the dynamic
#: one passed, is a declared skip.  Pins: tests/test_customops.py (a nonzero-like op).
DATA_DEPENDENT = ("DynamicOutputShapeException", "DataDependentOutputException",
                  "GuardOnDataDependentSymNode")


def variant_name(util: str) -> str:
    """The row's variant: the utility's name without `test_` (`schema`, `faketensor`, ...)."""
    return util.removeprefix("test_")


def named_cause(exc: BaseException) -> str | None:
    """The hint of CAUSES whose words `exc` (or its cause) says, else None."""
    text = f"{exc} {exc.__cause__ or ''}"
    return next((hint for words, hint in CAUSES if words in text), None)


def cause(util: str, exc: BaseException, fake_hint: str | None) -> str:
    """The hint of `util` failing with `exc`; `fake_hint`: the faketensor row's, when it
    failed (an AOT failure naming nothing else is put down to it)."""
    named = named_cause(exc)
    if named is not None:
        return named
    if util.startswith("test_aot_dispatch") and fake_hint is not None:
        return fake_hint
    return UTIL_HINTS[util]


@contextmanager
def quiet() -> Iterator[None]:
    """opcheck's failures without torch's log records and warnings on stderr (a fake kernel's
    mismatch is logged with its traceback, anomaly mode warns per backward): the row says it."""
    before = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


def run_util(op: LibraryOp, inputs: Inputs, util: str,
             tol: tuple[float, float] | None) -> BaseException | None:
    """One opcheck call of `util` on the case: None when it passed, else its exception."""
    import torch

    atol, rtol = tol if tol is not None else (None, None)
    with quiet():
        result: dict[str, Any] = torch.library.opcheck(
            op.overload, tuple(inputs.args), dict(inputs.kwargs), test_utils=util,
            raise_exception=False, atol=atol, rtol=rtol)
    outcome = result[util]
    return outcome if isinstance(outcome, BaseException) else None


def plain_error(op: LibraryOp, inputs: Inputs) -> Exception | None:
    """What the op raises called plainly on (a copy of) the case's values, or None."""
    case = inputs.clone()
    try:
        op(*case.args, **case.kwargs)
    except Exception as exc:
        return exc
    return None


def opcheck_rows(ctx: CaseContext, inputs: Inputs) -> None:
    """The opcheck rows of a torch.library op's case (none for any other callable).  An op
    that raises on the case for a reason none of CAUSES names gets one error row instead: every
    utility would fail with that crash, each under a cause it does not have."""
    op = ctx.op.function
    if not isinstance(op, LibraryOp):
        return
    crash = plain_error(op, inputs)
    if crash is not None and named_cause(crash) is None:
        ctx.crash_row("base", "opcheck", crash)
        return
    if not has("library_opcheck"):
        for util in UTILS:
            ctx.row(variant_name(util), "opcheck", SKIP, declared=True, reason="old_torch",
                    note=missing_note("library_opcheck"))
        return
    have = opcheck_utils()
    given = ctx.op.tolerances.get(ctx.dtype)  # the user's, else opcheck's (assert_close's)
    tol = (given.atol, given.rtol) if given is not None else None
    fake_hint, passed_dynamic = None, False
    interpreted = os.environ.get("TRITON_INTERPRET") == "1" and op.is_triton
    for util in UTILS:
        variant = variant_name(util)
        if util not in have:
            ctx.row(variant, "opcheck", SKIP, declared=True, reason="old_torch",
                    note=f"torch {torch_version()}'s opcheck has no {util}")
            continue
        if interpreted and util in FAKE_UTILS:
            ctx.row(variant, "opcheck", SKIP, declared=True, reason="triton_interpreted")
            continue
        t0 = time.perf_counter()
        try:
            exc = run_util(op, inputs.clone(), util, tol)
        except Exception as err:  # opcheck refused the call itself (several overloads, ...)
            ctx.row(variant, "opcheck", ERROR, note=first_line(err),
                    seconds=time.perf_counter() - t0)
            continue
        seconds = time.perf_counter() - t0
        if exc is None:
            ctx.row(variant, "opcheck", PASS, seconds=seconds)
            passed_dynamic = passed_dynamic or util == "test_aot_dispatch_dynamic"
            continue
        if (util == "test_aot_dispatch_static" and passed_dynamic
                and type(exc).__name__ in DATA_DEPENDENT):
            ctx.row(variant, "opcheck", SKIP, declared=True, reason="data_dependent_shape",
                    note=first_line(exc), seconds=seconds)
            continue
        hint = cause(util, exc, fake_hint)
        if util == "test_faketensor":
            fake_hint = hint
        ctx.row(variant, "opcheck", policy.status("opcheck", hint, strict=ctx.options.strict),
                hint=hint, note=first_line(exc), seconds=seconds)


def torch_version() -> str:
    import torch

    return str(torch.__version__)

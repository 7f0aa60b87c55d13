"""What turns a row red, in one table: each check and cause mapped to fail, warn or information.

A cause is a hint or reason code (gradlab.checks.diagnosis.hintcodes), or a capability the Function
lacks (`missing`: the capability names of gradlab.model.CAPABILITIES).  Three levels:

- fail:        a likely bug, or a claim the Function breaks: the run fails;
- warn:        a likely bug that does not make a result wrong (the run passes; --strict fails it);
- information: shown in the capability matrix (and on a passing row's reason), never a warn row.

Every check asks this module for a row's status (`status`, `missing_status`; `wrong` for a
wrong result, `criterion_status` and `precision_status` for the low-precision judgements)
instead of deciding it inline; `requires: [...]` in a spec (the API's `requires=`) makes any
missing capability a failure.  The README's table of what fails, warns or is only shown, and the
fuller one in docs/verdicts.md, are rendered from RULES (`markdown`; scripts/policy_tables.py writes
them, tests/test_policy.py keeps them equal).  Plain data: no torch, no other gradlab module
(the row statuses it returns are gradlab.results.status's words, checked by that test).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The levels of a cause.
FAIL, WARN, INFORMATION = "fail", "warn", "information"
LEVELS = (FAIL, WARN, INFORMATION)
#: Any check, or any cause, in a rule.
ANY = "*"
#: The row status of a result within its bound.
PASS = "pass"
#: The row status of each level: information is a passing row (its reason says what is missing;
#: the capability matrix shows `no`).
ROW_STATUS = {FAIL: "fail", WARN: "warn", INFORMATION: PASS}


@dataclass(frozen=True)
class Rule:
    """One check and cause, its level and the words the tables give it."""

    check: str
    cause: str
    level: str
    #: what happened, in the README's words.
    what: str
    #: the capability a spec's `requires:` names to make it a failure ("" when not one).
    capability: str = ""
    #: why this level, one clause (docs/verdicts.md's table).
    why: str = ""


#: Each capability the Function can lack while the reference has it, and its level.  Warn: a
#: crash waiting in common training code that the user did not opt into; information: a
#: feature most correct Functions lack by choice (torch's gradcheck leaves check_forward_ad
#: and check_batched_grad off by default; a once_differentiable backward raises on purpose,
#: the fix second_order's failure message itself names).
MISSING: dict[str, str] = {
    "expanded_input": WARN, "autocast": WARN,
    "second_order": INFORMATION, "forward_ad": INFORMATION, "compile": INFORMATION,
    "vmap": INFORMATION, "func_grad": INFORMATION, "batched_grad": INFORMATION,
    "deterministic": INFORMATION, "noncontiguous": INFORMATION, "cuda": INFORMATION,
}

#: The check whose row a missing capability is on, and the code naming it (hint and reason).
_MISSING_ROWS: dict[str, tuple[str, str]] = {
    "expanded_input": ("forward", "expanded_refused"),
    "autocast": ("autocast", "autocast_missing"),
    "second_order": ("second_order", "second_order_missing"),
    "forward_ad": ("forward_ad", "forward_ad_missing"),
    **{c: ("capabilities", f"{c}_missing") for c in (
        "compile", "vmap", "func_grad", "batched_grad", "deterministic", "noncontiguous",
        "cuda")},
}

_MISSING_WORDS = {
    "expanded_input": ("forward refuses an expanded (stride-0) input the reference accepts",
                       "x.expand(...) and broadcasting give such inputs in real models"),
    "autocast": ("raises under torch.autocast where the reference runs",
                 "a mixed-precision training step crashes"),
    "second_order": ("double backward raises (e.g. @once_differentiable)",
                     "raising is the declared, safe way to lack it"),
    "forward_ad": ("no jvp where the reference has forward mode",
                   "most custom Functions have none; gradcheck skips it by default"),
    "compile": ("torch.compile raises", "eager is a choice; measured on request"),
    "vmap": ("no vmap rule (torch.func.vmap raises)", "needs setup_context"),
    "func_grad": ("torch.func.grad raises", "needs setup_context"),
    "batched_grad": ("no batched backward (is_grads_batched raises)",
                     "kernel-backed backwards lack it; gradcheck skips it by default"),
    "deterministic": ("backward not bitwise deterministic", "atomics are a choice"),
    "noncontiguous": ("refuses all-non-contiguous inputs",
                      "a kernel may require contiguous memory"),
    "cuda": ("does not run on CUDA", "a CPU-only Function is a choice"),
}

#: The table.  A cause not named here is a failure (ANY, ANY): a wrong value or gradient in any
#: check or variant, a broken contract, a crash of the Function (the row is then an `error`).
RULES: tuple[Rule, ...] = (
    Rule(ANY, ANY, FAIL, "a wrong forward, gradient, Jacobian, second order, jvp, autocast "
         "result or capability that runs; a broken backward contract",
         why="a wrong number is a bug"),
    Rule(ANY, "tf32", FAIL, "a float32 CUDA result right only with TF32 off (hint `tf32`: "
         "the flags and what to set)",
         why="the Function loses more to TF32 than allowed"),
    Rule("second_order", "second_order_claimed", WARN,
         "double backward runs and is silently wrong where the op declares "
         "`second_order: false` (right, it passes)",
         why="declared not to be relied on, yet wrong without an error: "
             "once_differentiable would raise"),
    *(Rule(check, "precision_loss", WARN,
           f"a float64 run's {check} computed in float32 (float32 tensors, or float64 ones "
           "cast from float32), as accurate as the reference run in float32, within float64's "
           "table or not (one warning per op and case, the evidence on it)",
           why="likely a float32 step inside a float64 op: a choice or an oversight")
      for check in ("forward", "gradient")),
    Rule(ANY, "scale_limited", WARN,
         "a forward or gradient wrong only at the magnitude or small variant's rescaled inputs, "
         "every value finite where the reference's is (or the Function raises there)",
         why="values 1e3x or 1e-12x from the user's: an unstable formula, or a method's "
             "absolute scale by design (damping, solver tolerance, step); a non-finite value "
             "stays a failure"),
    Rule(ANY, "reshaped_raises", WARN,
         "a backward that raises only at the ragged variant's sizes, which the case lacks, "
         "where forward and the reference ran (the base case passing)",
         why="as edge_reshaped: forward accepting a shape is evidence, not proof, that the "
             "Function supports it (mpc's LQR step checks its horizon in backward alone)"),
    Rule("gradient", "past_clamp", WARN,
         "a gradient wrong only at finite elements where the reference's is exactly 0 (past "
         "a clamp or a saturation, over a region), on a variant's new values within the case's "
         "range where the case's own reference gradient has no 0, every output right",
         why="a convention past a clamp the case never reaches (a boundary gradient passed "
             "through, as a hyperbolic library's artanh does) or a missing mask: which one, "
             "the case's values do not say; a NaN or inf there stays a failure"),
    Rule(ANY, "method_accuracy", WARN,
         "a forward or gradient off only at a value variant's values (special, ties, ragged, "
         "size-1, or an expanded input's or grad_output's repeated values, off alike in any "
         "layout), by an error small everywhere with its direction kept (an approximate "
         "method's signature), where the base case is within tolerance",
         why="a solver or series at its accuracy on values made harder, not a wrong formula; "
             "the note gives the number"),
    Rule("forward", "values_refused", WARN,
         "forward raises on a variant's values (ties, a planted special value, rescaled "
         "values, repeated or sentinel indices; an expanded input whose contiguous copy it "
         "refuses too) that the reference accepts",
         why="a domain narrower than the reference's (a Cholesky solve of a singular "
             "matrix): raising is safe, and may be a bug"),
    Rule("edges", "edge_empty", FAIL,
         "a wrong result on an input with an empty tensor, or a backward that raises on an "
         "empty batch (the leading dim of a tensor of two dims or more) or at an int argument "
         "at 0, that forward accepted, where the reference runs; or, where every output is "
         "empty, a gradient that is not zero or a backward that raises there, whatever the "
         "reference does",
         why="forward accepted the call and the gradient is defined (zero where no element "
             "reaches a loss): the bug catalogue's empty batches, zero rows and repeats of 0 "
             "(6 reports), each a crash users hit; an adaptive pool asked for 0 bins that "
             "returns an empty output and then divides by 0 in backward (pytorch 78868) is one, "
             "wherever a reference would refuse 0 bins"),
    Rule("edges", "edge_domain", WARN,
         "a finite wrong result or a backward that raises only at values beyond the range the "
         "case's own span (0, or one sign, where the case's values are all positive; a NaN or "
         "inf where the reference is finite fails); a finite result of the right shape, other "
         "than the reference's, only at an input all zero",
         why="a case's values are the only evidence of the Function's domain (a digamma "
             "written for x > 0): likely a bug, not certain; an input "
             "all zero is where a Function may keep a convention no reference states "
             "(tad-mctc's eighb takes a zero matrix as padding), while a NaN there stays a "
             "failure (the bug catalogue's kornia3275)"),
    Rule("edges", "edge_reshaped", WARN,
         "a backward that raises only at a shape or an int argument the case does not have (a "
         "size at 1 or grown, a dim doubled, a rank more, an int argument at 0), where forward "
         "and the reference ran",
         why="forward accepting the shape is evidence, not proof, that the Function supports "
             "it (a constraint forward does not check: xitorch's symeig asked for 3 "
             "eigenvalues of a 1x1 matrix); a raise is loud; a wrong value stays a failure"),
    Rule("edges", "edge_broadcast", WARN,
         "a wrong result or a backward that raises only where one argument's dim is moved "
         "apart from the others'",
         why="as explored_broadcast"),
    Rule("edges", "edge_scale", WARN,
         "a result off only at values rescaled, every value finite",
         why="as explored_scale"),
    Rule("edges", "edge_negative", WARN,
         "a gradient wrong, or a backward that raises, only at a positional int argument of "
         "-1 where forward agrees with the reference and -1 means to the reference something "
         "other than the case's own value (a cropping pad, a lag of -1)",
         why="Python's slicing lets -1 through a Function written for counts and lags; a "
             "dim of -1 that is the case's own dim written from the end stays a failure"),
    Rule("edges", "edge_unread", WARN,
         "a wrong result only at a setting of an int or int-tuple argument whose moving leaves "
         "the reference's outputs the same (the reference does not read it)",
         why="the reference cannot say what the Function should give there: an iteration "
             "count at 0 or 1 is a less converged value by design (pytorch-toolbelt's "
             "tempered-softmax normaliser), a block size that changes the result is a bug"),
    Rule("explore", "explored_unread", WARN,
         "under `--explore`, a wrong result only at a setting of an int argument the "
         "reference does not read",
         why="as edge_unread"),
    Rule("explore", "explored_empty", FAIL,
         "under `--explore`, a wrong result on an input with an empty tensor, or a backward "
         "that raises on an empty batch, that forward accepted, where the reference runs",
         why="as edge_empty"),
    Rule("explore", "explored_domain", WARN,
         "under `--explore`, a finite wrong result or a backward that raises only at values "
         "beyond the range the case's own span",
         why="as edge_domain"),
    Rule("explore", "explored_reshaped", WARN,
         "under `--explore`, a backward that raises only at a shape or an int argument the "
         "case does not have",
         why="as edge_reshaped"),
    Rule("explore", "explored_broadcast", WARN,
         "under `--explore`, a wrong result or a backward that raises only on arguments whose "
         "shapes disagree where the case's agree (the reference broadcasts them)",
         why="a Function made for equal shapes need not broadcast; forward accepting them "
             "without a word is the likely bug"),
    Rule("explore", "explored_scale", WARN,
         "under `--explore`, a result off only at values rescaled 1e-6x or 1e3x, every value "
         "finite",
         why="as scale_limited: an unstable formula, or a damping epsilon by design; a "
             "non-finite result stays a failure"),
    Rule("explore", "explored_constant", WARN,
         "under `--explore`, a wrong result or a backward that raises only where a constant "
         "(an example tensor that does not require grad) takes values gradlab made up",
         why="a constant is data the Function may be conditioned on by a rule no value shows "
             "(pypose's poses are right only as unit quaternions; soft targets may have to "
             "sum to 1): likely a bug, not certain"),
    Rule("contract", "summed_shape", WARN,
         "backward returns a gradient at a shape autograd sums down to the input's (the "
         "output's broadcast shape for a [1, 1] parameter)",
         why="the gradient a user gets is right; a caller of backward itself is not"),
    Rule("contract", "input_freed", WARN,
         "forward freed an input's storage (resized to 0 bytes; the case then runs on copies "
         "of its inputs)",
         why="memory saving by design (memcnn's invertible blocks rebuild the input in "
             "backward): right where nothing else reads the input, a segfault where it does"),
    Rule("contract", "wrong_dtype", WARN,
         "backward returns a gradient of another dtype than its input's (float32 for a "
         "float64 input, after a forward that returns float32)",
         why="as summed_shape: autograd casts it, so the gradient a user gets has the input's "
             "dtype, and its values are judged on the gradient rows; a caller of backward "
             "itself gets the other dtype"),
    Rule("contract", "ctx_output_detached", WARN,
         "an output's storage kept on ctx as a detached tensor instead of save_for_backward "
         "(no reference cycle)",
         why="as ctx_input: wrong only if the output is updated in place before backward "
             "(revtorch frees it early on purpose)"),
    Rule("contract", "inplace_buffer", WARN,
         "forward modified in place, without ctx.mark_dirty, an input that does not require "
         "grad and is not returned",
         why="gradients stay right (none flows through it); a state buffer such as a batch "
             "norm's running statistics is updated so by design, other data of the caller's "
             "changes under it"),
    Rule("contract", "ctx_input", WARN,
         "an input kept on ctx instead of save_for_backward (found by aliasing, not shown "
         "by an in-place update)",
         why="a hazard: wrong only if the input is updated in place before backward"),
    Rule("opcheck", "fake_missing", WARN,
         "a torch.library op has no fake (meta) kernel (opcheck's faketensor and AOT dispatch "
         "rows)",
         why="eager use is right; torch.compile, export and FX tracing cannot trace it "
             "(opcheck fails it: --strict does too)"),
    Rule("contract", "output_not_differentiable", WARN,
         "an output does not require grad where the reference's does",
         why="a loss through it gets no gradient"),
    *(Rule(check, code, level, _MISSING_WORDS[cap][0], capability=cap,
           why=_MISSING_WORDS[cap][1])
      for cap, level in MISSING.items() for check, code in [_MISSING_ROWS[cap]]),
)

_BY_KEY = {(r.check, r.cause): r for r in RULES}


def rule(check: str, cause: str) -> Rule:
    """The rule for `check` failing for `cause` (the most specific: check and cause, then any
    check with that cause, then the default failure)."""
    return (_BY_KEY.get((check, cause)) or _BY_KEY.get((ANY, cause))
            or _BY_KEY[(ANY, ANY)])


def level(check: str, cause: str) -> str:
    """fail, warn or information for `check` failing for `cause` (a hint or reason code)."""
    return rule(check, cause).level


def status(check: str, cause: str = "", *, strict: bool = False) -> str:
    """The row status of `check` failing for `cause`: 'fail', 'warn' ('fail' when strict) or
    'pass' (information)."""
    lv = level(check, cause)
    return ROW_STATUS[FAIL if strict and lv == WARN else lv]


def wrong(check: str) -> str:
    """The row status of a wrong result in `check` (a value, shape or count that differs from
    what it should be): the default rule's, a failure."""
    return status(check, ANY)


def criterion_status(yours: float, limit: float, within_table: bool) -> str:
    """The low-precision criterion's verdict on one tensor (gradlab.checks.numeric.lowprec
    measures): pass when the Function's max abs error against the gold is within the limit (k
    times the reference's own, plus the floor), or when the tensor is within the dtype's table
    all the same (torch.testing.assert_close's: what the ecosystem calls equal is never red; the
    criterion alone is brittle on small reductions in float32, where another summation order is
    5-20x the reference's lucky error: the bundled conv2d's bias and modconv's modulation
    gradients); else a wrong result."""
    return PASS if yours <= limit or within_table else wrong(ANY)


def precision_status(check: str, seen: bool) -> str:
    """The status of a precision observation inside tolerance (a float64 result only
    float32-accurate, gradlab.checks.numeric.compare.float32_accurate): the (check,
    precision_loss) rule's for the first of an op and case, a pass pointing to it for the
    others (`seen`: the case has one already)."""
    return PASS if seen else status(check, "precision_loss")


def missing_level(capability: str) -> str:
    """The level of a capability the Function lacks where the reference has it."""
    return MISSING[capability]


def missing_status(capability: str, *, required: bool = False, strict: bool = False) -> str:
    """The row status of a missing capability: 'fail' when required (a spec's `requires:`, the
    API's `requires=`), else its level's ('warn' is 'fail' under --strict)."""
    if required:
        return ROW_STATUS[FAIL]
    check, code = _MISSING_ROWS[capability]
    return status(check, code, strict=strict)


def informational(capability: str) -> bool:
    """True when lacking `capability` is information only (shown in the capability matrix)."""
    return MISSING[capability] == INFORMATION


def split(check: str, causes: Iterable[str]) -> tuple[list[str], list[str]]:
    """`causes` of one check as (failures, warnings); information ones are dropped."""
    fails, warns = [], []
    for c in causes:
        lv = level(check, c)
        if lv == FAIL:
            fails.append(c)
        elif lv == WARN:
            warns.append(c)
    return fails, warns


#: The line under each table.
FOOTNOTE = ("`requires: [capability]` in a spec (`requires=` in the API) makes a missing "
            "capability a failure; `--strict` makes a warn a failure. Rendered from "
            "`gradlab/checks/diagnosis/policy.py`")


def markdown(*, short: bool = False) -> str:
    """The table of RULES as Markdown: short (the README's: level and what, grouped by level)
    or full (docs/verdicts.md's: check, cause, level, what, why, the capability to require)."""
    if short:
        lines = ["| level | when |", "| --- | --- |"]
        for lv in LEVELS:
            what = "; ".join(r.what for r in RULES if r.level == lv)
            lines.append(f"| {lv} | {what} |")
        return "\n".join([*lines, "", FOOTNOTE + " (all causes: docs/verdicts.md)."]) + "\n"
    lines = ["| check | cause | level | what | why | requires |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in RULES:
        cause = "any other" if r.cause == ANY else f"`{r.cause}`"
        check = "any" if r.check == ANY else f"`{r.check}`"
        needs = f"`{r.capability}`" if r.capability else ""
        lines.append(f"| {check} | {cause} | {r.level} | {r.what} | {r.why} | {needs} |")
    return "\n".join([*lines, "", FOOTNOTE + "."]) + "\n"


#: The markers around a rendered table in a Markdown file.
BEGIN, END = "<!-- policy:begin -->", "<!-- policy:end -->"


def rendered(text: str, *, short: bool) -> str:
    """`text` (a Markdown file's) with the table between BEGIN and END rendered anew
    (ValueError when the markers are missing)."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"expected {BEGIN} ... {END}")
    return f"{head}{BEGIN}\n{markdown(short=short)}{END}{tail}"

"""Check results as typed data: rows, the findings that say what is wrong, and the report.

Nothing here words things for a person: gradlab.render.words turns a row into sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from gradlab.errors import ExitCode
from gradlab.results.status import ERROR, FAIL, PASS, SKIP, WARN

if TYPE_CHECKING:
    from gradlab.results.summary import RunSummary

#: The columns of `Report.to_frame()`, in order (the environment columns follow).
COLUMNS = ("op", "case", "dtype", "device", "variant", "check", "status", "max_abs_err",
           "max_rel_err", "seconds", "hint", "reason", "mode", "note", "worst", "crash_location")


@dataclass(frozen=True)
class Element:
    """One wrong element: its output and/or input position and index, and got vs want.

    A forward mismatch has only an output, a gradient mismatch only an input, a Jacobian entry
    both (d out[o] / d x[i]).
    """

    got: float
    want: float
    output: int | None = None
    output_index: tuple[int, ...] = ()
    input: int | None = None
    input_index: tuple[int, ...] = ()
    #: what the input position is called when it is not one of the Function's inputs (x):
    #: "grad_output" for the gradient function's grad_output inputs in second order.
    input_name: str = ""

    def __str__(self) -> str:
        out = f"out{self.output}{list(self.output_index)}" if self.output is not None else ""
        name = self.input_name or "x"
        inp = f"{name}{self.input}{list(self.input_index)}" if self.input is not None else ""
        where = f"d{out}/d{inp}" if out and inp else (out or f"grad[{self.input}]"
                                                      f"{list(self.input_index)}")
        return f"{where}: got {self.got:.6g} want {self.want:.6g}"


@dataclass(frozen=True)
class ErrorStats:
    """How far a tensor (or a set of probes) is from what it should be.

    `of` says what `frac_wrong` counts: "elements" of a tensor, "jacobian entries" of a dense
    Jacobian, or "probes" (random v^T J u products).
    """

    max_abs: float
    max_rel: float
    frac_wrong: float
    cosine: float
    #: c minimising |got - c*want|: the constant factor got is off by (1.0 when right).  Both
    #: this and `cosine` only explain a failure: a comparison within tolerance reports 1.0.
    ratio: float
    of: str = "elements"
    #: entries that are NaN or infinite where the expected value is finite (or, for Jacobians,
    #: non-finite at all: nothing can be verified there).
    nonfinite: int = 0
    #: the 5% and 95% quantiles of the per-element ratio got/want over the elements whose
    #: expected magnitude is significant (gradlab.checks.diagnosis.hints.RATIO_FLOOR): a constant
    #: factor has them equal; None when not measured (a pass, or too few such elements).
    ratio_lo: float | None = None
    ratio_hi: float | None = None


@dataclass(frozen=True)
class ProbeStats:
    """Fast mode's evidence for one input: how many probes disagree, the first one's values,
    and how many wrong input elements bisection located."""

    n_bad: int
    n_probes: int
    got: float
    want: float
    located: int
    #: located reached the search limit (there may be more).
    more: bool = False


@dataclass(frozen=True)
class Pattern:
    """Where the wrong elements lie: by position (checks.diagnosis.patterns: border, edges,
    tail, slice of `dims`), or by input `input`'s values (regions: zero, negative, positive,
    ties, range/band [lo, hi]), with the shares of the wrong and right elements in it."""

    kind: str
    dims: tuple[int, ...]
    start: int
    stop: int
    tile: int = 0
    input: int | None = None
    lo: float | None = None
    hi: float | None = None
    wrong_share: float | None = None
    right_share: float | None = None


@dataclass
class Finding:
    """What is wrong with one output, input or gradient of a row (typed facts, no sentences).

    subject: "output", "input" (its gradient) or "grad_output"; index: its position.
    """

    subject: str
    index: int
    hint: str = ""
    shape: tuple[int, ...] | None = None
    stats: ErrorStats | None = None
    worst: list[Element] = field(default_factory=list)
    #: transposed: the two dims whose swap gives the expected gradient.
    dims: tuple[int, int] | None = None
    #: swapped: the input whose expected gradient this one equals.
    equals_input: int | None = None
    #: wrong_shape / wrong_count / wrong_dtype / wrong_device: what came and what was expected.
    got: Any = None
    want: Any = None
    probes: ProbeStats | None = None
    #: the custom Function (its node's name) a contract finding is about, when it is one inside
    #: the checked callable rather than the callable itself.
    node: str = ""
    #: where the wrong elements lie, when they form a pattern.
    pattern: Pattern | None = None
    #: (atol, rtol) under which this comparison would pass (gradlab.checks.diagnosis.diagnose
    #: .passing_tolerance), given with a level hint (precision_loss, approximate).
    passing_tolerance: tuple[float, float] | None = None
    #: the low-precision criterion (gradlab.tolerances) failed this tensor: the reference's own
    #: max abs error in the row's dtype against the float64 gold, and the factor k allowed.
    own_error: float | None = None
    allowed_factor: float | None = None
    #: |got - want| of this input's gradient as a 2-D array (at most ERROR_MAP_SIDE a side),
    #: kept only when a run asks for plots; never written to the CSV or JSON (too big).
    error_map: Any = field(default=None, repr=False, compare=False)


#: The largest side of a Finding's error_map (larger gradients are max-pooled down to it).
ERROR_MAP_SIDE = 256


@dataclass
class CheckRow:
    """The outcome of one check of one case, dtype, device and variant."""

    op: str
    case: str
    dtype: str
    device: str
    variant: str
    check: str
    status: str
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    seconds: float = 0.0
    #: likely-cause code (gradlab.render.words.HINTS words it), empty when none applies.
    hint: str = ""
    #: why a row was skipped, warned or passed with a remark (a code, see
    #: gradlab.render.words.REASONS).
    reason: str = ""
    #: a skip the spec, a flag or the reference declared (the check does not apply here);
    #: any other skip means something asked for went unchecked, and fails the run.
    declared: bool = False
    #: the numerical checks' mode: "dense" or "fast".
    mode: str = ""
    #: text from outside gradlab: the first line of the exception that was raised.
    note: str = ""
    findings: list[Finding] = field(default_factory=list)
    #: file:line of the innermost frame of the user's code when the Function raised.
    crash_location: str = ""
    #: the whole traceback of an internal gradlab error (reason "internal_error").
    traceback: str = ""
    #: path of the saved inputs for a failing case (see gradlab.repro).
    repro: str = ""
    #: the command that re-runs the failing case.
    repro_command: str = ""

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, ERROR)

    @property
    def unverified(self) -> bool:
        """A skip nobody declared: something asked for was not checked."""
        return self.status == SKIP and not self.declared

    @property
    def ran(self) -> bool:
        """The check ran (whatever it found)."""
        return self.status in (PASS, FAIL, ERROR, WARN)

    @property
    def worst(self) -> list[Element]:
        """The worst elements over all findings, in finding order."""
        return [e for f in self.findings for e in f.worst]

    def as_dict(self) -> dict[str, Any]:
        """The row as nested plain data (findings as dicts, without their error maps)."""
        # the row's own fields are plain values: no deep copy for them (dataclasses.asdict
        # recursing into every field was most of the time of writing a report)
        return {name: [_finding_dict(f) for f in self.findings] if name == "findings"
                else getattr(self, name) for name in _ROW_FIELDS}


def _finding_dict(f: Finding) -> dict[str, Any]:
    """A finding as nested plain data, without its error map (plots only, and large)."""
    m = f.error_map
    try:
        f.error_map = None
        return asdict(f)
    finally:
        f.error_map = m


#: CheckRow's field names, in order.
_ROW_FIELDS = tuple(f.name for f in fields(CheckRow))


@dataclass(repr=False)
class Report:
    """All rows of a run plus the environment it ran in.

    `str(report)` (and `repr`) is the terminal's summary in words: its verdict line and a line
    per finding; in a notebook `_repr_html_` shows it as a table; `to_frame()` has every row.
    """

    rows: list[CheckRow] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    #: true when --budget stopped the run early (rows not run are missing, not passed).
    truncated: bool = False
    #: true when Ctrl-C or SIGTERM stopped the run (the rows are those finished before).
    interrupted: bool = False
    #: true when --fail-fast stopped the run after the first failing case.
    stopped: bool = False

    @property
    def passed(self) -> bool:
        """Verified: at least one check ran, and every check asked for ran and passed.

        A failed or errored row, a skip nobody declared, or a run stopped early is not a pass;
        `warn` rows are (unless required: then the runner made them failures).
        """
        return (any(r.ran for r in self.rows) and not self.truncated and not self.interrupted
                and not any(r.failed or r.unverified for r in self.rows))

    @property
    def failures(self) -> list[CheckRow]:
        return [r for r in self.rows if r.failed]

    @property
    def unverified(self) -> list[CheckRow]:
        """Skips nobody declared (each fails the run)."""
        return [r for r in self.rows if r.unverified]

    def counts_by_reason(self, status: str) -> dict[str, int]:
        """How many rows of `status` there are per reason (skips and warnings), in first-seen
        order; a skip nobody declared counts under "undeclared: REASON"."""
        out: dict[str, int] = {}
        for r in self.rows:
            if r.status == status:
                key = r.reason or "unspecified"
                if r.unverified:
                    key = f"undeclared: {key}"
                out[key] = out.get(key, 0) + 1
        return out

    @property
    def internal_errors(self) -> list[CheckRow]:
        """Rows where gradlab itself failed (a bug to report, not the Function's crash)."""
        return [r for r in self.rows if r.reason == "internal_error"]

    def extend(self, rows: Iterable[CheckRow]) -> None:
        self.rows.extend(rows)

    def summary(self) -> RunSummary[CheckRow]:
        """The run grouped and counted as every output tells it (gradlab.results.summary):
        ops, cases, checks by status, findings (one per bug, with its checks and variants),
        variants, rows by status."""
        from gradlab.results.summary import summarize

        return summarize(self.rows)

    def verdict(self, passed: bool | None = None,
                summary: RunSummary[CheckRow] | None = None) -> str:
        """The terminal's verdict line: 'PASSED: ' or 'FAILED: ' and the run's numbers in the
        words every output uses (gradlab.results.summary.count_words); `passed` overrides;
        `summary`: the run's summary when the caller has made it already."""
        from gradlab.results.summary import count_words

        verdict = "PASSED" if (self.passed if passed is None else passed) else "FAILED"
        if not self.rows:
            verdict += " (no case to run)"
        elif not any(r.ran for r in self.rows):
            verdict += " (nothing was checked)"
        extra = " (stopped early by --budget)" if self.truncated else ""
        if self.stopped:
            extra += " (stopped after the first failing case: --fail-fast)"
        if self.interrupted:
            verdict = "INTERRUPTED"
            extra = " (partial: the cases finished before it was interrupted)"
        return f"{verdict}: {count_words(summary or self.summary())}{extra}"

    def __str__(self) -> str:
        """The terminal's summary in words: the verdict line, a line per finding, then (for an
        op checked without a reference) what it was compared with instead."""
        from gradlab.results.summary import no_reference_words

        summary = self.summary()
        lines = [self.verdict(summary=summary)]
        for i, f in enumerate(summary.findings, 1):
            cause = f.hint or (f"undeclared skip: {f.reason}" if f.reason else "no likely cause")
            lines.append(f"  {f.status.upper()} {f.op}/{f.case}"
                         + (f" {f.subject}" if f.subject else "") + f": {cause} "
                         f"(finding {i} of {len(summary.findings)}; {', '.join(f.checks)}; "
                         f"variants: {', '.join(f.variants)})")
        return "\n".join([*lines, no_reference_words(self.rows)]).rstrip("\n")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        """The run's numbers and its findings as HTML (Jupyter): the grouping and the counts
        of gradlab.results.summary, as every other output has them."""
        from html import escape

        from gradlab.results.summary import count_words

        summary = self.summary()
        head = "".join(f"<th>{h}</th>" for h in ("#", "status", "op", "case", "subject",
                                                  "likely cause", "checks", "variants"))
        body = "".join(
            f"<tr><td>{i}</td><td>{f.status}</td><td>{escape(f.op)}</td><td>{escape(f.case)}"
            f"</td><td>{escape(f.subject)}</td><td>{escape(f.hint or f.reason)}</td>"
            f"<td>{escape(', '.join(f.checks))}</td><td>{len(f.variants)}: "
            f"{escape(', '.join(f.variants))}</td></tr>"
            for i, f in enumerate(summary.findings, 1))
        verdict = "passed" if self.passed else "FAILED"
        table = f"<table><tr>{head}</tr>{body}</table>" if body else ""
        return (f"<p>gradlab Report: <b>{verdict}</b>: {escape(count_words(summary))}</p>"
                + table)

    def __iter__(self) -> Iterator[CheckRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per row: COLUMNS (worst as text), then repro, then the environment."""
        records = []
        for r in self.rows:
            rec = {c: getattr(r, c) for c in COLUMNS if c != "worst"}
            rec["worst"] = "; ".join(str(e) for e in r.worst)
            rec["repro"] = r.repro
            records.append({**{c: rec[c] for c in (*COLUMNS, "repro")}, **self.env})
        return records

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame: COLUMNS, then repro, then the environment columns."""
        import pandas as pd

        return pd.DataFrame.from_records(self.records(),
                                         columns=[*COLUMNS, "repro", *self.env])


def merge_reports(reports: Iterable[Report]) -> Report:
    """One report of several (the shards of a run): rows in order, the first one's environment;
    stopped early if any of them was."""
    merged = Report()
    for r in reports:
        merged.extend(r.rows)
        merged.env = merged.env or dict(r.env)
        merged.truncated |= r.truncated
        merged.stopped |= r.stopped
        merged.interrupted |= r.interrupted
    return merged


def exit_code(report: Report, *, empty_ok: bool = False) -> ExitCode:
    """The exit code of a check run: 130 interrupted, 3 for a gradlab bug, 0 all passed (see
    `passed`), 1 otherwise.

    empty_ok: a run that had no case to run passes (a shard that drew none); a whole run
    without rows fails, since nothing was checked.
    """
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if report.internal_errors:
        return ExitCode.INTERNAL
    if report.passed or (empty_ok and not report.rows and not report.truncated):
        return ExitCode.OK
    return ExitCode.CHECK_FAILED

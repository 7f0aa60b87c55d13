"""The one error hierarchy and the exit codes shared by the CLI and its tests."""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Sequence
from enum import IntEnum
from typing import Any

#: An error is one line: longer messages are cut here (values inside are capped on their own,
#: this is the net under them).
MAX_MESSAGE = 400
#: Longest echo of an offending value in an error message (the rest becomes '...'): a value read
#: from a file may be a megabyte string or a list of a million items.
MAX_SHOWN = 80
#: reprlib bounds the work as well as the text: it looks at a few items per level, a few levels.
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 3, 8, 6
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = MAX_SHOWN


class ExitCode(IntEnum):
    """Process exit codes: every CLI path returns one of these."""

    OK = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    #: gradlab itself failed (a bug in gradlab, never the checked Function's crash)
    INTERNAL = 3
    INTERRUPTED = 130


class GradlabError(Exception):
    """Root of every error gradlab raises on purpose."""

    exit_code: ExitCode = ExitCode.BAD_INPUT


class SpecError(GradlabError):
    """A spec (YAML or API arguments) is invalid; the message names file and key path."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.bare = message
        self.source = source
        self.key = key
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.source, self.key) if p]
        return ": ".join([*parts, one_line(self.bare)])

    def at(self, *, source: str) -> SpecError:
        """A copy that names the file the error was found in."""
        return SpecError(self.bare, source=source, key=self.key)


class InputFileError(GradlabError):
    """An input file cannot be read as asked (missing, not a regular file, too large, not text);
    the caller adds which file and what it was for."""


class ReportError(GradlabError):
    """A report folder or file cannot be written; the message names it."""


class UnknownOpError(GradlabError):
    """An op name is neither bundled nor a spec path."""


class LoadError(GradlabError):
    """A `module:attr` reference could not be imported."""


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` with line breaks and other control characters as spaces, cut to `limit` chars."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(v: Any) -> str:
    """`v` as an error message quotes it: its repr, cut to MAX_SHOWN characters."""
    text = _REPR.repr(v)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


#: Names listed at most after an unknown one (a folder of specs can hold hundreds of cases).
MAX_LISTED = 30


def did_you_mean(name: Any, choices: Sequence[str]) -> str:
    """'did you mean conv2d? ' when one of `choices` is close to `name`, else ''."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


def unknown_name(kind: str, name: Any, choices: Sequence[str], listed: str = "") -> str:
    """"unknown op 'conv2' (did you mean conv2d? bundled ops: conv2d, exp, ...)": an unknown
    name with the closest valid one and the valid ones (`listed` names them: `kind`'s plural
    by default).  An empty `kind` gives the part in brackets alone."""
    if not listed:
        listed = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
    shown_choices = list(dict.fromkeys(choices))
    more = len(shown_choices) - MAX_LISTED
    names = ", ".join(shown_choices[:MAX_LISTED]) + (f", ... ({more} more)" if more > 0 else "")
    head = f"unknown {kind} {shown(name)} " if kind else ""
    return f"{head}({did_you_mean(name, shown_choices)}{listed}: {names})"

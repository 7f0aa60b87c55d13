"""The one error hierarchy and the exit codes shared by the CLI and its tests."""

from __future__ import annotations

from enum import IntEnum


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
        return ": ".join([*parts, self.bare])

    def at(self, *, source: str) -> SpecError:
        """A copy that names the file the error was found in."""
        return SpecError(self.bare, source=source, key=self.key)


class UnknownOpError(GradlabError):
    """An op name is neither bundled nor a spec path."""


class LoadError(GradlabError):
    """A `module:attr` reference could not be imported."""

"""The CLI's rich consoles: colour only on a terminal, never under NO_COLOR.

NO_COLOR (https://no-color.org: set and not empty) turns every style off, bold included, so logs
and terminals that asked for plain text get plain text.  FORCE_COLOR keeps colour in a log that
renders it (rich reads it too).  Piped output gets a wide fixed width instead of 80 columns,
unless COLUMNS says otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from rich.console import Console

#: Width of piped output (CI logs, files): wide enough that the table is not folded.
PIPED_WIDTH = 160


def plain(is_tty: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """True when output must carry no ANSI styles at all."""
    if environ.get("NO_COLOR"):
        return True
    return not is_tty and not environ.get("FORCE_COLOR")


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that follows the rules above; COLUMNS, when set, is
    its width on a terminal and off one."""
    tty = (sys.stderr if stderr else sys.stdout).isatty()
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else (None if tty else PIPED_WIDTH)
    if plain(tty):
        return Console(stderr=stderr, width=width, color_system=None, no_color=True,
                       highlight=False)
    return Console(stderr=stderr, width=width)

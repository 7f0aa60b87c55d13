"""The Typer CLI: parse arguments, call the core, render, pick the exit code.

`app.py` holds the app and what the commands share; each command module registers its commands
on import.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from gradlab.cli import bench, check, ci, record
from gradlab.cli.app import app, err
from gradlab.errors import ExitCode, GradlabError
from gradlab.exitnoise import quiet_triton_exit

__all__ = ["app", "bench", "check", "ci", "main", "record"]


def help_defaults() -> dict[str, Any]:
    """A click `default_map` giving every command's `--help` the default False.

    Typer (0.29) gives its help flag no default, so with `--help` absent its value is None and
    typer coerces it through a pydantic TypeAdapter: importing pydantic, about half of
    `gradlab list`'s time.  A bool value skips that coercion; `--help` given still wins.
    """
    names = [c.name or getattr(c.callback, "__name__", "").lower().replace("_", "-")
             for c in app.registered_commands]
    return {"help": False, **{name: {"help": False} for name in names}}


def main() -> None:
    """Entry point: run the app, turning gradlab errors into one line and exit code 2."""
    quiet_triton_exit()  # no nanobind leak report after a run that imported Triton
    try:
        # standalone_mode=False: click returns typer.Exit's code instead of raising it.
        code = app(standalone_mode=False, default_map=help_defaults())
    except GradlabError as exc:
        err.print(f"gradlab: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(int(exc.exit_code))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("gradlab: interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception as exc:
        # Usage errors: typer vendors click, so match the ClickException shape, not the class.
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show()
            sys.exit(int(ExitCode.BAD_INPUT))
        if type(exc).__name__ == "Abort":
            sys.exit(int(ExitCode.INTERRUPTED))
        # anything else is a bug in gradlab: its own exit code, never 1 (a failed check)
        import traceback

        traceback.print_exc()
        err.print(f"gradlab: internal error: {type(exc).__name__}: {exc} (a gradlab bug; please "
                  "report it with the traceback above)", markup=False, highlight=False,
                  soft_wrap=True)
        sys.exit(int(ExitCode.INTERNAL))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

"""`gradlab record --out DIR -- CMD [ARGS...]`: run a command, record the calls its Python
processes make to custom Functions and ops, write them as a spec folder (gradlab.record)."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path
from typing import Annotated

import typer

from gradlab.cli.app import app, err, fail
from gradlab.record.command import MAX_BYTES, MAX_SIGNATURES


def empty_folder(out: Path) -> Path:
    """`--out`: a new folder, or an empty one (a record never mixes with other files)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"--out: {out} exists and is not an empty folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"--out: cannot make {out}: {exc.strerror}") from None
    return out


@app.command(context_settings={"allow_interspersed_args": False,
                               "ignore_unknown_options": True})
def record(
    command: Annotated[list[str], typer.Argument(help="the command, after --")],
    out: Annotated[Path, typer.Option("--out", help="the spec folder to write (new or "
                                      "empty)")],
    max_signatures: Annotated[int, typer.Option(
        "--max-signatures", min=1, help="distinct signatures kept per op")] = MAX_SIGNATURES,
    max_bytes: Annotated[str, typer.Option(
        "--max-bytes", help="largest call kept: bytes of its tensors (4MiB, 512K, ...)")]
        = str(MAX_BYTES),
    quiet: Annotated[bool, typer.Option("--quiet", help="no summary after the command")]
        = False,
) -> None:
    """Run a command and record its calls of custom autograd.Functions and torch.library
    ops as specs that `gradlab check DIR` checks; the command's output and exit status are
    its own."""
    from gradlab.guard import parse_size
    from gradlab.record import command as rec

    try:
        cap = parse_size(max_bytes)
    except ValueError as exc:
        raise fail(f"--max-bytes: {exc}") from None
    folder = empty_folder(out)
    status = rec.run_command(command, rec.recorder_env(folder, max_signatures, cap))
    if status == 127:
        err.print(f"gradlab record: {shlex.quote(command[0])}: cannot run it", markup=False,
                  highlight=False, soft_wrap=True)
    done = rec.finish(folder, shlex.join(command), status, max_signatures)
    if not quiet:
        from gradlab.render.record import record_lines

        for line in record_lines(done, str(out)):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    if status < 0:  # ended by a signal: end the same way, so the caller sees that signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    raise typer.Exit(status)

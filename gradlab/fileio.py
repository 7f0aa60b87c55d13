"""Files gradlab reads and writes, done so that a hostile or unlucky file system cannot hurt a run.

Reading: only regular files, never more than a stated size (a FIFO named x.yaml would block
forever, a link to /dev/zero would never end).  Writing: atomic (a reader sees the old file or
the whole new one), names reserved exclusively (two runs in the same second never share a
file), and names built from op and case names kept short and tame.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from gradlab.errors import InputFileError, ReportError

#: Longest name part built from op or case names: file systems stop at 255 bytes a name, and a
#: repro file name holds two such parts plus dtype and device.
MAX_NAME_PART = 60
#: Tries at a free report name before giving up (each try draws a new random suffix).
RESERVE_TRIES = 100

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def size_text(n: float) -> str:
    """'1.0 MiB', '74.5 GiB', '512 B'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def read_limited(path: str | Path, limit: int) -> bytes:
    """The bytes of regular file `path`, refused (InputFileError) past `limit` bytes."""
    p = Path(path)
    try:
        # stat before open: opening a FIFO waits for a writer, opening a device may do things
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"not a regular file ({_kind(st.st_mode)})")
        if st.st_size > limit:
            raise InputFileError(f"{size_text(st.st_size)}, more than the {size_text(limit)} "
                                 "limit")
        # O_NONBLOCK: should the path have been swapped for a FIFO since the stat, open returns
        # at once and the fstat below refuses it.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InputFileError("not a regular file")
            data = f.read(limit + 1)  # a file that grew after the stat stops here
    except OSError as exc:
        raise InputFileError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputFileError(f"more than the {size_text(limit)} limit")
    return data


def safe_name(text: str, max_len: int = MAX_NAME_PART) -> str:
    """`text` as a file name part: [A-Za-z0-9_.-] only, at most `max_len` characters.

    A name that had to change gets a short hash of the original, so two names that differ only
    in the characters replaced or cut still give two files.
    """
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.") or "x"
    if slug == text and len(slug) <= max_len:
        return slug
    import hashlib  # on use: `gradlab list` never names a file (OpenSSL's load: ~2 ms)

    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug[: max_len - 9]}-{digest}"


def timestamp() -> str:
    """The time part of report names, YYYYmmdd-HHMMSS (local time)."""
    return time.strftime("%Y%m%d-%H%M%S")


def token() -> str:
    """The random part of report names: 4 hex digits."""
    import secrets  # on use, as hashlib above

    return secrets.token_hex(2)


def reserve_stem(folder: Path, prefix: str, suffixes: Sequence[str]) -> str:
    """A new 'PREFIX-TIME-XXXX' whose files (one per suffix) are created here, empty, with
    O_EXCL: no other writer, in this process or another, can get the same name."""
    for _ in range(RESERVE_TRIES):
        stem = f"{safe_name(prefix)}-{timestamp()}-{token()}"
        made: list[Path] = []
        try:
            for suffix in suffixes:
                path = folder / f"{stem}{suffix}"
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                made.append(path)
            return stem
        except FileExistsError:
            for path in made:  # give the half-taken name back and draw another
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise ReportError(f"{folder}: cannot create a report file: "
                              f"{exc.strerror or exc}") from None
    raise ReportError(f"{folder}: no free report name after {RESERVE_TRIES} tries")


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable where the platform allows it (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_with(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Write `path` through `write(file)` atomically: a temporary file in the same folder,
    flushed and fsynced, then renamed over `path`."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        Path(tmp).replace(p)  # atomic on POSIX and Windows alike
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(p.parent)


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write `data` (str as UTF-8) to `path` atomically (see atomic_write_with)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    atomic_write_with(path, lambda f: f.write(raw))


def ensure_writable(folder: str | Path, what: str = "the report folder") -> Path:
    """`folder`, created if needed, after writing and removing a probe file in it; ReportError
    naming the folder when either fails (so a run learns it before any work, not after)."""
    p = Path(folder)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ReportError(f"{p}: cannot create {what}: a file of that name is in the "
                          "way") from None
    except OSError as exc:
        raise ReportError(f"{p}: cannot create {what}: {exc.strerror or exc}") from None
    try:
        fd, probe = tempfile.mkstemp(dir=p, prefix=".gradlab-probe-")
        try:
            os.write(fd, b"probe")
        finally:
            os.close(fd)
            Path(probe).unlink(missing_ok=True)
    except OSError as exc:
        raise ReportError(f"{p}: {what} is not writable: {exc.strerror or exc}") from None
    return p


def ensure_writable_file(path: str | Path) -> Path:
    """`path` as a file to write at the end of a run: its folder created if needed and probed,
    the path itself no folder, FIFO or block device, and, if it exists, open for writing (left
    as it was).  ReportError naming the path when any of that fails."""
    p = Path(path)
    try:
        st: os.stat_result | None = p.stat()
    except OSError:  # missing, or a parent is no folder: the folder's probe says which
        st = None
    # a character device (/dev/null, /dev/stdout) takes a write; a folder, FIFO or socket not
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise ReportError(f"{p}: {_kind(st.st_mode)} is in the way of the file")
    try:
        if st is None or stat.S_ISREG(st.st_mode):  # a device is written in place
            ensure_writable(p.parent, "its folder")
    except ReportError as exc:
        raise ReportError(f"{p}: {exc}") from None
    if st is not None:
        try:  # O_APPEND without O_TRUNC: the file keeps its content until the real write
            os.close(os.open(p, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)))
        except OSError as exc:
            raise ReportError(f"{p}: not writable: {exc.strerror or exc}") from None
    return p

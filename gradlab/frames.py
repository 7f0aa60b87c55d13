"""Whose code a source file is: torch's, gradlab's own, or the code under check.

Decided from the installed packages' real directories (`gradlab.__file__`, `torch.__file__`,
symlinks resolved), compared by path prefix: a user's project that sits in a folder named
`gradlab` or `torch` (a fresh `git clone` of gradlab lands in one) is still the user's.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

#: gradlab's package folder, symlinks resolved.
GRADLAB_DIR = str(Path(__file__).resolve().parent)
#: gradlab's folders that hold code under check (the bundled ops and their kernels).
CHECKED_DIRS = tuple(str(Path(GRADLAB_DIR, d)) for d in ("ops", "kernels"))
#: gradlab's folder of checks: the machinery a crash location skips.
CHECKS_DIR = str(Path(GRADLAB_DIR, "checks"))


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (both already resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=4096)
def real(filename: str) -> str:
    """A frame's file name with symlinks resolved ('<string>' and the like stay as they are)."""
    return filename if filename.startswith("<") else os.path.realpath(filename)


def torch_dir() -> str | None:
    """torch's package folder, symlinks resolved; None while torch is not imported (no frame
    can then be torch's)."""
    torch = sys.modules.get("torch")
    where = getattr(torch, "__file__", None)
    return None if where is None else _package_folder(where)


@functools.lru_cache(maxsize=4)
def _package_folder(init_file: str) -> str:
    return str(Path(init_file).resolve().parent)


def is_torch(filename: str) -> bool:
    """A file of the imported torch package."""
    folder = torch_dir()
    return folder is not None and inside(real(filename), folder)


def is_gradlab(filename: str) -> bool:
    """A file of this gradlab package (its bundled ops and kernels included)."""
    return inside(real(filename), GRADLAB_DIR)


def is_checked_code(filename: str) -> bool:
    """A file of the code under check: neither torch's nor gradlab's own machinery (gradlab's
    bundled ops and kernels are code under check)."""
    if is_torch(filename):
        return False
    path = real(filename)
    if inside(path, GRADLAB_DIR):
        return any(inside(path, d) for d in CHECKED_DIRS)
    return True


def is_machinery(filename: str) -> bool:
    """A frame a crash location skips: torch's, or gradlab's checks."""
    return is_torch(filename) or inside(real(filename), CHECKS_DIR)

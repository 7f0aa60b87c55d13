"""Fixed tensor values read from a file named in a spec (`file:`).

A `.pt`/`.pth` file is what `torch.save` wrote: a tensor, or a dict of tensors (`key:` picks
one); it is loaded with `weights_only=True`, so a file can hold data but never run code.  A
`.npy` file is read with numpy (allow_pickle=False) when numpy is installed.  Either way the file
is read whole, within MAX_TENSOR_FILE_BYTES, through gradlab.fileio (regular files only).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple

from gradlab.errors import InputFileError, one_line, shown, unknown_name
from gradlab.fileio import read_limited
from gradlab.model import INTEGER_DTYPES, INTEGER_RANGES, FixedValues, is_integer_dtype
from gradlab.spec.values import fail, join

#: Largest tensor file read: filter taps, targets and masks are small; this bounds what a
#: spec can make gradlab hold (the values are kept as float64 or int64 bytes, then copied per
#: case).  Such a tensor is left out of the --max-memory estimate: this bounds it instead.
MAX_TENSOR_FILE_BYTES = 64 << 20
PT_SUFFIXES = (".pt", ".pth")
NPY_SUFFIX = ".npy"


class Fixed(NamedTuple):
    """A tensor's fixed values: shape, values, and the dtype they have (an integer or bool
    dtype, the one the spec asks for, or None: floating values take the run's dtype)."""

    shape: tuple[int, ...]
    values: FixedValues
    dtype: str | None


#: A file's values left unread (see files_unread): its shape and values are not known yet.
UNREAD = Fixed((), FixedValues("float64", b""), None)
#: The key paths of the files left unread while files_unread is on; None when it is off.
_UNREAD: ContextVar[list[str] | None] = ContextVar("gradlab_unread_files", default=None)


@contextmanager
def files_unread() -> Iterator[list[str]]:
    """While on, a `file:` is checked (its name, suffix, `key:`, and that it can be read) but
    not loaded, since loading one imports torch: a spec is validated whole first (gradlab.spec
    .files.parse_spec), then parsed again with its files.  Yields the key paths left unread."""
    unread: list[str] = []
    token = _UNREAD.set(unread)
    try:
        yield unread
    finally:
        _UNREAD.reset(token)


def read_tensor_file(name: Any, pick: Any, key: str, folder: Path | None,
                     dtype: str | None) -> Fixed:
    """The tensor in file `name` (relative to `folder`), `pick` choosing from a dict; `dtype`
    is the tensor's dtype from the spec, if it names one."""
    fkey = join(key, "file")
    if not isinstance(name, str) or not name:
        raise fail(fkey, f"expected a file name (.pt, .pth or .npy), got {shown(name)}")
    path = Path(name)
    if not path.is_absolute() and folder is not None:
        path = folder / path
    suffix = path.suffix.lower()
    if suffix not in (*PT_SUFFIXES, NPY_SUFFIX):
        raise fail(fkey, f"expected a .pt, .pth or .npy file, got {shown(name)}")
    if pick is not None and not isinstance(pick, str):
        raise fail(join(key, "key"), f"expected the name of a tensor in the file, got "
                                     f"{shown(pick)}")
    try:
        data = read_limited(path, MAX_TENSOR_FILE_BYTES)
    except InputFileError as exc:
        raise fail(fkey, f"{path}: {exc}") from None
    unread = _UNREAD.get()
    if unread is not None:
        unread.append(fkey)
        return UNREAD
    tensor = (_load_npy(data, pick, key) if suffix == NPY_SUFFIX
              else _load_pt(data, pick, key))
    return _checked(tensor, fkey, dtype)


def _load_pt(data: bytes, pick: str | None, key: str) -> Any:
    """The tensor a torch.save file holds (picked from a dict by `pick`)."""
    import torch

    try:
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # the unpickler raises whatever it meets in a bad file
        raise fail(join(key, "file"), f"cannot load: {type(exc).__name__}: "
                                      f"{one_line(str(exc), 160)}") from None
    if isinstance(obj, Mapping):
        names = [str(k) for k in obj]
        if pick is None:
            raise fail(join(key, "file"), f"the file holds a dict: pick a tensor with key: "
                                          f"(keys: {', '.join(names[:30])})")
        if pick not in obj:
            raise fail(join(key, "key"), unknown_name("key", pick, names, "keys in the file"))
        obj = obj[pick]
    elif pick is not None:
        raise fail(join(key, "key"), "the file holds one tensor, not a dict: drop key")
    if not isinstance(obj, torch.Tensor):
        raise fail(join(key, "file"), f"expected a tensor, the file holds a "
                                      f"{type(obj).__name__}")
    return obj.detach()


def _load_npy(data: bytes, pick: str | None, key: str) -> Any:
    """The array of a .npy file, as a tensor (floats in float64, integers in int64)."""
    try:
        import numpy as np
    except ImportError:
        raise fail(join(key, "file"), "reading a .npy file needs numpy (pip install numpy); "
                                      "or save the tensor with torch.save as .pt") from None
    import torch

    if pick is not None:
        raise fail(join(key, "key"), "a .npy file holds one array: key picks from a .pt dict")
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError, ... on bad files
        raise fail(join(key, "file"), f"cannot load: {type(exc).__name__}: "
                                      f"{one_line(str(exc), 160)}") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        what = f"dtype {arr.dtype}" if isinstance(arr, np.ndarray) else type(arr).__name__
        raise fail(join(key, "file"), f"expected a floating, integer or bool array, got {what}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
        raise fail(join(key, "file"), "holds unsigned values beyond int64")
    wide = {"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64}[arr.dtype.kind]
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=wide).copy())


def _checked(t: Any, fkey: str, dtype: str | None) -> Fixed:
    """A loaded tensor checked (dense, not empty, finite, fits `dtype`) and kept as values."""
    import torch

    from gradlab.cases import dtype_name, fixed_values

    if t.layout != torch.strided or t.is_complex() or t.is_quantized:
        raise fail(fkey, f"expected a dense real tensor, got {t.dtype} ({t.layout})")
    if t.numel() == 0:
        raise fail(fkey, f"holds an empty tensor (shape {list(t.shape)})")
    if t.is_floating_point():
        bad = int((~torch.isfinite(t)).sum())
        if bad:
            raise fail(fkey, f"holds {bad} NaN or infinite values (nothing could be checked "
                             "against them)")
        implied = None
    else:
        name = dtype_name(t.dtype)
        implied = name if name in INTEGER_DTYPES else "int64"
    want = dtype or implied
    if is_integer_dtype(want):
        assert want is not None
        if t.is_floating_point() and not bool((t == t.round()).all()):
            raise fail(fkey, f"holds non-integer values for a {want} tensor")
        lo, hi = INTEGER_RANGES[want]
        low, high = int(t.min()), int(t.max())
        if low < lo or high >= hi:
            raise fail(fkey, f"holds values in [{low}, {high}], beyond {want} ([{lo}, {hi}))")
        t = t.to(torch.bool if want == "bool" else torch.int64)
    return Fixed(tuple(t.shape), fixed_values(t), want)

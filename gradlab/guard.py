"""The memory a case's tensors need, known from their specs before anything is allocated, and the
limit past which a case is refused (a `shape: [100000, 100000]` would otherwise take the machine
down, or be killed, long after the run started).

Plain arithmetic, no torch: the spec layer calls it while loading a spec file.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

from gradlab.model import TensorArg

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
#: The dtype a case's tensors need memory in, whatever dtype the run is in: values are drawn in
#: float64 and cast (gradlab.cases.make_tensor), and the reference and the numerical checks run on
#: float64 copies.  So a case needs its float64 size at least.
ESTIMATE_DTYPE = "float64"
#: A case may take up to this fraction of the available memory with its input tensors alone: the
#: checks hold several copies of them (reference, gradients, variants), so a case near the whole
#: memory would not finish anyway.
MEMORY_FRACTION = 0.25
#: Assumed available memory where the system does not say (8 GiB: a small machine).
FALLBACK_AVAILABLE = 8 << 30
#: Seconds a check may run before it is stopped (`gradlab check --timeout` per case, the pytest
#: plugin per item, `gradlab.check(timeout=)` per call): far above any normal case (the bundled
#: ones take well under a second each), low enough that a hang fails a CI job long before its
#: own limit.
DEFAULT_TIMEOUT_S = 300.0

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def storage_elements(arg: TensorArg) -> int:
    """Elements of memory a tensor spec occupies (explicit strides can spread it out)."""
    if arg.strides is not None:
        return 1 + sum((n - 1) * s for n, s in zip(arg.shape, arg.strides, strict=True))
    return math.prod(arg.shape)


def tensor_bytes(arg: TensorArg, dtype: str = ESTIMATE_DTYPE) -> int:
    """Bytes of one tensor spec in `dtype` (a spec's own fixed dtype is drawn in float64 too)."""
    return storage_elements(arg) * DTYPE_BYTES[dtype]


def case_bytes(args: Iterable[object], dtype: str = ESTIMATE_DTYPE) -> int:
    """Bytes of all tensor specs among a case's args."""
    return sum(tensor_bytes(a, dtype) for a in args if isinstance(a, TensorArg))


def available_memory() -> int | None:
    """Memory available to new allocations, in bytes: MemAvailable from /proc/meminfo (Linux),
    else free physical pages from sysconf; None where neither says."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def default_limit() -> int:
    """MEMORY_FRACTION of the available memory (of FALLBACK_AVAILABLE when unknown)."""
    return int((available_memory() or FALLBACK_AVAILABLE) * MEMORY_FRACTION)


def parse_size(text: str) -> int:
    """'8GiB', '8G', '512M', '1.5g', '1000000' -> bytes (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"expected a size such as 8GiB, 512M or 1000000, got {text!r}")
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size <= 0:
        raise ValueError(f"expected a positive size, got {text!r}")
    return size

"""A steady heap for timing on the CPU: freed memory is kept for reuse, not given back.

glibc returns the free top of its heap to the system once it exceeds a threshold that it moves
with the sizes freed, and the next allocation of that memory page-faults again.  Which calls
pay those faults depends on the order of allocations before them: two back-to-back benches of
the bundled conv2d case read its custom backward 52 and 62 ms (the reference: 51 and 51 ms),
either bench of the two, run after run.  With the thresholds fixed (nothing trimmed; blocks up
to glibc's largest mmap threshold, 32 MiB, from the heap) both read 51 ms.  A bench is a process
of its own, where keeping the memory costs nothing; other platforms keep their allocator as is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: The largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_MAX = 32 << 20
#: Free heap kept before any is given back: more than a bench ever frees.
TRIM_THRESHOLD = (1 << 31) - 1


def libc() -> ctypes.CDLL | None:
    """The C library on Linux; None elsewhere, or where it cannot be loaded."""
    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    try:
        return ctypes.CDLL(name) if name is not None else None
    except OSError:
        return None


def steady_heap() -> bool:
    """Fix glibc's trim and mmap thresholds for this process; True when it did (glibc on
    Linux), False elsewhere.  There is no way back to glibc's moving thresholds."""
    mallopt = getattr(libc(), "mallopt", None)  # musl and others have none
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX))

"""Tests that need a torch feature newer than the floor skip, naming the release, on a torch
without it (gradlab.torchcompat; docs/ci.md, "The torch range")."""

from __future__ import annotations

import pytest

from gradlab.torchcompat import has, missing_note


def needs(feature: str) -> None:
    """Skip the calling test on a torch without `feature` (a key of torchcompat.FEATURES)."""
    if not has(feature):
        pytest.skip(missing_note(feature))



def version_of(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as '3.0.0' or '2.4.6rc1'."""
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def needs_triton_interpreter() -> None:
    """Skip unless triton's interpreter (TRITON_INTERPRET=1) runs the involution kernels here,
    as measured: 2.x has no CPU backend (torch 2.1-2.3 pin it); 3.0 and 3.1 refuse their
    tl.arange on constexpr block sizes (torch 2.4 and 2.5 pin those); 3.2 to 3.6 fail under
    NumPy 2.4 ('only 0-dimensional arrays can be converted to Python scalars') and pass under
    2.3; 3.7 and later pass under both."""
    triton = pytest.importorskip("triton", reason="the Triton kernels are tested under "
                                 "TRITON_INTERPRET=1 and need triton installed")
    import numpy

    have, numpy_has = version_of(triton.__version__), version_of(numpy.__version__)
    if have < (3, 2):
        why = "has no CPU backend" if have < (3, 0) else "refuses the kernels' tl.arange"
        pytest.skip(f"triton {triton.__version__}'s interpreter {why} (triton 3.2 or newer)")
    if have < (3, 7) and numpy_has >= (2, 4):
        pytest.skip(f"triton {triton.__version__}'s interpreter fails under numpy "
                    f"{numpy.__version__} (triton 3.7 or newer, or numpy<2.4)")

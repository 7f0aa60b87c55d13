"""Tests that need a torch feature newer than the floor skip, naming the release, on a torch
without it (gradlab.torchcompat; docs/ci.md, "The torch range")."""

from __future__ import annotations

import pytest

from gradlab.torchcompat import has, missing_note


def needs(feature: str) -> None:
    """Skip the calling test on a torch without `feature` (a key of torchcompat.FEATURES)."""
    if not has(feature):
        pytest.skip(missing_note(feature))


"""A catalogue of real gradient bugs from public trackers, each a broken Function beside its
correct twin (see base.py for what an entry holds and how its inputs are chosen)."""

from __future__ import annotations

from . import (
    contracts,
    empty,
    formulas,
    heldout,
    heldout2,
    heldout3,
    heldout4,
    indices,
    layout,
    second_order,
    shapes,
    transforms,
    values,
)
from .base import Entry

MODULES = (layout, indices, empty, second_order, formulas, contracts, values, shapes,
           transforms, heldout, heldout2, heldout3, heldout4)
ENTRIES: tuple[Entry, ...] = tuple(e for m in MODULES for e in m.ENTRIES)
BY_ID = {e.id: e for e in ENTRIES}
assert len(BY_ID) == len(ENTRIES), "entry ids must be unique"

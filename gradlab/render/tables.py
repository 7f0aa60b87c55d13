"""Tables that fit the console without cutting a number.

rich squeezes columns to fit, which turns `3.21e-08` into `3.2…`: a number that reads wrong.
Here no column is ever squeezed; when the table is wider than the console, whole columns go,
least useful first, and a column with one value for every line becomes a note in the title.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Column:
    """A table column: its header, how a line's cell reads, right-aligned or not."""

    header: str
    cell: Callable[[Any], str | Text]
    right: bool = False


def build(columns: Sequence[Column], items: Sequence[Any], title: str,
          caption: str | None = None, fold_text: bool = False) -> Table:
    """The table with these columns, each as wide as its widest cell (never squeezed).

    fold_text: names (left-aligned columns) may wrap onto more lines; numbers never do.
    """
    table = Table(title=title, caption=caption, header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    cells = [[c.cell(item) for c in columns] for item in items]
    for k, c in enumerate(columns):
        width = max([len(c.header), *(len(str(row[k])) for row in cells)])
        if fold_text and not c.right:
            table.add_column(c.header, overflow="fold", min_width=min(width, 6))
            continue
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=True,
                         min_width=width)
    for row in cells:
        table.add_row(*row)
    return table


def width_of(table: Table) -> int:
    """The columns a table needs to print unsqueezed."""
    return Console(width=10_000).measure(table).maximum


def fit(columns: Sequence[Column], items: Sequence[Any], width: int | None, title: str,
        drop: Sequence[str], caption: str | None = None,
        identity: Sequence[str] = ()) -> Table:
    """The table with as many columns as fit in `width` (all when None).

    Columns named in `drop` go in that order while the table is too wide; one whose cells are
    all alike is named in the title instead.  An `identity` column (one that tells lines
    apart) goes only when all its cells are alike.
    """
    cols = list(columns)
    table = build(cols, items, title, caption)
    notes: list[str] = []
    for header in drop:
        if width is None or width_of(table) <= width:
            break
        col = next((c for c in cols if c.header == header), None)
        if col is None:
            continue
        values = {str(col.cell(item)) for item in items}
        if header in identity and len(values) > 1:
            continue
        if len(values) == 1:
            notes.append(f"{header}: {values.pop()}")
        cols.remove(col)
        shown = f"{title} ({', '.join(notes)})" if notes else title
        table = build(cols, items, shown, caption)
    if width is not None and width_of(table) > width:
        # still too wide: the names wrap, the numbers stay whole
        table = build(cols, items, table.title if isinstance(table.title, str) else title,
                      caption, fold_text=True)
    return table

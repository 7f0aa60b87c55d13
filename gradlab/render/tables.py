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
          caption: str | None = None, fold_text: bool = False,
          cells: Sequence[Sequence[str | Text]] | None = None) -> Table:
    """The table with these columns, each as wide as its widest cell (never squeezed).

    fold_text: names (left-aligned columns) may wrap onto more lines; numbers never do.
    cells: the items' cells for these columns, when already made.
    """
    table = _frame(columns, _widths(columns, cells := cells or _cells(columns, items)), title,
                   caption, fold_text)
    for row in cells:
        table.add_row(*row)
    return table


def _cells(columns: Sequence[Column], items: Sequence[Any]) -> list[list[str | Text]]:
    return [[c.cell(item) for c in columns] for item in items]


def _widths(columns: Sequence[Column], cells: Sequence[Sequence[str | Text]]) -> list[int]:
    return [max([len(c.header), *(len(str(row[k])) for row in cells)])
            for k, c in enumerate(columns)]


def _frame(columns: Sequence[Column], widths: Sequence[int], title: str,
           caption: str | None, fold_text: bool = False) -> Table:
    """The table's columns without lines: measuring it measures the whole table, since no
    column is narrower than its widest cell and none wraps."""
    table = Table(title=title, caption=caption, header_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for c, width in zip(columns, widths, strict=True):
        if fold_text and not c.right:
            table.add_column(c.header, overflow="fold", min_width=min(width, 6))
            continue
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=True,
                         min_width=width)
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
    cells = _cells(cols, items)
    widths = _widths(cols, cells)
    notes: list[str] = []

    def shown() -> str:
        return f"{title} ({', '.join(notes)})" if notes else title

    def too_wide() -> bool:
        # measured on the frame alone: the lines cost rich as much again, for nothing
        return width is not None and width_of(_frame(cols, widths, shown(), caption)) > width

    for header in drop:
        if not too_wide():
            break
        k = next((k for k, c in enumerate(cols) if c.header == header), None)
        if k is None:
            continue
        values = {str(row[k]) for row in cells}
        if header in identity and len(values) > 1:
            continue
        if len(values) == 1:
            notes.append(f"{header}: {values.pop()}")
        del cols[k], widths[k]
        cells = [row[:k] + row[k + 1:] for row in cells]
    # still too wide: the names wrap, the numbers stay whole
    return build(cols, items, shown(), caption, fold_text=too_wide(), cells=cells)

"""The capability matrix: a line per op, a column per capability.

Made from gradlab.results.capabilities (after a check, from its rows; in `gradlab list`, from
the bundled ops' registry).  No cell is ever wrapped or cut: the table with its full headers
when it fits the width, else with three-letter headers (explained in the legend), else, when
even that is too wide (a long op name in 80 columns), the same grid drawn line by line with
each name too long for its column on a line of its own, its states on the next.  Title and
legend are wrapped at the width as well.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from gradlab.model import MATRIX
from gradlab.render.tables import Column, build, width_of
from gradlab.results.capabilities import BREAKS, NA, NO, UNMEASURED, WRONG, YES, OpCapabilities
from gradlab.results.status import ERROR, FAIL, WARN

#: Column headers (short: ten of them and the op must fit in 100 columns).
HEADERS = {"first_order": "1st", "second_order": "2nd", "forward_ad": "fwd",
           "autocast": "autocast", "compile": "compile", "vmap": "vmap", "func_grad": "grad",
           "batched_grad": "bgrad",
           "deterministic": "determ", "noncontiguous": "strided", "cuda": "cuda"}

#: Three-letter headers for a narrow terminal (the cells are three letters wide mostly).
SHORT = {"first_order": "1st", "second_order": "2nd", "forward_ad": "fwd", "autocast": "amp",
         "compile": "cmp", "vmap": "vmp", "func_grad": "grd", "batched_grad": "bgr",
         "deterministic": "det", "noncontiguous": "str", "cuda": "cu"}

#: What the short headers stand for (the first line of the legend when they are shown).
SHORT_LEGEND = ("amp: autocast; cmp: compile; vmp: vmap; grd: grad; bgr: bgrad; "
                "det: deterministic; str: strided; cu: cuda.")

#: The legend under the table.
LEGEND = ("yes: runs and matches; no: raises (information; autocast: a warn where the "
          "reference has it; deterministic: two runs differ bitwise); wrong: differs (a "
          "failure; a warn where declared off); n/a: the reference lacks it too; breaks: "
          "torch.compile matches with graph breaks; -: not measured (compile: --capabilities "
          "all; cuda: no GPU).  fwd: forward "
          "mode (a jvp: torch.func.jvp, jacfwd).  grad and vmap: torch.func; bgrad: backward "
          "under vmap over grad_outputs (is_grads_batched); strided: "
          "non-contiguous inputs.  requires: [...] in a spec makes "
          "a missing capability a failure.")

_STATE_STYLE = {YES: "green", BREAKS: "cyan", WRONG: "bold red", NA: "dim", UNMEASURED: "dim"}


def cell_text(line: OpCapabilities, capability: str) -> Text:
    """One cell: its state, coloured by what it means for the run."""
    c = line.cell(capability)
    if c.state == NO:
        style = ("bold red" if c.status in (FAIL, ERROR) else "yellow" if c.status == WARN
                 else "")
    else:
        style = _STATE_STYLE.get(c.state, "")
    return Text(c.state, style=style)


def _columns(headers: dict[str, str]) -> tuple[Column, ...]:
    """The op, then one right-aligned column per capability under `headers`."""
    def column(capability: str) -> Column:
        return Column(headers[capability], lambda line: cell_text(line, capability), right=True)

    return (Column("op", lambda line: line.op), *(column(c) for c in MATRIX))


#: The op, then one column per capability, with the full and the short headers.
COLUMNS = _columns(HEADERS)
SHORT_COLUMNS = _columns(SHORT)


def wrapped(text: str, width: int | None) -> str:
    """`text` as lines of at most `width` characters (one line when None)."""
    return text if width is None else textwrap.fill(text, width, break_on_hyphens=False)


def capability_table(matrix: Sequence[OpCapabilities], width: int | None = None,
                     title: str = "capabilities") -> RenderableType:
    """The matrix in at most `width` columns (as wide as it needs when None), no cell wrapped:
    the full table, the table with short headers, or that table with long names on lines of
    their own (capability_grid)."""
    for columns, legend in ((COLUMNS, LEGEND), (SHORT_COLUMNS, f"{SHORT_LEGEND}  {LEGEND}")):
        table = build(columns, matrix, title)
        need = width_of(table)
        if width is None or need <= width:  # (width None: the first, full, table)
            # title and legend pre-wrapped at the table's width: rich crops what is wider
            table.title, table.caption = wrapped(title, need), wrapped(legend, need)
            table.caption_justify = "left"
            return table
    assert width is not None  # the loop returned the full table otherwise
    return capability_grid(matrix, width, title)


def capability_grid(matrix: Sequence[OpCapabilities], width: int,
                    title: str = "capabilities") -> Group:
    """The short-header table drawn as lines of `width`: an op name too long for the name
    column gets a line of its own (folded only when longer than `width`) and its states go on
    the next line, under the headers, so no state cell ever wraps or moves."""
    spans = [max(len(SHORT[c]), *(len(line.cell(c).state) for line in matrix)) for c in MATRIX]
    grid = sum(spans) + 2 * len(spans)
    name_width = max(4, min(max(len(line.op) for line in matrix), width - grid - 1))
    head = Text(f"{'op':<{name_width}}" + "".join(f"  {SHORT[c]:>{s}}"
                                                    for c, s in zip(MATRIX, spans, strict=True)),
                style="bold")
    parts: list[RenderableType] = [Text(wrapped(title, width), justify="center"), Text(""),
                                   head, Text("─" * min(width, head.cell_len))]
    for line in matrix:
        states = Text()
        for c, s in zip(MATRIX, spans, strict=True):
            cell = cell_text(line, c)
            states.append(" " * (s + 2 - cell.cell_len))
            states.append(cell)
        if len(line.op) <= name_width:
            parts.append(Text(f"{line.op:<{name_width}}") + states)
            continue
        parts.append(Text("\n".join(line.op[i:i + width]
                                    for i in range(0, len(line.op), width))))
        parts.append(Text(" " * name_width) + states)
    parts += [Text(""), Text(wrapped(f"{SHORT_LEGEND}  {LEGEND}", width))]
    return Group(*parts)

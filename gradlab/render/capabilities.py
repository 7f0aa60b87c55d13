"""The capability matrix as one compact table: a line per op, a column per capability.

Made from gradlab.results.capabilities (after a check, from its rows; in `gradlab list`, from
the bundled ops' registry).  It fits a 100-column terminal: the cells are short words, the op
names wrap when they must, and the legend (the caption) wraps at the table's width.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from gradlab.model import MATRIX
from gradlab.render.tables import Column, fit
from gradlab.results import ERROR, FAIL, WARN
from gradlab.results.capabilities import BREAKS, NA, NO, UNMEASURED, WRONG, YES, OpCapabilities

#: Column headers (short: ten of them and the op must fit in 100 columns).
HEADERS = {"first_order": "1st", "second_order": "2nd", "forward_ad": "fwd",
           "autocast": "autocast", "compile": "compile", "vmap": "vmap", "func_grad": "grad",
           "batched_grad": "bgrad",
           "deterministic": "determ", "noncontiguous": "strided", "cuda": "cuda"}

#: The legend under the table.
LEGEND = ("yes: runs and matches; no: raises (2nd order, fwd and autocast: a warn where the "
          "reference has them; deterministic: two runs differ bitwise); wrong: differs (a "
          "failure); n/a: the reference lacks it too; breaks: torch.compile matches with graph "
          "breaks; -: not measured (compile: --capabilities all; cuda: no GPU).  fwd: forward "
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


def _column(capability: str) -> Column:
    return Column(HEADERS[capability], lambda line: cell_text(line, capability), right=True)


#: The op, then one column per capability (right-aligned cells never wrap; the op may).
COLUMNS = (Column("op", lambda line: line.op),
           *(_column(c) for c in MATRIX))


def capability_table(matrix: Sequence[OpCapabilities], width: int | None = None,
                     title: str = "capabilities") -> Table:
    """The matrix as a table no wider than `width` (as wide as it needs when None)."""
    table = fit(COLUMNS, matrix, width, title, drop=(), caption=LEGEND)
    table.caption_justify = "left"
    return table

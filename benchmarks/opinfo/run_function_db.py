"""gradlab.check on the custom Functions and torch.library ops torch's own tests are built on.

torch ships two small databases of hand-written custom code, written by torch's developers to
test that subsystems (vmap, torch.compile, functorch) support it:
`torch.testing._internal.autograd_function_db` (autograd.Functions: numpy kernels, mark_dirty,
mark_non_differentiable, once_differentiable, setup_context, vmap and jvp rules) and
`custom_op_db` (torch.library.custom_op ops with fake kernels, registered autograd and vmap).
Their tests check consistency (vmap against a loop, compiled against eager), never a
gradient's value against the math.  Each entry is checked here at gradlab's defaults against a
plain-autograd reference written from the math (REFERENCES), and each one's verdict is
compared with what the entry's code does, read by hand (WRONG, PRECONDITION; RESULTS.md).

    pip install --target "$DIR" expecttest     # torch's testing module imports it
    PYTHONPATH="$DIR" python benchmarks/opinfo/run_function_db.py [--json out.json]

One line per entry: its verdict (red: a fail or error row), the expected one, and the rows
that are not passes.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import gradlab
from gradlab.render.words import message


def cube(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x ** 3, 3 * x ** 2


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * y


def sort(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ind = torch.argsort(x, dim=dim)
    return torch.take_along_dim(x, ind, dim), ind, torch.argsort(ind, dim=dim)


def take(x: torch.Tensor, ind: torch.Tensor, ind_inv: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.take_along_dim(x, ind, dim)


def select(x: torch.Tensor, idx: Any = (2,)) -> torch.Tensor:
    return x[idx]


def split(x: torch.Tensor, splits: list[int], dim: int) -> list[torch.Tensor]:
    return [t.clone() for t in torch.tensor_split(x, splits, dim)]


#: Entry name -> the same math in plain autograd (none: the entry has no gradient to check,
#: and gradlab checks it without a reference).
REFERENCES: dict[str, Callable[..., Any]] = {
    "NumpyCubeAutogradFunction": cube, "CubeGenVmapAutogradFunction": cube,
    "NumpyExpMarkDirtyAutogradFunction": torch.exp,
    "NumpyMulAutogradFunction": mul, "MulGenVmapAutogradFunction": mul,
    "NumpyCubeNotComposableAutogradFunction": lambda x: x ** 3,
    "NumpySortAutogradFunction": sort, "SortGenVmapAutogradFunction": sort,
    "NumpyTakeAutogradFunction": take,
    "SelectAutogradFunction": select, "SelectGenVmapAutogradFunction": select,
    "ForwardHasDefaultArgsAutogradFunction": select,
    "ScaleGradGenVmapAutogradFunction": torch.clone,
    "ZeroGradientsGenVmapAutogradFunction": lambda x, y: (x.clone(), y.clone()),
    "NumpyCubeCustomOp": cube, "NumpyMulCustomOp": mul,
    "NumpyMulScalarCustomOp": lambda x, *, scalar: x * scalar,
    "NumpySortCustomOp": sort, "NumpyTakeCustomOp": take,
    "NumpyViewCopyCustomOp": lambda x, shape: x.reshape(shape).clone(),
    "NumpyCatCustomOp": lambda xs, dim: torch.cat(xs, dim),
    "NumpySplitCopyCustomOp": split,
    "NumpySplitCopyWithIntCustomOp": lambda x, s, dim: (split(x, s, dim), len(s)),
}

#: Entries whose gradient is wrong against the math, read off their code (RESULTS.md says
#: how): red is right for these, and only for these.
WRONG = {
    "NumpyCubeNotComposableAutogradFunction": "backward returns 3x^2 without grad_output",
    "NumpySortAutogradFunction": "forward returns x unsorted; backward permutes the gradient",
    "CubeGenVmapAutogradFunction": "the second output's gradient adds 6 * dinput, not "
                                   "6 * grad * x",
    "ScaleGradGenVmapAutogradFunction": "a clone whose backward scales by 3.14 (on purpose)",
    "ZeroGradientsGenVmapAutogradFunction": "clones whose backward returns zeros (on purpose)",
}
#: Entries right only under a precondition their arguments imply and gradlab's variants break:
#: counted apart, neither right nor wrong.
PRECONDITION = {
    "NumpyTakeAutogradFunction": "backward takes by ind_inv, the inverse of the permutation "
                                 "ind: repeated_index repeats ind's values, so the pair no "
                                 "longer matches",
    "NumpyTakeCustomOp": "as NumpyTakeAutogradFunction",
}


def entries() -> list[Any]:
    from torch.testing._internal.autograd_function_db import autograd_function_db
    from torch.testing._internal.custom_op_db import custom_op_db
    return [*autograd_function_db, *custom_op_db]


def one(op: Any) -> dict[str, Any]:
    """The verdict and the rows not passing of one entry's samples, in float64."""
    expected = "red" if op.name in WRONG else "either" if op.name in PRECONDITION else "green"
    rec: dict[str, Any] = {"name": op.name, "expected": expected,
                           "rows": [], "counts": {}}
    t0 = time.perf_counter()
    for s in op.sample_inputs("cpu", torch.float64, requires_grad=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = gradlab.check(op.op, [s.input, *s.args], kwargs=s.kwargs or None,
                                   reference=REFERENCES.get(op.name), name=op.name, timeout=90)
        for r in report.rows:
            rec["counts"][r.status] = rec["counts"].get(r.status, 0) + 1
        rec["rows"] += [{"check": r.check, "variant": r.variant, "status": r.status,
                         "hint": r.hint, "reason": r.reason, "words": message(r)[:300]}
                        for r in report.rows if r.status != "pass"]
    rec["got"] = "red" if any(r["status"] in ("fail", "error") for r in rec["rows"]) \
        else "green"
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    out = []
    for op in entries():
        rec = one(op)
        out.append(rec)
        mark = "ok" if rec["got"] == rec["expected"] else (
            "precondition" if rec["expected"] == "either" else "MISMATCH")
        print(f"{op.name}: {rec['got']} (expected {rec['expected']}) {mark} "
              f"{rec['seconds']} s {rec['counts']}", flush=True)
        for r in rec["rows"]:
            print(f"    {r['status']} {r['check']} {r['variant']} {r['hint'] or r['reason']}: "
                  f"{r['words'][:150]}")
    agree = sum(r["got"] == r["expected"] for r in out)
    print(f"{agree} of {len(out) - len(PRECONDITION)} entries as expected (and "
          f"{len(PRECONDITION)} under a precondition: "
          f"{', '.join(r['name'] + ' ' + r['got'] for r in out if r['expected'] == 'either')}); "
          "correct ones red: "
          f"{sum(r['got'] == 'red' and r['expected'] == 'green' for r in out)}; wrong ones "
          f"missed: {sum(r['got'] == 'green' and r['expected'] == 'red' for r in out)}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

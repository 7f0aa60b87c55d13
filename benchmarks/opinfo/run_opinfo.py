"""gradlab.check on torch's own ops as custom Functions: false reds at scale on correct code.

torch's OpInfo database (torch.testing._internal.common_methods_invocations: every op with its
sample inputs, the ones torch's own gradcheck tests use) holds ~540 ops with float64 autograd.
Each op is wrapped in `Recompute`, a correct custom Function written as a checkpoint is (forward
without a graph, backward by recomputing the op under autograd, differentiable again), and
checked at gradlab's defaults with the plain op as the reference, on up to two samples per op
(the largest of at most 400 elements).  A fail or error row is then gradlab's false red, a
shortcoming of the wrapper, or a bug of torch's: RESULTS.md triages them.

    pip install --target "$DIR" expecttest     # torch's testing module imports it
    PYTHONPATH="$DIR" python benchmarks/opinfo/run_opinfo.py --json out.json [--only NAME ...]

Each sample's line: op|variant|sample, seconds, and the fail, error and warn row counts.
The JSON is written after every sample, and a sample whose op kills the process (torch 2.13's
heap corrupted) is recorded as a harness error, the sweep going on past it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

import gradlab
from gradlab.render.words import message

#: The largest sample (elements over its tensors) checked, and samples per op.
MAX_ELEMENTS = 400
SAMPLES = 2


class Recompute(torch.autograd.Function):
    """A correct custom Function around any op: forward without a graph, backward by running
    the op again under autograd on the saved inputs (themselves, when a double backward needs
    the graph to them); outputs the op itself does not differentiate are marked so."""

    @staticmethod
    def forward(ctx: Any, f: Any, nondiff: tuple[int, ...], *args: Any) -> Any:
        ctx.f = f
        ctx.tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        ctx.plain = [None if isinstance(a, torch.Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensors))
        out = f(*args)
        outs = out if isinstance(out, tuple) else (out,)
        marked = [o for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and (
            k in nondiff or not (o.is_floating_point() or o.is_complex()))]
        if marked:
            ctx.mark_non_differentiable(*marked)
        return out

    @staticmethod
    def backward(ctx: Any, *gs: Any) -> Any:
        args = list(ctx.plain)
        wrt = []
        for i, t in zip(ctx.tensors, ctx.saved_tensors, strict=True):
            # double backward: the saved input itself, so the gradient keeps its graph to it;
            # a tensor that takes no gradient is copied (a batch norm's running statistics,
            # which the recompute would update a second time)
            x = t if torch.is_grad_enabled() and t.requires_grad else t.detach()
            if ctx.needs_input_grad[i + 2]:
                x = x if x.requires_grad else x.requires_grad_()
                wrt.append((i, x))
            elif not x.requires_grad:
                x = x.clone()
            args[i] = x
        with torch.enable_grad():
            out = ctx.f(*args)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, gs, strict=False)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        grads: list[Any] = [None] * len(args)
        if wrt and pairs:
            got = torch.autograd.grad([p[0] for p in pairs], [x for _, x in wrt],
                                      [p[1] for p in pairs], allow_unused=True,
                                      create_graph=torch.is_grad_enabled())
            for (i, _), g in zip(wrt, got, strict=True):
                grads[i] = g
        return (None, None, *grads)


def plain(a: Any) -> bool:
    return a is None or isinstance(a, (bool, int, float, str, torch.dtype)) or (
        isinstance(a, (tuple, list)) and all(isinstance(e, (int, float, bool)) for e in a))


def callables(op: Any, sample: Any) -> tuple[Any, Any, list[Any]] | None:
    """(the wrapped Function, the plain op, the positional args) of one sample, or None where
    a spec could not hold it (tensor lists, sparse or complex tensors, tensor kwargs)."""
    args = [sample.input, *sample.args]
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not isinstance(sample.input, torch.Tensor) or sample.input.numel() == 0 or not all(
            isinstance(a, torch.Tensor) or plain(a) for a in args) or not all(
            plain(v) for v in sample.kwargs.values()) or any(
            t.is_sparse or t.is_complex() for t in tensors):
        return None
    kwargs = dict(sample.kwargs)

    def ref(*a: Any) -> Any:
        return op.op(*a, **kwargs)

    with torch.enable_grad():
        out = ref(*args)
    outs = out if isinstance(out, tuple) else (out,)
    nondiff = tuple(k for k, o in enumerate(outs) if isinstance(o, torch.Tensor)
                    and not o.requires_grad)

    def fn(*a: Any) -> Any:
        return Recompute.apply(ref, nondiff, *a)

    ref.__name__ = fn.__name__ = op.name.replace(".", "_")
    return fn, ref, args


def size(sample: Any) -> int:
    n = sum(a.numel() for a in [sample.input, *sample.args] if isinstance(a, torch.Tensor))
    return n if n <= MAX_ELEMENTS else -1


def one(op: Any, j: int, sample: Any) -> dict[str, Any] | None:
    made = callables(op, sample)
    if made is None:
        return None
    fn, ref, args = made
    rec: dict[str, Any] = {"id": f"{op.name}|{op.variant_test_name}|{j}", "op": op.name,
                           "shapes": [list(a.shape) if isinstance(a, torch.Tensor)
                                      else repr(a)[:40] for a in args],
                           "kwargs": repr(sample.kwargs)[:120]}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = gradlab.check(fn, args, reference=ref, name=op.name, timeout=90)
        rec["counts"] = {s: sum(r.status == s for r in report.rows)
                         for s in ("pass", "fail", "error", "warn", "skip")}
        rec["rows"] = [{"check": r.check, "variant": r.variant, "status": r.status,
                        "hint": r.hint, "reason": r.reason, "words": message(r)[:400]}
                       for r in report.rows if r.status in ("fail", "error", "warn")]
    except Exception as exc:  # gradlab refusing the call (a harness matter)
        rec["harness"] = f"{type(exc).__name__}: {exc}"[:300]
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec


def main() -> None:
    """Run the sweep in a child process, restarted past a sample that kills it (a torch op
    corrupting the heap): that sample is recorded as a harness error."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True, type=Path)
    ap.add_argument("--only", nargs="*", default=None, help="op names")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        sweep(a.json, a.only)
        return
    current = a.json.with_suffix(".current")
    while True:
        current.unlink(missing_ok=True)
        rc = subprocess.call([sys.executable, __file__, "--child", "--json", str(a.json),
                              *(["--only", *a.only] if a.only else [])])
        if rc == 0 or not current.exists():
            return
        rid = current.read_text()
        out = json.loads(a.json.read_text()) if a.json.exists() else []
        out.append({"id": rid, "harness": f"the process died (exit code {rc})"})
        a.json.write_text(json.dumps(out, indent=0))
        print(rid, "died", rc, flush=True)


def sweep(path: Path, only: list[str] | None) -> None:
    from torch.testing._internal.common_methods_invocations import op_db
    done = {r["id"]: r for r in json.loads(path.read_text())} if path.exists() else {}
    out = list(done.values())
    for op in op_db:
        if not op.supports_autograd or torch.float64 not in op.supported_dtypes("cpu") or (
                only and op.name not in only):
            continue
        try:
            samples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))
        except Exception:
            continue
        picked = sorted(range(len(samples)), key=lambda j: -size(samples[j]))
        taken = 0
        for j in picked:
            if taken == SAMPLES or size(samples[j]) < 0:
                break
            rid = f"{op.name}|{op.variant_test_name}|{j}"
            if rid not in done:
                path.with_suffix(".current").write_text(rid)
            rec = done.get(rid) or one(op, j, samples[j])
            if rec is None:
                continue
            taken += 1
            if rid in done:
                continue
            out.append(rec)
            path.write_text(json.dumps(out, indent=0))
            c = rec.get("counts", {})
            print(rid, rec["seconds"], c.get("fail"), c.get("error"), c.get("warn"),
                  rec.get("harness", ""), flush=True)


if __name__ == "__main__":
    main()

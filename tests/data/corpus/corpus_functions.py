"""The hint-precision corpus: broken custom Functions with known causes, each beside its twin.

Most entries are generated: a base op (corpus_ops.OPS: exp, tanh, mul, matmul, conv2d, ...)
crossed with a bug mutation (a constant factor, a flipped sign, a transpose, swapped gradients,
the chain rule dropped, a missing gradient, a wrong band or tail tile, a layout assumption, a
term of a multi-term derivative with the wrong factor; corpus_mutations.py).  The rest are
written by hand (corpus_special.py, listed in corpus_entries.py: a dropout replaying the wrong
mask, state kept on the Function class, a cached forward, ...) or imported from the bug
classes (tests/data/bugclasses).

Each `Entry` says which hint codes (gradlab.render.words.HINTS) name the true cause: `right`.
An EMPTY right set means no hint names it (a mixed error: every likely cause gradlab could
offer sends the user to the wrong place, so the right answer is to stay silent).

Every Function made here is also a module attribute (`corpus_functions:exp_x2`), so a spec can
name it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_entries import special
from corpus_mutations import (
    Mutate,
    approx,
    band,
    border,
    detached,
    detached_grad_output,
    grows,
    in_float32,
    inplace_grad_output,
    inplace_saved,
    layernorm_without,
    nochain,
    on,
    one_short,
    raw,
    raw_grad_output,
    raw_saved,
    scaled,
    swapped,
    unary,
    whole_tiles,
)
from corpus_ops import OPS, BaseOp, Entry, GradFn, Grads, example, gelu_grad, silu_grad


def wrap(name: str, op: BaseOp, grads: GradFn, *, raw_input: bool = False,
         stash: bool = False, doc: str = "") -> type[Function]:
    """A custom Function computing op.fwd with `grads` as its backward.

    raw_input: forward reads its inputs' raw memory (assumes contiguous inputs); stash: the
    inputs are kept detached on ctx instead of save_for_backward (first order still right).
    """

    def forward(ctx: Any, *xs: Tensor) -> Tensor:
        y = op.fwd(*(raw(x) for x in xs)) if raw_input else op.fwd(*xs)
        if stash:
            ctx.stash = tuple(x.detach() for x in xs)
        else:
            ctx.save_for_backward(*xs)
        return y

    def backward(ctx: Any, g: Tensor) -> Grads:
        xs = ctx.stash if stash else ctx.saved_tensors
        return grads(tuple(xs), g)

    cls = type(name, (Function,), {"forward": staticmethod(forward),
                                   "backward": staticmethod(backward),
                                   "__doc__": doc or f"{op.name}: correct", "__module__": __name__})
    cls.__qualname__ = name
    globals()[name] = cls
    return cls


CF = frozenset({"constant_factor"})
#: a factor -1 is a sign flip, and also truly a constant factor
SIGN = frozenset({"sign", "constant_factor"})
#: None reaches the user as no gradient; both words name it
MISSING = frozenset({"missing", "zero"})
TAIL = frozenset({"tail_tile", "ragged_only"})
#: every hint that says "assumes contiguous input memory"
LAYOUT_IN = frozenset({"noncontiguous_only", "transposed_only", "channels_last_only",
                       "expanded_only", "expanded_refused"})
NONE: frozenset[str] = frozenset()


def H(*codes: str) -> frozenset[str]:
    return frozenset(codes)


#: name -> (mutation, right hints, what the bug is)
MUTATIONS: dict[str, tuple[Mutate, frozenset[str], str]] = {
    "x2": (scaled(2.0), CF, "backward scaled by 2"),
    "x0.5": (scaled(0.5), CF, "backward scaled by 0.5"),
    "x-3": (scaled(-3.0), CF, "backward scaled by -3"),
    "x10": (scaled(10.0), CF, "backward scaled by 10"),
    "neg": (scaled(-1.0), SIGN, "backward negated"),
    "in1_x2": (scaled(2.0, (1,)), CF, "input 1's gradient scaled by 2"),
    "in0_neg": (scaled(-1.0, (0,)), SIGN, "input 0's gradient negated"),
    "t0": (on((0,), lambda t: t.T), H("transposed"), "input 0's gradient transposed"),
    "t1": (on((1,), lambda t: t.T), H("transposed"), "input 1's gradient transposed"),
    "swap": (swapped, H("swapped"), "the two gradients returned in swapped order"),
    "nochain": (nochain, H("no_chain_rule"), "grad_output ignored (chain rule dropped)"),
    "none0": (on((0,), lambda t: None), MISSING, "input 0's gradient returned as None"),
    "none1": (on((1,), lambda t: None), MISSING, "input 1's gradient returned as None"),
    "none2": (on((2,), lambda t: None), MISSING, "input 2's gradient returned as None"),
    "zero0": (on((0,), torch.zeros_like), H("zero", "missing"), "input 0's gradient zero"),
    "zero1": (on((1,), torch.zeros_like), H("zero", "missing"), "input 1's gradient zero"),
    "rows": (on((0,), band(0, 1, 3, 3.0)), H("index_range"), "rows 1..2 of the gradient x3"),
    "row0": (on((0,), band(0, 0, 1, 0.0)), H("index_range"),
             "row 0 of the gradient never written (a loop from 1)"),
    "lastcol": (on((0,), band(1, 5, 6, 0.0)), H("index_range"),
                "the last of 6 columns never written (a loop to n - 1)"),
    "cols0": (on((0,), band(1, 2, 5, 0.0)), H("index_range"),
              "columns 2..4 of the gradient never written"),
    "chan1": (on((1,), band(0, 1, 2, 2.0)), H("index_range"),
              "output channel 1 of the weight gradient x2"),
    "border0": (on((0,), border), H("border_band"), "the border of the gradient left at 0"),
    "tiles": (on((0,), whole_tiles), TAIL, "a tiled loop that drops the remainder tile"),
    # autograd sums [1, n] down to the [n] bias: the gradient is right, the contract leans on
    # the engine (a warn since issue 28's calibration: gpytorch returns such shapes)
    "keepdim2": (on((2,), lambda t: t[None]), H("summed_shape"),
                 "the bias gradient summed with keepdim (shape [1, n])"),
    "rawsaved": (raw_saved, LAYOUT_IN,
                 "backward reads the saved inputs' raw memory (assumes them contiguous)"),
    "inchan": (on((0,), band(1, 2, 4, 2.0)), H("index_range"),
               "input channels 2..3 of the input gradient x2 (a group offset)"),
    "rawgo": (raw_grad_output, H("grad_output_layout"),
              "backward reads grad_output's raw memory (assumes it contiguous)"),
    # the in-place write also raises on a stride-0 grad_output (y.sum().backward()) and
    # input: "the Function raised an exception" is then the bug itself, not another cause
    "inplacego": (inplace_grad_output, H("inplace_grad_output", "crash"),
                  "the gradient written into grad_output in place"),
    "inplacesaved": (inplace_saved, H("inplace_saved", "crash"),
                     "backward scales a saved input in place"),
    "count": (one_short, H("wrong_count"), "one gradient too few returned"),
    "detach": (detached, H("second_order_only"),
               "backward from detached inputs (not differentiable twice)"),
    "f32": (in_float32, H("precision_loss"), "a float64 backward computed in float32"),
    "approx": (on(None, approx), H("approximate"), "a 0.5% error that varies by element"),
    "approx1e-5": (on(None, lambda t: t + (approx(t) - t) / 500), H("approximate"),
                   "a 1e-5 relative error that varies by element (a solver's tolerance)"),
    "detachg": (detached_grad_output, H("second_order_only"),
                "backward from a detached grad_output (not differentiable twice)"),
}

#: mutations whose hint is another change's (xfail until it lands)
PENDING = {"f32": "precision_loss", "approx": "approximate"}


#: (op, name) -> (mutation, what the bug is)
MIXED: dict[tuple[str, str], tuple[Mutate, str]] = {
    ("gelu", "no3"): (unary(lambda x, g: g * gelu_grad(x, cubic=1.0)),
                      "GELU (tanh): the 3 of d(x^3)/dx forgotten"),
    ("silu", "term2"): (unary(lambda x, g: g * silu_grad(x, second=2.0)),
                        "SiLU: the x * sigmoid'(x) term doubled"),
    ("sinx", "cos2"): (unary(lambda x, g: g * (2 * torch.cos(x) * x + torch.sin(x))),
                       "sin(x) * x: the cos term doubled"),
    ("sinx", "dropterm"): (unary(lambda x, g: g * torch.cos(x) * x),
                           "sin(x) * x: product rule, the sin(x) term dropped"),
    ("sinx", "minus"): (unary(lambda x, g: g * (torch.cos(x) * x - torch.sin(x))),
                        "sin(x) * x: one term's sign flipped"),
    ("softplus2", "beta"): (unary(lambda x, g: g * torch.sigmoid(x)),
                            "softplus(beta=2): sigmoid(x) instead of sigmoid(beta x)"),
    ("tanh", "nosquare"): (unary(lambda x, g: g * (1 - torch.tanh(x))),
                           "tanh: 1 - y instead of 1 - y^2"),
    ("sigmoid", "plus"): (unary(lambda x, g: g * torch.sigmoid(x) * (1 + torch.sigmoid(x))),
                          "sigmoid: s (1 + s) instead of s (1 - s)"),
    ("layernorm", "nomean"): (layernorm_without("mean"),
                              "layernorm: the mean(grad) term dropped"),
    ("layernorm", "noxhat"): (layernorm_without("xhat"),
                              "layernorm: the xhat * mean(grad * xhat) term dropped"),
    ("softmax", "nosum"): (unary(lambda x, g: torch.softmax(x, -1) * g),
                           "softmax: the sum(grad * s) term dropped"),
    ("div", "nox"): (lambda op: lambda xs, g: (g / xs[1], -g / xs[1] ** 2),
                     "x / y: d/dy written as -1 / y^2 (the x forgotten)"),
    # the weight (not the gradient) transposed: no hint's words fit
    ("linear", "wT"): (lambda op: lambda xs, g: (g @ xs[1].T, g.T @ xs[0], g.sum(0)),
                       "linear: grad_x = grad @ W.T instead of grad @ W"),
    ("matmul", "noT"): (lambda op: lambda xs, g: (g @ xs[1], xs[0].T @ g),
                        "matmul: grad_a = grad @ b, the transpose of b forgotten"),
    ("exp", "absg"): (unary(lambda x, g: g.abs() * torch.exp(x)),
                      "exp: |grad_output| instead of grad_output"),
    ("linear", "biasrow0"): (lambda op: lambda xs, g: (g @ xs[1], g.T @ xs[0], g[0]),
                             "linear: the bias gradient is grad[0], not grad.sum(0)"),
}

#: (op, mutation, shapes): the generated entries (shapes None: the op's own)
GENERATED: list[tuple[str, str, tuple[tuple[int, ...], ...] | None]] = [
    *[("exp", m, None) for m in ("x2", "neg", "nochain", "t0", "zero0", "rawgo", "inplacego",
                                 "f32", "approx")],
    ("exp", "approx1e-5", None),
    ("exp", "tiles", ((3, 20),)),
    ("exp", "tiles", ((1, 2, 3, 30),)),
    # a pattern is named only when chance cannot explain it: enough elements for that
    ("exp", "row0", ((8, 6),)),
    ("exp", "lastcol", ((4, 6),)),
    *[("tanh", m, None) for m in ("x0.5", "neg", "nochain", "t0", "none0", "inplacesaved",
                                  "detach", "f32")],
    ("tanh", "tiles", ((3, 16),)),
    *[("sigmoid", m, None) for m in ("x-3", "x10", "nochain", "t0", "rawgo")],
    ("sigmoid", "rows", ((8, 6),)),
    *[("softplus", m, None) for m in ("x2", "neg", "zero0")],
    ("softplus", "border0", ((6, 6),)),
    *[("sinx", m, None) for m in ("x0.5", "nochain", "t0", "f32", "approx")],
    *[("softmax", m, None) for m in ("x2", "neg", "nochain", "t0")],
    ("softmax", "cols0", ((4, 8),)),
    *[("layernorm", m, None) for m in ("x10", "neg", "nochain")],
    *[("sumdim", m, None) for m in ("x2", "neg", "nochain")],
    *[("mul", m, None) for m in ("swap", "in1_x2", "in0_neg", "nochain", "none1", "zero1", "t1",
                                 "count", "rawgo", "detachg")],
    *[("div", m, None) for m in ("swap", "x0.5", "nochain", "none0", "in0_neg")],
    *[("matmul", m, None) for m in ("swap", "t1", "t0", "x2", "nochain", "none1", "rawgo",
                                    "f32")],
    *[("linear", m, None) for m in ("t1", "x2", "neg", "nochain", "none2", "keepdim2")],
    *[("conv2d", m, None) for m in ("x2", "neg", "nochain", "none1", "border0", "chan1")],
    ("conv2d", "inchan", ((1, 4, 5, 5), (3, 4, 3, 3))),
    ("exp", "rawsaved", None),
    ("matmul", "rawsaved", None),
]

#: entries with options: an approximate method checked with the tolerance its user set
#: (issue 21's SDE adjoint: small values pass, the magnitude variant's values do not)
WITH_OPTIONS: list[tuple[str, str, Mutate, frozenset[str], str, dict[str, Any]]] = [
    ("mul", "grows", grows, H("approximate", "value_dependent"),
     "an approximate gradient whose error grows with the values (1e-3 x^2), tolerance 2e-3",
     {"tolerances": {"float64": (1e-6, 2e-3)}}),
]

#: entries made again in float32 (the bug in a float32 model; precision_loss must not fire)
FLOAT32 = [("exp", "x2"), ("matmul", "t1"), ("sigmoid", "nochain"), ("conv2d", "border0"),
           ("mul", "swap"), ("tanh", "neg")]
MIXED_FLOAT32 = [("softmax", "nosum"), ("gelu", "no3"), ("silu", "term2")]

#: where exactly the wrong elements of a pattern entry lie (corpus_ops.Entry.where)
WHERE: dict[str, tuple[str, tuple[int, ...], int, int]] = {
    "sigmoid-rows@8x6": ("slice", (0,), 1, 3),
    "softmax-cols0@4x8": ("slice", (1,), 2, 5),
    "conv2d-chan1": ("slice", (0,), 1, 2),
    "conv2d-inchan@1x4x5x5": ("slice", (1,), 2, 4),
    "exp-tiles@3x20": ("tail", (1,), 16, 20),
    # issue 21: 24..29 are the partial tile of 8s, not "16..29 after 16"
    "exp-tiles@1x2x3x30": ("tail", (3,), 24, 30),
    "softplus-border0@6x6": ("border", (0, 1), 0, 1),
    "conv2d-border0": ("border", (2, 3), 0, 1),
    "conv2d-border0@f32": ("border", (2, 3), 0, 1),
    "exp-row0@8x6": ("slice", (0,), 0, 1),
    "exp-lastcol@4x6": ("slice", (1,), 5, 6),
}
#: words a right finding must say: a second-order finding names the grad_output as one
SAYS = {"mul-detachg": "grad_output 0"}

#: ops whose forward reads its inputs' raw memory; ops that keep their inputs on ctx
RAW_INPUT = ("exp", "tanh", "mul", "matmul")
STASHED = ("exp", "mul")


def _ident(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s)


def _twin(op: BaseOp) -> type[Function]:
    name = _ident(op.name)
    return globals().get(name) or wrap(name, op, op.grads)


def _args(op: BaseOp, shapes: tuple[tuple[int, ...], ...] | None,
          dtype: torch.dtype) -> Callable[[], list[Any]]:
    return lambda: example(op, 0, shapes, dtype)


def _entry(op_name: str, key: str, mutate: Mutate, right: frozenset[str], cause: str, *,
           shapes: tuple[tuple[int, ...], ...] | None = None, pending: str = "",
           dtype: torch.dtype = torch.float64, options: dict[str, Any] | None = None,
           **flags: bool) -> Entry:
    op = OPS[op_name]
    size = "x".join(str(n) for n in shapes[0]) if shapes else ""
    tag = (f"@{size}" if size else "") + ("@f32" if dtype == torch.float32 else "")
    eid = f"{op_name}-{key}{tag}"
    broken = wrap(_ident(eid), op, mutate(op), doc=f"BROKEN: {cause}", **flags)
    twin_id = f"{op_name}{tag}"
    return Entry(eid, broken, _twin(op), op.fwd, _args(op, shapes, dtype), right, cause,
                 twin_id=twin_id, pending=pending, where=WHERE.get(eid), says=SAYS.get(eid, ""),
                 options=options or {})


def generated() -> list[Entry]:
    """The base-op x mutation entries, the layout and ctx entries, and the mixed errors."""
    out = [_entry(op, m, MUTATIONS[m][0], MUTATIONS[m][1], MUTATIONS[m][2], shapes=shapes,
                  pending=PENDING.get(m, "")) for op, m, shapes in GENERATED]
    out += [_entry(op, "rawin", lambda o: o.grads, LAYOUT_IN,
                   "forward reads its inputs' raw memory (assumes them contiguous)",
                   raw_input=True) for op in RAW_INPUT]
    out += [_entry(op, "stash", lambda o: o.grads, H("ctx_input", "second_order_only"),
                   "inputs kept detached on ctx instead of save_for_backward", stash=True)
            for op in STASHED]
    out += [_entry(op, key, mutate, NONE, cause) for (op, key), (mutate, cause) in MIXED.items()]
    out += [_entry(op, key, mutate, right, cause, options=options)
            for op, key, mutate, right, cause, options in WITH_OPTIONS]
    f32 = torch.float32
    out += [_entry(op, m, *MUTATIONS[m], dtype=f32) for op, m in FLOAT32]
    out += [_entry(op, key, MIXED[op, key][0], NONE, MIXED[op, key][1], dtype=f32)
            for op, key in MIXED_FLOAT32]
    return out


def corpus() -> list[Entry]:
    """Every entry: generated, hand-written and the bug classes."""
    return generated() + special()


CORPUS = corpus()

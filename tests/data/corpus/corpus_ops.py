"""The hint corpus's parts: its `Entry` record, and base ops (plain-autograd math with its
hand-written derivative).

Each `BaseOp` is one differentiable function written twice: `fwd` in plain torch (it is also
the reference gradlab compares with) and `grads`, the vector-Jacobian product a correct custom
backward returns.  The corpus (corpus_functions.py) wraps `fwd` and a mutated `grads` into
torch.autograd.Functions; the unmutated wrap is the correct twin.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

Grads = tuple[Tensor | None, ...]
#: (inputs, grad_output) -> one gradient per input
GradFn = Callable[[tuple[Tensor, ...], Tensor], Grads]

#: layernorm-ish: the epsilon under the square root (as torch's layer_norm default)
EPS = 1e-5
#: conv2d: padding 1, so the border of the input gradient has fewer taps than the middle
PAD = 1


@dataclass(frozen=True)
class BaseOp:
    """One op: its math, its derivative, its example shapes and the smallest |value| of each
    input (away from 0 where a derivative has a pole, such as x / y at y = 0)."""

    name: str
    fwd: Callable[..., Tensor]
    grads: GradFn
    shapes: tuple[tuple[int, ...], ...]
    min_abs: tuple[float, ...] = ()
    #: inputs are uniform in [-scale, scale): wide enough that a wrong term's error varies
    scale: float = 1.0


@dataclass(frozen=True)
class Entry:
    """One corpus entry: a broken Function, its correct twin, and the causes that are right."""

    id: str
    broken: Any
    twin: Any
    reference: Callable[..., Any]
    #: fresh example inputs on every call (a Function may write its inputs)
    args: Callable[[], list[Any]]
    #: the hint codes that name the true cause (empty: none does; any hint is wrong)
    right: frozenset[str]
    #: the bug in a few words
    cause: str
    #: the twin's identity: entries with the same twin and inputs share one twin run
    twin_id: str = ""
    #: extra gradlab.check options the bug needs (defaults otherwise)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: a hint code another change introduces; until it lands the entry may miss (xfail)
    pending: str = ""
    #: where exactly the wrong elements are, for a pattern hint: (kind, dims, start, stop) as
    #: gradlab.results.Pattern has them (a border: start 0, stop its width)
    where: tuple[str, tuple[int, ...], int, int] | None = None
    #: words a right finding's message must contain (an advice, a subject's name)
    says: str = ""


def _sinx(x: Tensor) -> Tensor:
    return torch.sin(x) * x


#: GELU's tanh approximation: sqrt(2 / pi) and the cubic coefficient
GELU_K = (2 / torch.pi) ** 0.5
GELU_C = 0.044715


def gelu_grad(x: Tensor, cubic: float = 3.0) -> Tensor:
    """d gelu_tanh(x) / dx; `cubic` is the 3 of d(x^3)/dx (a bug forgets it)."""
    t = torch.tanh(GELU_K * (x + GELU_C * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * GELU_K * (1 + cubic * GELU_C * x**2)


def silu_grad(x: Tensor, second: float = 1.0) -> Tensor:
    """d (x * sigmoid(x)) / dx; `second` scales the x * s' term (a bug doubles it)."""
    s = torch.sigmoid(x)
    return s + second * x * s * (1 - s)


def _layernorm(x: Tensor) -> Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + EPS)


def layernorm_parts(x: Tensor) -> tuple[Tensor, Tensor]:
    """x normalised along its last dim, and 1 / sigma."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    inv = 1 / torch.sqrt(var + EPS)
    return (x - mu) * inv, inv


def _layernorm_grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
    xhat, inv = layernorm_parts(xs[0])
    mg = g.mean(-1, keepdim=True)
    mgx = (g * xhat).mean(-1, keepdim=True)
    return (inv * (g - mg - xhat * mgx),)


def _softmax_grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
    s = torch.softmax(xs[0], -1)
    return (s * (g - (g * s).sum(-1, keepdim=True)),)


def _linear(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return x @ w.T + b


def _conv(x: Tensor, w: Tensor) -> Tensor:
    return F.conv2d(x, w, padding=PAD)


def _conv_grads(xs: tuple[Tensor, ...], g: Tensor) -> Grads:
    x, w = xs
    return (torch.nn.grad.conv2d_input(x.shape, w, g, padding=PAD),
            torch.nn.grad.conv2d_weight(x, w.shape, g, padding=PAD))


SQ = (4, 4)

OPS: dict[str, BaseOp] = {op.name: op for op in (
    BaseOp("exp", torch.exp, lambda xs, g: (g * torch.exp(xs[0]),), (SQ,)),
    BaseOp("tanh", torch.tanh, lambda xs, g: (g * (1 - torch.tanh(xs[0]) ** 2),), (SQ,)),
    BaseOp("sigmoid", torch.sigmoid,
           lambda xs, g: (g * torch.sigmoid(xs[0]) * (1 - torch.sigmoid(xs[0])),), (SQ,)),
    BaseOp("softplus", F.softplus, lambda xs, g: (g * torch.sigmoid(xs[0]),), (SQ,)),
    BaseOp("sinx", _sinx,
           lambda xs, g: (g * (torch.cos(xs[0]) * xs[0] + torch.sin(xs[0])),), (SQ,),
           scale=2.0),
    BaseOp("gelu", lambda x: F.gelu(x, approximate="tanh"),
           lambda xs, g: (g * gelu_grad(xs[0]),), (SQ,), scale=3.0),
    BaseOp("silu", F.silu, lambda xs, g: (g * silu_grad(xs[0]),), (SQ,), scale=3.0),
    BaseOp("softplus2", lambda x: F.softplus(x, beta=2.0),
           lambda xs, g: (g * torch.sigmoid(2 * xs[0]),), (SQ,), scale=2.0),
    BaseOp("softmax", lambda x: torch.softmax(x, -1), _softmax_grads, (SQ,)),
    BaseOp("layernorm", _layernorm, _layernorm_grads, ((4, 6),)),
    BaseOp("sumdim", lambda x: x.sum(1), lambda xs, g: (g[:, None].expand_as(xs[0]),),
           ((3, 5),)),
    BaseOp("mul", torch.mul, lambda xs, g: (g * xs[1], g * xs[0]), (SQ, SQ)),
    BaseOp("div", torch.div, lambda xs, g: (g / xs[1], -g * xs[0] / xs[1] ** 2), (SQ, SQ),
           (0.0, 0.5)),
    BaseOp("matmul", torch.matmul, lambda xs, g: (g @ xs[1].T, xs[0].T @ g), (SQ, SQ)),
    BaseOp("linear", _linear, lambda xs, g: (g @ xs[1], g.T @ xs[0], g.sum(0)),
           ((3, 4), SQ, (4,))),
    BaseOp("conv2d", _conv, _conv_grads, ((1, 2, 5, 5), (3, 2, 3, 3))),
)}


def example(op: BaseOp, seed: int, shapes: tuple[tuple[int, ...], ...] | None = None,
            dtype: torch.dtype = torch.float64) -> list[Tensor]:
    """Fresh example inputs for `op`: uniform in [-scale, scale) (|v| >= the op's min_abs
    times scale), seeded, requiring grad."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i, shape in enumerate(shapes or op.shapes):
        v = torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1
        low = op.min_abs[i] if i < len(op.min_abs) else 0.0
        if low:
            v = torch.where(v < 0, -1.0, 1.0).to(v) * (low + (1 - low) * v.abs())
        out.append((op.scale * v).to(dtype).requires_grad_())
    return out

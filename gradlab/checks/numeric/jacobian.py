"""Numerical and analytical Jacobians: dense (slow mode) and random probes (fast mode).

Everything works on a *flattened* view: the outputs of a call are concatenated into one vector,
so a Jacobian with respect to input i is a [total_output_numel, input_numel] matrix.  Inputs are
perturbed through their own (possibly non-contiguous) memory, element by logical element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gradlab.cases import Inputs, call, standard_normal
from gradlab.checks.diagnosis.diagnose import unravel
from gradlab.checks.numeric import backprop

#: Finite-difference step in float64, as torch.autograd.gradcheck.
EPS = 1e-6
#: float64's machine epsilon: the relative noise of a forward computed in float64.
EPS64 = 2.0 ** -52
#: The step the finite differences take and the relative noise of the forward they difference
#: (gradlab.checks.numeric.fdstep sets both for a forward only float32-accurate); gradcheck's step
#: and float64's rounding unless set.
_FD: ContextVar[tuple[float, float]] = ContextVar("gradlab_fd", default=(EPS, EPS64))


@contextmanager
def fd_step(step: float, noise: float) -> Iterator[None]:
    """Finite differences inside take `step`, for a forward whose relative noise is `noise`."""
    token = _FD.set((step, noise))
    try:
        yield
    finally:
        _FD.reset(token)


def step_and_noise() -> tuple[float, float]:
    """The finite differences' current step and the forward's relative noise (see fd_step)."""
    return _FD.get()


def realview(t: Tensor) -> Tensor:
    """A complex tensor as the real tensor of its (real, imaginary) pairs (a view, trailing dim
    of 2); any other tensor as it is.

    Every Jacobian here treats C^n as R^2n, which is PyTorch's complex convention: for a real
    loss L, z.grad = dL/dx + i dL/dy, and backward with a complex grad_output v is the gradient
    of L = Re(sum(conj(v) * f)) = realview(v) . realview(f).  So realview(grad) = J_R^T
    realview(v) with J_R the real 2m x 2n Jacobian, and v^T J u over real views is what
    gradcheck's Wirtinger checks compare: J_R holds both the plain (df/dz) and the conjugate
    (df/dz*) Wirtinger derivative (they are fixed linear combinations of its 2x2 blocks), so
    random directions with real and imaginary parts both nonzero see an error in either."""
    # resolve_conj: a conjugated view (z.conj()) has no real view; a copy then, never an
    # input (the inputs perturbed in place are gradlab's own fresh tensors)
    return torch.view_as_real(t.resolve_conj().resolve_neg()) if t.is_complex() else t


def real_shape(t: Tensor) -> tuple[int, ...]:
    """The shape of realview(t): a trailing 2 for a complex tensor."""
    return (*t.shape, 2) if t.is_complex() else tuple(t.shape)


def real_numel(t: Tensor) -> int:
    """The number of real values in t (twice its elements when complex)."""
    return 2 * t.numel() if t.is_complex() else t.numel()


def _concat(outs: Sequence[Tensor], dtype: torch.dtype) -> Tensor:
    if not outs:
        return torch.zeros(0, dtype=dtype)
    return torch.cat([realview(o.detach()).reshape(-1).to(dtype=dtype, device="cpu")
                      for o in outs])


def _set(t: Tensor, flat: int, value: float) -> None:
    # Index the logical element (not raw memory) so non-contiguous inputs are perturbed right.
    r = realview(t.detach())
    r[unravel(flat, r.shape)] = value


def _get(t: Tensor, flat: int) -> float:
    r = realview(t.detach())
    return float(r[unravel(flat, r.shape)])


def differentiable(outs: Sequence[Tensor]) -> list[int]:
    """Positions of the outputs that require grad: gradcheck's differentiable outputs (one
    marked with ctx.mark_non_differentiable, or returned detached, has no Jacobian rows)."""
    return [k for k, o in enumerate(outs) if o.requires_grad]


def _kept(outs: Sequence[Tensor], keep: Sequence[int] | None) -> list[Tensor]:
    return list(outs) if keep is None else [outs[k] for k in keep]


def numerical_jacobian(fn: Callable[..., Any], inputs: Inputs, wrt: int,
                       eps: float | None = None, keep: Sequence[int] | None = None) -> Tensor:
    """Central-difference Jacobian of the concatenated outputs w.r.t. args[wrt] (dense).

    keep: the positions of the outputs it covers (Backward.covered; None: all); eps: the step
    (None: step_and_noise's)."""
    eps = step_and_noise()[0] if eps is None else eps
    x = inputs.args[wrt]
    cols = []
    for k in range(real_numel(x)):
        orig = _get(x, k)
        _set(x, k, orig + eps)
        plus = _concat(_kept(call(fn, inputs), keep), torch.float64)
        _set(x, k, orig - eps)
        minus = _concat(_kept(call(fn, inputs), keep), torch.float64)
        _set(x, k, orig)
        cols.append((plus - minus) / (2 * eps))
    n_out = (cols[0].numel() if cols
             else _concat(_kept(call(fn, inputs), keep), torch.float64).numel())
    return torch.stack(cols, dim=1) if cols else torch.zeros(n_out, 0, dtype=torch.float64)


def directional_derivative(fn: Callable[..., Any], inputs: Inputs, wrt: int, direction: Tensor,
                           eps: float | None = None, keep: Sequence[int] | None = None) -> Tensor:
    """(f(x + eps*u) - f(x - eps*u)) / 2eps for args[wrt] = x: the numerical J @ u (over the
    outputs at positions `keep`, all when None; eps None: step_and_noise's)."""
    eps = step_and_noise()[0] if eps is None else eps
    x = realview(inputs.args[wrt].detach())  # a complex input: along its real view
    orig = x.clone()
    u = direction.reshape(x.shape).to(dtype=x.dtype, device=x.device)
    x.copy_(orig + eps * u)
    plus = _concat(_kept(call(fn, inputs), keep), torch.float64)
    x.copy_(orig - eps * u)
    minus = _concat(_kept(call(fn, inputs), keep), torch.float64)
    x.copy_(orig)
    return (plus - minus) / (2 * eps)


@dataclass
class Backward:
    """A graph built once; `vjp(v)` runs backward for a flat output vector v (J^T v per input).

    `first` keeps the first vjp's v and result: the first backward after the graph's forward,
    which a run of forward and backward from the same RNG state repeats (the capabilities
    check takes its base run from it instead of running the Function again).

    The flat output vector covers the differentiable outputs only (`covered`), as gradcheck's
    Jacobians do: an output that does not require grad has no gradient to check."""

    outputs: list[Tensor]
    wrt: list[Tensor]
    first: tuple[Tensor, list[Tensor | None]] | None = None
    #: cover every output, whether it requires grad or not (second order: a gradient that does
    #: not require grad is a double backward that drops its dependence, not a constant).
    every_output: bool = False

    @property
    def covered(self) -> list[int]:
        """Positions (in `outputs`) of the outputs the flat vector covers, in order."""
        return list(range(len(self.outputs))) if self.every_output \
            else differentiable(self.outputs)

    @property
    def n_out(self) -> int:
        return sum(real_numel(self.outputs[k]) for k in self.covered)

    def position(self, m: int) -> tuple[int, tuple[int, ...]]:
        """(output number in `outputs`, index) of entry m of the flat output vector."""
        for k in self.covered:
            shape = real_shape(self.outputs[k])
            if m < math.prod(shape):
                return k, unravel(m, shape)
            m -= math.prod(shape)
        return -1, (m,)

    def vjp(self, v: Tensor, create_graph: bool = False) -> list[Tensor | None]:
        """J^T v for every `wrt` tensor (None where backward returned no gradient)."""
        # copies: a backward that writes into its grad_output (a contract bug the base run
        # reports) must not change v, which `first` keeps for the capabilities' base run
        grads_out = [g.to(dtype=o.dtype, device=o.device, copy=True)
                     for g, o in zip(self.split(v), self.outputs, strict=True)]
        pairs = [(o, g) for o, g in zip(self.outputs, grads_out, strict=True) if o.requires_grad]
        if not pairs or not self.wrt:
            return [None] * len(self.wrt)
        grads = backprop.grads([p[0] for p in pairs], self.wrt, [p[1] for p in pairs],
                               retain_graph=True, create_graph=create_graph)
        if self.first is None:
            self.first = (v, grads)
        return grads

    def split(self, v: Tensor) -> list[Tensor]:
        """A flat output vector as one float64 tensor per output (grad_outputs): zeros for an
        output the vector does not cover; complex128 for a complex output (its real view's
        values, see realview)."""
        out, offset, covered = [], 0, set(self.covered)
        for k, o in enumerate(self.outputs):
            if k not in covered:
                out.append(torch.zeros(o.shape, dtype=torch.complex128 if o.is_complex()
                                       else torch.float64, device=v.device))
                continue
            g = v[offset:offset + real_numel(o)].reshape(real_shape(o)).to(torch.float64)
            out.append(torch.view_as_complex(g.contiguous()) if o.is_complex() else g)
            offset += real_numel(o)
        return out


def build_backward(fn: Callable[..., Any], inputs: Inputs, wrt: Sequence[int], *,
                   every_output: bool = False) -> Backward:
    """Run `fn` with grad enabled and keep its graph for repeated vector-Jacobian products."""
    with torch.enable_grad():
        outs = call(fn, inputs)
    return Backward(outs, [inputs.args[i] for i in wrt], every_output=every_output)


def analytical_jacobians(bw: Backward) -> tuple[list[Tensor], list[bool]]:
    """Dense analytical Jacobians (one backward per output element), and which were None."""
    n_out = bw.n_out
    jac = [torch.zeros(n_out, real_numel(t), dtype=torch.float64) for t in bw.wrt]
    missing = [True] * len(bw.wrt)
    for m in range(n_out):
        v = torch.zeros(n_out, dtype=torch.float64)
        v[m] = 1.0
        for i, g in enumerate(bw.vjp(v)):
            if g is not None:
                missing[i] = False
                jac[i][m] = realview(g.detach()).reshape(-1).to(torch.float64).cpu()
    return jac, missing


def unit_probe(shape: torch.Size | int, gen: torch.Generator) -> Tensor:
    """A random signed float64 vector of unit norm (continuous values, so errors rarely cancel)."""
    n = shape if isinstance(shape, int) else math.prod(shape)
    v = standard_normal(n, gen)
    out: Tensor = v / v.norm().clamp(min=1e-12)
    return out


def bisect(error_of: Callable[[Tensor], float], n: int, threshold: float, *,
           limit: int = 8) -> list[int]:
    """Indices whose masked error exceeds `threshold`, found by bisection over index masks.

    error_of(mask) returns the probe error restricted to the elements where mask is 1; it is
    linear in the mask, so the right half's error is the whole minus the left half's and each
    level costs one evaluation per suspicious block.  Stops after `limit` indices.
    """
    found: list[int] = []
    stack: list[tuple[int, int, float]] = [(0, n, error_of(torch.ones(n, dtype=torch.float64)))]
    while stack and len(found) < limit:
        lo, hi, err = stack.pop()
        if abs(err) <= threshold:
            continue
        if hi - lo == 1:
            found.append(lo)
            continue
        mid = (lo + hi) // 2
        mask = torch.zeros(n, dtype=torch.float64)
        mask[lo:mid] = 1.0
        left = error_of(mask)
        # Push the larger error last so it is explored first.
        halves = sorted([(lo, mid, left), (mid, hi, err - left)], key=lambda h: abs(h[2]))
        stack.extend(halves)
    return sorted(found)



def one_sided(fn: Callable[..., Any], inputs: Inputs, wrt: int, direction: Tensor,
              eps: float | None = None, keep: Sequence[int] | None = None
              ) -> tuple[Tensor, Tensor, Tensor]:
    """(left, central, right) differences along u for args[wrt] = x (over the outputs at
    positions `keep`, all when None): left (f(x - eps u) - f(x - 2 eps u)) / eps and right
    (f(x + 2 eps u) - f(x + eps u)) / eps, the slopes just beside x that do not cross it, and
    the central (f(x + eps u) - f(x - eps u)) / 2 eps across it.  At a kink of f at x (or
    within eps of it) left and right disagree; at a jump the central one leaves them both."""
    step = step_and_noise()[0] if eps is None else eps
    def at(t: float) -> Tensor:
        x.copy_(orig + t * u)
        outs = call(fn, inputs)
        return _concat(outs if keep is None else [outs[k] for k in keep], torch.float64)

    x = realview(inputs.args[wrt].detach())
    orig = x.clone()
    u = direction.reshape(x.shape).to(dtype=x.dtype, device=x.device)
    try:
        m2, m1, p1, p2 = at(-2 * step), at(-step), at(step), at(2 * step)
    finally:
        x.copy_(orig)
    return (m1 - m2) / step, (p1 - m1) / (2 * step), (p2 - p1) / step

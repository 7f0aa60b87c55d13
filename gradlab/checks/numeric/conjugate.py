"""The `conjugate` hint: a complex gradient wrong by a conjugate (measured and decided here).

PyTorch's convention for a real loss L is z.grad = dL/dx + i dL/dy, so backward with
grad_output v returns conj(df/dz) * v + (df/dz*) * conj(v) summed over outputs (for a
holomorphic f, v * conj(f'(z))).  A backward written with f'(z) * v, as for real values, or
that returns the conjugate of the right gradient, is wrong by exactly one conjugation:
conj(backward(conj(v))) is then the right gradient.  Measured along one random probe pair
against central differences, so no reference is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradlab.cases import Inputs
from gradlab.checks.numeric import jacobian as jac

#: How close the conjugated gradient must come to the finite differences, and how far the
#: gradient itself must be, relative to the probe's value (plus an absolute floor of 1e-5,
#: gradcheck's atol): gradcheck's rtol, so that only a gradient right once conjugated (within
#: the finite differences' own error) gets the hint, and a near miss does not.
CONJUGATE_RTOL = 1e-3
CONJUGATE_ATOL = 1e-5
#: Seed of the probes (fixed: the hint does not depend on the run's random stream).
CONJUGATE_SEED = 1729


def conjugate_missed(fn: Callable[..., Any], inputs: Inputs) -> bool:
    """True when a Function with a complex input or output is wrong and the conjugate of its
    backward along conj(v) is right (see the module docstring), in float64 / complex128."""
    inputs = inputs.clone(dtype=torch.float64)
    wrt = inputs.diff_index
    try:
        bw = jac.build_backward(fn, inputs, wrt)
        outs = [bw.outputs[k] for k in bw.covered]
        if not any(o.is_complex() for o in outs) and not any(t.is_complex() for t in bw.wrt):
            return False
        gen = torch.Generator().manual_seed(CONJUGATE_SEED)
        v = jac.unit_probe(bw.n_out, gen)
        # conj(v) in the flat real vector: the imaginary parts of complex outputs negated
        flip = torch.cat([torch.tensor([1.0, -1.0]).repeat(o.numel()) if o.is_complex()
                          else torch.ones(o.numel()) for o in outs]).double()
        plain, conj = bw.vjp(v), bw.vjp(v * flip)
        perturbed = inputs.clone()
        for k, i in enumerate(wrt):
            x = inputs.args[i]
            u = jac.unit_probe(jac.real_numel(x), gen)
            num = float(v @ jac.directional_derivative(fn, perturbed, i, u, keep=bw.covered))
            got, fixed = plain[k], conj[k]
            if got is None or fixed is None:
                continue
            an = float(jac.realview(got.detach()).reshape(-1).double() @ u)
            an_conj = float(jac.realview(fixed.detach().conj()).reshape(-1).double() @ u)
            bound = CONJUGATE_ATOL + CONJUGATE_RTOL * abs(num)
            if abs(an_conj - num) <= bound < abs(an - num):
                return True
    except Exception:
        return False
    return False

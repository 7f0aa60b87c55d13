"""Spiking-neuron surrogate gradients and quantisers' straight-through estimators: their forward
is a step (Heaviside, round, floor, ...) whose derivative is 0 almost everywhere, and their
backward returns a chosen surrogate instead. That is their purpose, not a bug; gradlab's
jacobian / second_order fail rows on them are right about the maths (backward is not the
forward's derivative). Shown without gradlab: central differences of the forward are 0 at the
recorded kind of inputs, the backward is not, and it equals the documented surrogate formula.
Run: PYTHONPATH=$GRADLAB_HARVEST/site python \
    benchmarks/harvest/demos/surrogate_gradients_by_design.py
"""

import math

import torch
from brevitas.function import ops_ste
from sinabs.activation.quantize import Quantize
from snntorch import surrogate
from spikingjelly.activation_based import quantize as sjq
from spikingjelly.activation_based import surrogate as sj

torch.manual_seed(0)
x = (torch.rand(200, dtype=torch.float64) - 0.5) * 3 + 0.013  # away from the steps
cases = {
    "snntorch ATan (alpha 2)": (
        surrogate.atan(alpha=2.0),
        lambda v: 1 / (1 + (math.pi / 2 * 2.0 * v) ** 2),
    ),
    "spikingjelly Sigmoid (alpha 4)": (
        sj.Sigmoid(alpha=4.0),
        lambda v: 4 * torch.sigmoid(4 * v) * (1 - torch.sigmoid(4 * v)),
    ),
    "sinabs Quantize (floor)": (Quantize.apply, lambda v: torch.ones_like(v)),
    "brevitas round_ste": (ops_ste.round_ste, lambda v: torch.ones_like(v)),
    "spikingjelly quantize.round": (sjq.round, lambda v: torch.ones_like(v)),
}
for name, (fn, formula) in cases.items():
    xi = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(fn(xi).sum(), xi)
    h = 1e-6
    fd = (fn(x + h) - fn(x - h)) / (2 * h)
    print(
        f"{name}: finite differences max |d f| = {fd.abs().max().item():.1e};"
        f" backward max = {g.abs().max().item():.2f};"
        f" backward vs the surrogate formula: {(g - formula(x)).abs().max().item():.1e}"
    )

# geomloss's legacy kernel losses: DoubleGrad is the identity whose backward doubles the
# gradient (it stands for a symmetric term's two halves): gradlab's constant_factor is the truth
from geomloss._legacy.kernel_samples import DoubleGrad  # noqa: E402

xi = x.clone().requires_grad_()
(g,) = torch.autograd.grad(DoubleGrad.apply(xi).sum(), xi)
print(
    f"geomloss DoubleGrad: forward - input = {(DoubleGrad.apply(x) - x).abs().max().item():.1e};"
    f" backward / grad_output = {g.unique().tolist()}"
)

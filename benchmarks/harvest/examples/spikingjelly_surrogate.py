"""spikingjelly: LIF neurons with each surrogate function, multi-step, then backward; and the
quantizers' straight-through Functions."""

import torch
from spikingjelly.activation_based import functional, neuron, quantize, surrogate

torch.manual_seed(0)
names = [
    "Sigmoid",
    "ATan",
    "PiecewiseQuadratic",
    "PiecewiseExp",
    "SoftSign",
    "SuperSpike",
    "Erf",
    "PiecewiseLeakyReLU",
    "NonzeroSignLogAbs",
    "SquarewaveFourierSeries",
    "S2NN",
    "QPseudoSpike",
    "LeakyKReLU",
    "LogTailedReLU",
    "Rect",
]
for name in names:
    sg = getattr(surrogate, name)()
    lif = neuron.LIFNode(surrogate_function=sg, step_mode="m")
    x = torch.randn(6, 4, 5, requires_grad=True)
    (lif(x) * torch.randn(6, 4, 5)).sum().backward()
    functional.reset_net(lif)
x = torch.randn(4, 5, requires_grad=True)
for q in (quantize.round, quantize.ceil, quantize.floor):
    q(x * 3).sum().backward()
quantize.clamp(x, -0.5, 0.5).sum().backward()
quantize.k_bit_quantize(torch.rand(4, 5, requires_grad=True), 3).sum().backward()
print("spikingjelly ok")

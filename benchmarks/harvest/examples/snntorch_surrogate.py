"""snntorch: a leaky integrate-and-fire network unrolled over time with each surrogate gradient,
then a loss backward (what a training step does)."""

import snntorch as snn
import torch
from snntorch import surrogate

torch.manual_seed(0)
grads = [
    surrogate.atan(),
    surrogate.fast_sigmoid(slope=25),
    surrogate.sigmoid(slope=5),
    surrogate.triangular(),
    surrogate.straight_through_estimator(),
    surrogate.spike_rate_escape(),
    surrogate.heaviside(),
    surrogate.SFS() if hasattr(surrogate, "SFS") else surrogate.atan(alpha=3.0),
]
for sg in grads:
    fc = torch.nn.Linear(6, 5)
    lif = snn.Leaky(beta=0.9, spike_grad=sg)
    x = torch.randn(8, 3, 6)
    mem = lif.init_leaky()
    spk_rec = []
    for t in range(8):
        spk, mem = lif(fc(x[t]), mem)
        spk_rec.append(spk)
    (torch.stack(spk_rec).sum() + mem.square().sum()).backward()
print("snntorch ok")

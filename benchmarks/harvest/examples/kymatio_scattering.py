"""kymatio: 1-D and 2-D scattering transforms with backward through their stable modulus."""

import torch
from kymatio.torch import Scattering1D, Scattering2D

torch.manual_seed(0)
x = torch.randn(2, 64, requires_grad=True)
Scattering1D(J=3, shape=(64,), Q=4)(x).sum().backward()
y = torch.randn(1, 16, 16, requires_grad=True)
Scattering2D(J=2, shape=(16, 16), L=4)(y).sum().backward()
print("kymatio ok")

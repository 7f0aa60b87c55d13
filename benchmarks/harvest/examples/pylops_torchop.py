"""pylops: a pylops operator wrapped for torch (TorchOperator) inside a least-squares loss."""

import numpy as np
import pylops
import torch

torch.manual_seed(0)
A = pylops.MatrixMult(np.random.default_rng(0).standard_normal((6, 4)))
D = pylops.FirstDerivative(8, dtype="float64")
for op, n in ((A, 4), (D, 8)):
    top = pylops.TorchOperator(op)
    x = torch.randn(n, dtype=torch.float64, requires_grad=True)
    top.apply(x).square().sum().backward()
print("pylops ok")

"""gpytorch: log_normal_cdf (a probit likelihood's term), with backward, over the range its
likelihoods evaluate it at."""

import gpytorch
import torch

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    z = (3 * torch.randn(5, 6, dtype=dtype)).requires_grad_()
    gpytorch.functions.log_normal_cdf(z).sum().backward()
    z2 = torch.linspace(-8, 4, 9, dtype=dtype, requires_grad=True)
    gpytorch.functions.log_normal_cdf(z2).sum().backward()
print("gpytorch ok")

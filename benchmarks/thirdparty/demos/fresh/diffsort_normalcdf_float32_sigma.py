"""diffsort 0.2.0 NormalCDF (used by DiffSortNet(distribution='gaussian')): forward uses the Python
float sigma, backward uses `torch.tensor(sigma)` saved in forward, a float32 tensor (the default
dtype).  For a float64 input and sigma = 1/steepness = 0.1 (not exact in float32) the float64
gradient is off by a relative ~1.5e-8 * (1 + (x/sigma)^2): float32 precision in a float64 backward.
No gradlab involved."""
import math
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from diffsort.functional import NormalCDF

x = torch.linspace(-0.6, 0.6, 13, dtype=torch.float64, requires_grad=True)
for sigma in (0.1, 0.5):
    y = NormalCDF.apply(x, sigma)
    (g,) = torch.autograd.grad(y.sum(), x)
    exact = torch.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    err = (g - exact).abs().max().item()
    rel = ((g - exact).abs() / exact).max().item()
    print(f"sigma={sigma}: max abs grad err {err:.2e}, max rel {rel:.2e}  (float64 eps 2.2e-16)")
print("saved sigma dtype:", torch.tensor(0.1).dtype, " float32(0.1) - 0.1 =", float(torch.tensor(0.1)) - 0.1)

"""sparsemax: sparse attention weights over a few dims, with backward."""

import torch
from sparsemax import Sparsemax

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    for dim in (-1, 0, 1):
        x = (2 * torch.randn(4, 6, 5, dtype=dtype)).requires_grad_()
        (Sparsemax(dim=dim)(x) * torch.randn(4, 6, 5, dtype=dtype)).sum().backward()
print("sparsemax ok")

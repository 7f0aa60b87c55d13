"""pytorch-tabnet: its sparsemax, entmax15 and entmoid15 Functions (attentive transformer masks)."""

import torch
from pytorch_tabnet import sparsemax as sm

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    x = torch.randn(6, 7, dtype=dtype, requires_grad=True)
    w = torch.randn(6, 7, dtype=dtype)
    outs = [
        sm.Sparsemax(dim=-1)(x),
        sm.Entmax15(dim=-1)(x),
        sm.Entmoid15.apply(x),
        sm.Sparsemax(dim=0)(x),
        sm.SparsemaxFunction.apply(x * 3, -1),
    ]
    sum((o * w).sum() for o in outs).backward()
print("tabnet ok")

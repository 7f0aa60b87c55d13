"""monai: its memory-efficient swish (blocks.activation) in a small conv block, with backward."""

import torch
from monai.networks.blocks.activation import MemoryEfficientSwish

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    x = torch.randn(2, 3, 4, 4, dtype=dtype, requires_grad=True)
    conv = torch.nn.Conv2d(3, 2, 3).to(dtype)
    MemoryEfficientSwish()(conv(x)).square().sum().backward()
print("monai ok")

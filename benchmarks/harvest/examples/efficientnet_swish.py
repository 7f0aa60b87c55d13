"""efficientnet-pytorch: the memory-efficient swish its blocks use, in a tiny forward/backward."""

import torch
from efficientnet_pytorch.utils import MemoryEfficientSwish

torch.manual_seed(0)
act = MemoryEfficientSwish()
for dtype in (torch.float64, torch.float32):
    x = torch.randn(2, 3, 5, 5, dtype=dtype, requires_grad=True)
    conv = torch.nn.Conv2d(3, 4, 3).to(dtype)
    act(conv(x)).square().sum().backward()
    act(torch.randn(7, 9, dtype=dtype, requires_grad=True) * 4).sum().backward()
print("efficientnet ok")

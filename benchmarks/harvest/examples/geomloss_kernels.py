"""geomloss: kernel (energy, gaussian, laplacian) and Sinkhorn losses between point clouds, the
gradient flow step its tutorials take."""

import torch
from geomloss import SamplesLoss

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    x = torch.randn(12, 2, dtype=dtype, requires_grad=True)
    y = torch.randn(10, 2, dtype=dtype) + 1
    for loss in ("energy", "gaussian", "laplacian", "sinkhorn"):
        L = SamplesLoss(loss, blur=0.5, backend="tensorized")
        L(x, y).backward()
print("geomloss ok")

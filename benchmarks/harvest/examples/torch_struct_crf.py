"""torch-struct: linear-chain CRF and dependency-tree marginals with the sparsemax, sampled and
checkpointed semirings that its custom Functions implement, with backward."""

import torch
import torch_struct
from torch_struct import DependencyCRF, LinearChainCRF
from torch_struct.semirings import SampledSemiring, SparseMaxSemiring

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    pot = torch.randn(2, 5, 3, 3, dtype=dtype, requires_grad=True)
    d = LinearChainCRF(pot)
    (d.marginals * torch.randn_like(d.marginals)).sum().backward()
    d.partition.sum().backward()
    (
        torch_struct.LinearChain(SparseMaxSemiring).marginals(pot)
        * torch.randn(2, 5, 3, 3, dtype=dtype)
    ).sum().backward()
    torch_struct.LinearChain(SampledSemiring).sum(pot).sum().backward()
    arc = torch.randn(2, 4, 4, dtype=dtype, requires_grad=True)
    DependencyCRF(arc).partition.sum().backward()
print("torch_struct ok")

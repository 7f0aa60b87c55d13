"""roma: nearest rotations (special Procrustes, with and without regularisation) and unit
quaternions from matrices, as a pose-fitting loss calls them, with backward."""

import roma
import torch

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    M = torch.randn(5, 3, 3, dtype=dtype, requires_grad=True)
    R = roma.special_procrustes(M)
    q = roma.rotmat_to_unitquat(roma.special_procrustes(M, regularization=0.1))
    w = torch.randn(5, 3, 3, dtype=dtype, requires_grad=True)
    A = roma.special_gramschmidt(w[..., :2]) if hasattr(roma, "special_gramschmidt") else R
    P = torch.randn(2, 4, 3, dtype=dtype)
    Rp, t = roma.rigid_points_registration(P, (P + 0.1 * torch.randn_like(P)).requires_grad_())
    (R.sum() + q.square().sum() + A.sum() + Rp.sum() + t.sum()).backward()
    roma.procrustes(torch.randn(2, 4, 4, dtype=dtype, requires_grad=True)).sum().backward()
print("roma ok")

"""qpth==0.0.18 QPFunction: the gradient of a parameter shared across the batch is averaged.

QPFunction accepts unbatched (2-d / 1-d) parameters next to batched ones and broadcasts them
("You do not need to add an extra dimension to coefficients that will not change across all of
the minibatch examples"). The forward then uses that one tensor in every problem of the batch,
so the gradient of the loss with respect to it is the SUM over the batch of the per-problem
gradients. backward() returns `dQs.mean(0)`, `dps.mean(0)`, `dGs.mean(0)`, `dhs.mean(0)`,
`dAs.mean(0)`, `dbs.mean(0)` instead: every shared parameter's gradient is nBatch times too small.

Shown without gradlab: central finite differences, a plain-autograd reference (active-set KKT
solve, as in configs_independent.ref_qp) and torch.autograd.gradcheck all disagree with the
Function by exactly the factor nBatch, while with the parameter batched (expanded to nBatch
copies by hand) everything agrees.

Run: bash benchmarks/thirdparty/install.sh && python3 benchmarks/thirdparty/demos/qpth_shared_parameter_grad_is_mean.py
"""
import sys

import qpth.qp as qp
import torch
from _common import fd_vjp, vjp

torch.manual_seed(0)
D = torch.float64
nB, nz = 3, 3
L = torch.randn(nz, nz, dtype=D) * 0.5
Q = L @ L.T + 0.5 * torch.eye(nz, dtype=D)
p = torch.randn(nB, nz, dtype=D)
G = torch.randn(2, nz, dtype=D)
h = torch.rand(2, dtype=D) + 5.0      # loose: no inequality active at the solution
A = torch.randn(1, nz, dtype=D)          # one equality constraint, shared by the batch
b = torch.randn(1, dtype=D) * 0.3        # its right-hand side, shared by the batch
F = qp.QPFunction(verbose=-1)
v = torch.randn(nB, nz, dtype=D)         # an upstream gradient


def ref_b(b_):
    # plain autograd: z solves [[Q, A^T], [A, 0]] [z; nu] = [-p; b] for each problem (check below
    # that no inequality is active, so this is the exact solution)
    K = torch.cat([torch.cat([Q, A.T], 1), torch.cat([A, torch.zeros(1, 1, dtype=D)], 1)], 0)
    rhs = torch.cat([-p, b_.expand(nB, 1)], 1)
    return torch.linalg.solve(K, rhs.T).T[:, :nz]


z = F(Q, p, G, h, A, b)
assert (G @ z.T < h[:, None] - 1e-3).all(), "an inequality is active; pick another seed"
assert torch.allclose(z, ref_b(b), atol=1e-8)

shared = vjp(lambda b_: F(Q, p, G, h, A, b_), b, v)
fd = fd_vjp(lambda b_: F(Q, p, G, h, A, b_), b, v)
ref = vjp(ref_b, b, v)
batched = vjp(lambda bb: F(Q, p, G, h, A, bb), b.expand(nB, 1).clone(), v).sum(0)
print(f"d<v, z>/db  QPFunction (b shared)   {shared.item(): .6f}")
print(f"            finite differences      {fd.item(): .6f}")
print(f"            plain-autograd ref      {ref.item(): .6f}")
print(f"            QPFunction (b batched,  summed over the batch) {batched.item(): .6f}")
print(f"ratio fd / Function = {fd.item() / shared.item():.4f}  (nBatch = {nB})")
ok = torch.autograd.gradcheck(lambda b_: F(Q, p, G, h, A, b_), (b.clone().requires_grad_(),),
                              raise_exception=False)
print("torch.autograd.gradcheck on the shared b:", ok)
bug = abs(fd.item() / shared.item() - nB) < 1e-3 and abs(batched.item() - fd.item()) < 1e-5
print("BUG REPRODUCED" if bug else "not reproduced")
sys.exit(0 if bug else 1)

"""pypose 0.9.5: its LieTensor Functions' backward returns the gradient in the Lie algebra (the
tangent space at the group element), not autograd's Euclidean gradient of the tensor. Shown
without gradlab: torch.autograd.gradcheck fails on the raw Functions; a plain-autograd copy of
the same forward gives another gradient; pypose's equals the derivative along a left
perturbation Exp(d) * X instead. So a quaternion coming from plain autograd ops (a network's
output, normalised) gets the wrong gradient through pypose's Act/Log/Mul (by design, as pypose
documents LieTensor gradients; gradlab's fail rows on these Functions are right about the maths).
Run: PYTHONPATH=$GRADLAB_HARVEST/site python benchmarks/harvest/demos/pypose_tangent_gradients.py
"""

import pypose as pp
import torch
from pypose.lietensor.operation import SO3_Act, SO3_Log, so3_Exp

torch.manual_seed(0)
X = pp.randn_SO3(3, dtype=torch.float64).tensor().requires_grad_()  # unit quaternions
p = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
x = (0.5 * torch.randn(3, 3, dtype=torch.float64)).requires_grad_()
for name, fn, args in (
    ("SO3_Act", SO3_Act.apply, (X, p)),
    ("SO3_Log", SO3_Log.apply, (X,)),
    ("so3_Exp", so3_Exp.apply, (x,)),
):
    ok = torch.autograd.gradcheck(fn, args, raise_exception=False)
    print(f"gradcheck {name}: {'passes' if ok else 'FAILS'}")


def act_plain(X, p):  # the same forward as SO3_Act, in plain autograd
    v, w = X[..., :3], X[..., 3:]
    uv = 2 * torch.linalg.cross(v, p, dim=-1)
    return p + w * uv + torch.linalg.cross(v, uv, dim=-1)


g = torch.randn(3, 3, dtype=torch.float64)
(gX_pp,) = torch.autograd.grad(SO3_Act.apply(X, p), X, g)
(gX_plain,) = torch.autograd.grad(act_plain(X, p), X, g)
print("SO3_Act grad wrt X, pypose:", gX_pp[0].tolist())
print("SO3_Act grad wrt X, plain autograd of the same forward:", gX_plain[0].tolist())


def qmul(a, b):  # Hamilton product, (x, y, z, w) as pypose stores quaternions
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat(
        [
            aw * bv + bw * av + torch.linalg.cross(av, bv, dim=-1),
            aw * bw - (av * bv).sum(-1, keepdim=True),
        ],
        -1,
    )


# pypose's gradient is the one along a left perturbation: d/dd <g, Act(Exp(d) * X, p)> at d = 0,
# Exp(d) = (d / 2, 1) to first order, all in plain autograd
d = torch.zeros(3, 3, dtype=torch.float64, requires_grad=True)
for side, Xd in (
    ("left", X.detach() + qmul(torch.cat([d / 2, 0 * d[..., :1]], -1), X.detach())),
    ("right", X.detach() + qmul(X.detach(), torch.cat([d / 2, 0 * d[..., :1]], -1))),
):
    (gd,) = torch.autograd.grad(act_plain(Xd, p.detach()), d, g)
    print(
        f"max |pypose[:3] - derivative along a {side} perturbation| =",
        f"{(gX_pp[..., :3] - gd).abs().max().item():.2e}",
    )

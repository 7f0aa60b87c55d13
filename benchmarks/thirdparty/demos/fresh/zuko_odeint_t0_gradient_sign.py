"""zuko 1.6.0 zuko.utils.odeint (AdaptiveCheckpointAdjoint): the gradient w.r.t. the initial time t0
has the wrong sign.  x(t1) = x0 + int_{t0}^{t1} f dt, so d x(t1)/d t0 = -Phi(t1,t0) f(t0, x0) and
dL/dt0 = -a(t0).f(t0, x0) with a(t0) = dL/dx0
backward returns +a(t0).f(t0, x0)
(zuko/utils.py: `grad_t0 = torch.sum(f(t0, x0) * grad_x)`).  No gradlab involved."""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from zuko.utils import odeint

torch.manual_seed(0)
x0 = torch.randn(5, dtype=torch.float64, requires_grad=True)
t0 = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
t1 = torch.tensor(1.1, dtype=torch.float64, requires_grad=True)
f = lambda t, x: -(1 + t) * x          # exact: x1 = x0 exp(-((t1-t0) + (t1^2-t0^2)/2))

x1 = odeint(f, x0, t0, t1, atol=1e-12, rtol=1e-12)
exact = x0 * torch.exp(-((t1 - t0) + (t1 ** 2 - t0 ** 2) / 2))
print("forward max err vs closed form:", (x1 - exact).abs().max().item())
g_zuko = torch.autograd.grad(x1.sum(), (x0, t0, t1))
g_true = torch.autograd.grad(exact.sum(), (x0, t0, t1))
for name, a, b in zip(("x0", "t0", "t1"), g_zuko, g_true):
    print(f"d sum(x1)/d {name}: zuko {a.detach().numpy().round(6)}  closed form {b.detach().numpy().round(6)}")
# central finite difference on t0 of zuko's own forward
h = 1e-6
with torch.no_grad():
    fd = (odeint(f, x0, t0 + h, t1, atol=1e-12, rtol=1e-12).sum() - odeint(f, x0, t0 - h, t1, atol=1e-12, rtol=1e-12).sum()) / (2 * h)
print("finite difference of zuko's forward w.r.t. t0:", fd.item())
assert abs(g_zuko[1].item() + fd.item()) < 1e-5 and abs(g_zuko[1].item() - fd.item()) > 0.1, "sign bug not reproduced"
print("BUG: zuko's dL/dt0 = -(finite difference): wrong sign")

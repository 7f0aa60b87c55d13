"""entmax==1.3: second-order gradients are wrong (first-order ones are right).

1. Entmax15Function (entmax15) and EntmaxBisectFunction (entmax_bisect) build their backward
   from the saved output Y as Y.sqrt() / Y ** (2 - alpha). Differentiating that backward again
   (double backward, Hessian-vector products) evaluates d sqrt(Y)/dY = inf at the entries where
   Y == 0, i.e. at every entry outside the support, which is exactly where the map is sparse:
   inf * 0 = NaN, and the NaN spreads through the row sums to the whole row.
   The true second derivative there is finite (the map is smooth away from the support
   boundary): finite differences of the (correct) first-order gradient and a plain-autograd
   reference give the same finite numbers.

2. The Fenchel-Young losses (sparsemax_loss, entmax15_loss, ...: _GenericLossFunction) return
   grad_output * p_star, with p_star (= p - onehot(y)) an intermediate saved without a graph, so
   their backward is not differentiable: alone, create_graph=True gives a gradient that does not
   require grad (a second grad call raises); inside a larger objective the loss's share of the
   Hessian is silently dropped (here: loss + 1/2||x||^2 gives H w = w instead of J_p w + w).

Run: bash benchmarks/thirdparty/install.sh && python3 benchmarks/thirdparty/demos/entmax_second_order.py
"""
import sys

import entmax
import torch
from _common import fd_vjp

D = torch.float64
x = torch.tensor([[1.2, 0.3, 0.9, -0.8, 0.55, -1.5]], dtype=D)   # well-separated logits
v = torch.tensor([[0.3, -1.1, 0.7, 0.4, -0.5, 0.9]], dtype=D)    # grad_output
w = torch.tensor([[-0.6, 0.2, 1.0, 0.5, -0.3, 0.8]], dtype=D)    # direction of the HVP


def ref_entmax15(x):
    z = x / 2
    zs, _ = torch.sort(z, -1, descending=True)
    j = torch.arange(1, z.shape[-1] + 1, dtype=D)
    with torch.no_grad():
        m = zs.cumsum(-1) / j
        tau_all = m - torch.sqrt(torch.clamp((1 - ((zs ** 2).cumsum(-1) - j * m ** 2)) / j, min=0))
        k = (tau_all <= zs).sum(-1, keepdim=True)
    S1, S2 = zs.cumsum(-1).gather(-1, k - 1), (zs ** 2).cumsum(-1).gather(-1, k - 1)
    mean = S1 / k
    tau = mean - torch.sqrt((1 - (S2 - k * mean ** 2)) / k)
    return torch.clamp(z - tau, min=0) ** 2


def hvp(f, x, v, w):
    x = x.clone().requires_grad_()
    g, = torch.autograd.grad(f(x), x, v, create_graph=True)
    h, = torch.autograd.grad(g, x, w)
    return h


def first(f, v):
    def g(x):
        x = x.clone().requires_grad_()
        return torch.autograd.grad(f(x), x, v)[0]
    return g


found = []
for name, f in [("entmax15", lambda x: entmax.entmax15(x, -1)),
                ("entmax_bisect(alpha=1.5)", lambda x: entmax.entmax_bisect(x, 1.5, -1, 80))]:
    print(f"{name}: output {f(x).detach()}  (zeros: {(f(x) == 0).sum().item()})")
    h_fun = hvp(f, x, v, w)
    # d/dx <w, grad(x)> by central differences of the Function's own first-order gradient
    h_fd = fd_vjp(first(f, v), x, w)
    h_ref = hvp(ref_entmax15, x, v, w)
    print("   double backward ", h_fun)
    print("   fd of backward  ", h_fd)
    print("   plain reference ", h_ref)
    found.append(bool(torch.isnan(h_fun).any()) and float((h_fd - h_ref).abs().max()) < 1e-6)

t = torch.tensor([2])
for name, f in [("sparsemax_loss", lambda x: entmax.sparsemax_loss(x, t)),
                ("entmax15_loss", lambda x: entmax.entmax15_loss(x, t))]:
    obj = lambda x, f=f: f(x).sum() + 0.5 * (x ** 2).sum()
    one = torch.ones((), dtype=D)
    h_fun = hvp(obj, x, one, w)
    h_fd = fd_vjp(first(obj, one), x, w)    # the first-order gradient (p - onehot + x) is correct
    print(f"{name} + 1/2||x||^2: double backward {h_fun}\n   fd of backward  {h_fd}")
    found.append(float((h_fun - w).abs().max()) < 1e-12 and float((h_fd - h_fun).abs().max()) > 0.05)

bug = all(found)
print("BUGS REPRODUCED" if bug else f"not reproduced: {found}")
sys.exit(0 if bug else 1)

"""torch-struct==0.5 _SimplexProject (SparseMaxSemiring.sum): forward and backward disagree.

The sparsemax semiring's "sum" is the smoothed max  max_w <x, w> - 1/2 ||w||^2  over the simplex
(Mensch & Blondel 2018), whose value is <x, w*> - 1/2 ||w*||^2 and whose gradient is w* (the
sparsemax projection of x). _SimplexProject.backward returns grad_output * w*, the gradient of
that value; but its forward computes  <x, w*> - ||w*||_2  (the norm, not half its square). So
the gradient it returns is not the gradient of the value it returns: finite differences of the
forward disagree with backward (torch.autograd.gradcheck fails), while a plain-autograd
reference of the documented math (<x, w*> - 1/2||w*||^2 with w* = sparsemax(x)) has gradient w*.

Run: bash benchmarks/thirdparty/install.sh && python3 benchmarks/thirdparty/demos/torch_struct_simplex_project_forward.py
"""
import sys

import torch
from _common import fd_vjp, vjp
from torch_struct.semirings.sparse_max import _SimplexProject

torch.manual_seed(0)
D = torch.float64
x = torch.randn(3, 5, dtype=D)
v = torch.randn(3, dtype=D)


def ref(x):
    """sparsemax by the sorted-prefix threshold, then the smoothed max <x, w> - 1/2 ||w||^2."""
    zs, _ = torch.sort(x, -1, descending=True)
    css = zs.cumsum(-1)
    j = torch.arange(1, x.shape[-1] + 1, dtype=D)
    with torch.no_grad():
        k = ((1 + j * zs) > css).sum(-1, keepdim=True)
    tau = (css.gather(-1, k - 1) - 1) / k
    w = torch.clamp(x - tau, min=0)
    return (x * w).sum(-1) - 0.5 * (w * w).sum(-1)


f = lambda x: _SimplexProject.apply(x, -1)
g_fun = vjp(f, x, v)
g_fd = fd_vjp(f, x, v)
g_ref = vjp(ref, x, v)
print("Function backward          \n", g_fun)
print("finite differences of its forward\n", g_fd)
print("max |backward - fd|        ", float((g_fun - g_fd).abs().max()))
print("max |backward - ref grad|  ", float((g_fun - g_ref).abs().max()), "(backward is the right gradient of the documented value)")
print("max |forward - ref value|  ", float((f(x) - ref(x)).abs().max()), "(the forward is not)")
ok = torch.autograd.gradcheck(f, (x.clone().requires_grad_(),), raise_exception=False)
print("torch.autograd.gradcheck:", ok)
bug = float((g_fun - g_fd).abs().max()) > 1e-3 and not ok
print("BUG REPRODUCED" if bug else "not reproduced")
sys.exit(0 if bug else 1)

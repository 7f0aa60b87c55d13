"""xitorch 0.5.1, shown without gradlab.
 1. LinearOperator.m(mat) guesses is_hermitian with torch.allclose(mat, mat.T) (atol 1e-8): any matrix
    whose entries are all below ~1e-8 is taken as Hermitian, so solve_torchfcn.backward uses A
    instead of A^T (ctx.A.H returns self): the gradients of xitorch.linalg.solve are wrong.
 2. quad (the _Quadrature Function): backward raises a ValueError when only one of the limits
    requires grad (here: xl does, xu and the parameter do not).
 3. symeig (symeig_torchfcn) backward solves (A - lambda_i I) y = -B with lambda_i an exact
    eigenvalue, a singular system: for the 5x5 example scaled so that max |A| = 1000 LU hits an
    exact zero pivot and backward raises (at scale 1 the rounding keeps it invertible).
 4. rootfinder raises under torch.autocast(cpu, bfloat16) on float32 inputs (a torch.dot inside
    the solver gets float32 and bfloat16 vectors)
    the plain formula runs.
"""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
import xitorch
from xitorch.integrate import quad
from xitorch.linalg import solve, symeig
from xitorch.optimize import rootfinder

g = torch.Generator().manual_seed(12)
A0 = torch.randn(5, 5, generator=g, dtype=torch.float64) + 5 * torch.eye(5, dtype=torch.float64)
B0 = torch.randn(5, 3, generator=g, dtype=torch.float64)
print("1. solve gradient vs torch.linalg.solve, A and B scaled by s:")
for s in (1.0, 1e-6, 1e-9, 1e-12):
    A = (A0 * s).requires_grad_()
    B = (B0 * s).requires_grad_()
    x = solve(xitorch.LinearOperator.m(A), B, method="custom_exactsolve")
    gA, gB = torch.autograd.grad(x.sum(), (A, B))
    rA, rB = torch.autograd.grad(torch.linalg.solve(A, B).sum(), (A, B))
    print(f"   s={s:g}: is_hermitian guessed {xitorch.LinearOperator.m(A).is_hermitian}, "
          f"rel err grad A {((gA - rA).abs().max() / rA.abs().max()).item():.2e}, grad B {((gB - rB).abs().max() / rB.abs().max()).item():.2e}")

print("2. quad with only xl requiring grad:")
xl = torch.tensor(-0.4, dtype=torch.float64, requires_grad=True)
xu = torch.tensor(1.3, dtype=torch.float64)
w = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
y = quad(lambda x, w: torch.exp(-w * x * x), xl, xu, params=[w])
try:
    y.sum().backward()
    print("   ran, grad xl =", xl.grad.item())
except Exception as e:
    print("   backward raises", type(e).__name__, e)
w.requires_grad_()
y = quad(lambda x, w: torch.exp(-w * x * x), xl, xu, params=[w])
y.sum().backward()
print("   with w requiring grad too it runs: grad xl =", xl.grad.item())

print("3. symeig uppermost 2 eigenpairs, backward at scale 1 and 1000:")
A5 = torch.randn(5, 5, generator=torch.Generator().manual_seed(34), dtype=torch.float64)
for scale in (1.0, 1000.0 / A5.abs().max().item()):
    A = (A5 * scale).requires_grad_()
    S = (A + A.T) / 2
    ev, V = symeig(xitorch.LinearOperator.m(S, is_hermitian=True), neig=2, mode="uppest", method="custom_exacteig")
    gv = torch.randn(V.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    try:
        (ev.sum() + (V * gv).sum()).backward()
        print(f"   scale {scale:.4g}: backward ran")
    except Exception as e:
        print(f"   scale {scale:.4g}: backward raises {type(e).__name__}: {str(e)[:120]}")

print("4. rootfinder under torch.autocast('cpu', bfloat16), float32 inputs (float64 ones run):")
c = torch.tensor([0.7, 1.2], dtype=torch.float32, requires_grad=True)
yy = torch.tensor([0.5, -1.0], dtype=torch.float32, requires_grad=True)
try:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r = rootfinder(lambda x, c, y: x ** 3 + c * x - y, torch.zeros_like(yy), params=(c, yy))
    print("   ran", r)
except Exception as e:
    print("   raises", type(e).__name__, e)

print("5. (by design, not a bug) symeig's default degen_atol = eps**0.6 is absolute: at scale 1e-12")
print("   (float64) every eigenvalue pair counts as degenerate and the eigenvector gradient changes:")
A6 = torch.randn(6, 6, generator=torch.Generator().manual_seed(19), dtype=torch.float64)
A6 = A6 * (1e-12 / A6.abs().max())
gv = torch.randn(6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
fix = lambda V: V * torch.sign(V[V.abs().argmax(0), torch.arange(3)])
A = A6.clone().requires_grad_()
S = (A + A.T) / 2
e, V = torch.linalg.eigh(S)
ref = torch.autograd.grad(e[:3].sum() + (fix(V[:, :3]) * gv).sum(), A)[0]
for bck in ({}, {"degen_atol": 0.0, "degen_rtol": 0.0}):
    A = A6.clone().requires_grad_()
    S = (A + A.T) / 2
    ev, V = symeig(xitorch.LinearOperator.m(S, is_hermitian=True), neig=3, mode="lowest",
                   method="custom_exacteig", bck_options=bck)
    g = torch.autograd.grad(ev.sum() + (fix(V) * gv).sum(), A)[0]
    print(f"   bck_options={bck}: rel err vs torch.linalg.eigh {((g - ref).abs().max() / ref.abs().max()).item():.2e}")

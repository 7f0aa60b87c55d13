"""pytorch-wavelets==1.3.0 (PyWavelets==1.8.0): two wrong gradients in the DWT Functions.

1. AFB1D / AFB2D (DWT1DForward / DWTForward) with mode 'symmetric', 'reflect' or 'periodic', and
   with 'periodization' on odd lengths: backward() runs the synthesis filter bank sfb1d, i.e. the
   INVERSE transform with the analysis filters. That equals the adjoint (the true gradient of a
   linear map) only for zero padding and for periodization of even lengths with orthogonal
   wavelets. With signal-extension padding the adjoint must fold the padded samples back; the
   inverse does not, so the gradient is wrong near the borders. Finite differences, a plain
   autograd reference (the DWT as a matrix built from PyWavelets' own pywt.dwt on the unit
   vectors) and torch.autograd.gradcheck all agree with each other and not with the Function.
   ('symmetric' is PyWavelets' default mode.)

2. SFB1D / SFB2D (DWT1DInverse / DWTInverse): backward() computes the gradients of BOTH the
   low-pass and the high-pass inputs under `if ctx.needs_input_grad[0]:` (the low-pass one). When
   only the high-pass coefficients require grad, it returns None for them: autograd treats that as
   a zero gradient, silently.

Run: bash benchmarks/thirdparty/install.sh && python3 benchmarks/thirdparty/demos/pytorch_wavelets_backward_bugs.py
"""
import sys

import pywt
import torch
from _common import fd_vjp, vjp
from pytorch_wavelets import DWT1DForward, DWT1DInverse

D = torch.float64
torch.set_default_dtype(D)  # so the modules' filter buffers are float64 too
torch.manual_seed(0)
found = []

print("1. DWT1DForward (AFB1D) gradient by mode, db2, J=1, x: (1, 1, n)")
for mode, n in [("zero", 12), ("periodization", 12), ("symmetric", 12), ("reflect", 12),
                ("periodic", 12), ("periodization", 11)]:
    dwt = DWT1DForward(J=1, wave="db2", mode=mode)
    x = torch.randn(1, 1, n)
    lo = torch.stack([torch.tensor(pywt.dwt(e.tolist(), "db2", mode=mode)[0]) for e in torch.eye(n)], 1)
    hi = torch.stack([torch.tensor(pywt.dwt(e.tolist(), "db2", mode=mode)[1]) for e in torch.eye(n)], 1)
    f = lambda x: torch.cat([dwt(x)[0], dwt(x)[1][0]], -1)
    r = lambda x: torch.cat([x @ lo.T, x @ hi.T], -1)
    v = torch.randn_like(f(x))
    fwd = float((f(x) - r(x)).abs().max())
    e_fd = float((vjp(f, x, v) - fd_vjp(f, x, v)).abs().max())
    e_ref = float((vjp(f, x, v) - vjp(r, x, v)).abs().max())
    ok = torch.autograd.gradcheck(f, (x.clone().requires_grad_(),), raise_exception=False)
    print(f"   {mode:14s} n={n:2d}: |fwd - pywt| {fwd:.1e}   |grad - fd| {e_fd:.1e}   "
          f"|grad - ref| {e_ref:.1e}   gradcheck {ok}")
    if mode != "zero" and not (mode == "periodization" and n % 2 == 0):
        found.append(e_fd > 1e-3 and e_ref > 1e-3 and fwd < 1e-12 and not ok)

print("2. DWT1DInverse (SFB1D), only the high-pass input requiring grad")
idwt = DWT1DInverse(wave="db2", mode="zero")
yl = torch.randn(1, 1, 7)
yh = torch.randn(1, 1, 7, requires_grad=True)
out = idwt((yl, [yh]))
out.sum().backward()
print("   yh.grad with yl constant:        ", yh.grad)
yl2 = yl.clone().requires_grad_()
yh2 = yh.detach().clone().requires_grad_()
idwt((yl2, [yh2])).sum().backward()
print("   yh.grad with yl requiring grad:  ", yh2.grad)
found.append(yh.grad is None or float(yh.grad.abs().max()) == 0.0)
found.append(float(yh2.grad.abs().max()) > 0.1)

bug = all(found)
print("BUGS REPRODUCED" if bug else f"not reproduced: {found}")
sys.exit(0 if bug else 1)

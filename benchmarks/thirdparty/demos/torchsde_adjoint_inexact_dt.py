"""torchsde==0.2.6 sdeint_adjoint (reversible Heun): wrong gradients when dt is not a power of two.

The reversible Heun scheme is algebraically reversible, and its adjoint
(adjoint_method="adjoint_reversible_heun") is advertised as the exact gradient of the
discretised forward solve. That holds when the step dt is exactly representable (a power of
two): the reverse pass then retraces the forward's time grid and Brownian increments. With
dt = 0.05 (steps of T/10) the reverse pass does not retrace them, and the gradient is off by
6.4e-3 in float64, 1e13 times the float64 rounding level, while the same scheme written out in
plain autograd (configs_lead._reversible_heun, on the same Brownian path) agrees with finite
differences. At dt = 1/32 the adjoint agrees with it to 1.8e-15.

Shown without gradlab, at dt = 0.05 and 1/32: the forward values of sdeint_adjoint and of the
plain-autograd scheme agree to rounding (the same solve), and the plain scheme's gradient agrees
with central finite differences; the adjoint's gradient is the one that is off.

Run: bash benchmarks/thirdparty/install.sh &&
     python3 benchmarks/thirdparty/demos/torchsde_adjoint_inexact_dt.py
"""
import sys
from pathlib import Path

import _common  # noqa: F401  (the pinned install on sys.path)
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import configs_lead as lead

D = torch.float64
worst = {}
for steps in (10, 32):
    fn, args, _ = lead._sde(True, steps)
    ref = lead._reversible_heun(True, steps)

    def grads(f, args=args):
        a = [x.detach().to(D).requires_grad_() for x in args]
        out = f(*a)
        return torch.autograd.grad(out, a, torch.ones_like(out))

    adj, plain = grads(fn), grads(ref)
    # central differences of the plain scheme's output sum in theta[0]
    th, sg, y0 = (x.detach() for x in args)
    e = torch.zeros_like(th)
    e[0] = 1e-6
    fd = float((ref(th + e, sg, y0).sum() - ref(th - e, sg, y0).sum()) / 2e-6)
    err = max(float((a - b).abs().max()) for a, b in zip(adj, plain, strict=True))
    fwd = float((fn(*[x.detach() for x in args]) - ref(*[x.detach() for x in args])).abs().max())
    print(f"dt = {lead.SDE_T1 / steps:<9} forward values: max abs difference {fwd:.1e}")
    worst[steps] = err
    print(f"dt = {lead.SDE_T1 / steps:<9} adjoint vs plain scheme: max abs {err:.2e};  "
          f"d/dtheta0: adjoint {float(adj[0][0]):.10f}, plain {float(plain[0][0]):.10f}, "
          f"finite differences {fd:.10f}")

bug = worst[10] > 1e-4 and worst[32] < 1e-12  # and the forwards agreed above
print("BUG REPRODUCED" if bug else "not reproduced")
sys.exit(0 if bug else 1)

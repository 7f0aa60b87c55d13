"""qpth==0.0.18 QPFunction: float64 gradients only ~1e-6 accurate (the KKT system is clamped).

QPFunction's backward differentiates the KKT conditions at the interior-point solution. It
forms the complementarity block D = diag(lambda / s) as
`torch.clamp(lams, min=1e-8) / torch.clamp(slacks, min=1e-8)` (qpth/qp.py): at an active
inequality the slack s is ~1e-12 at convergence, so lambda / s should be ~1e12, and the clamp
caps it at lambda * 1e8. The backward then solves the KKT system of a softened constraint,
and the gradient is off by 5e-7 here (3e-6 along gradlab's random grad_output, with a relative
error above 1 on the smallest components), 5x to 30x outside torch.testing.assert_close's
float64 tolerance (1e-7).

Shown without gradlab: the forward agrees with an exact active-set KKT solve to 1e-14, and
central finite differences of qpth's own forward agree with the KKT solve's plain-autograd
gradient to 2e-10; qpth's backward is the one that is off. Lowering the clamp's floor to 1e-300
(only for this run) brings the backward onto the finite differences.

Run: bash benchmarks/thirdparty/install.sh &&
     python3 benchmarks/thirdparty/demos/qpth_backward_clamp.py
"""
import sys
import types
from pathlib import Path

import _common  # noqa: F401  (the pinned install on sys.path, the cvxpy shim)
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import configs_independent as ind
import qpth.qp as qp

D = torch.float64
L, p, G, h, A, b = ind._qp_problem(0, 3, 4, 1, 4)
F = qp.QPFunction(verbose=-1, maxIter=40)


ARGS = [t.detach() for t in (L, p, G, h, A, b)]


def solve(*a):
    return F(ind._spd(a[0]), *a[1:])


def grads(f, v):
    a = [t.clone().requires_grad_() for t in ARGS]
    return torch.autograd.grad(f(*a), a, v)


v = torch.randn(1, 3, dtype=D, generator=torch.Generator().manual_seed(0))   # grad_output
fwd = float((solve(*ARGS) - ind.ref_qp(*ARGS)).abs().max())
g_qpth, g_ref = grads(solve, v), grads(ind.ref_qp, v)
# central differences of qpth's own forward along each element of h (the inequality bounds)
fd = torch.zeros_like(h)
for j in range(h.numel()):
    e = torch.zeros_like(h)
    e[j] = 1e-6
    up, dn = list(ARGS), list(ARGS)
    up[3], dn[3] = h + e, h - e
    fd[j] = ((v * solve(*up)).sum() - (v * solve(*dn)).sum()) / 2e-6

real_clamp = torch.clamp
qp.torch = types.SimpleNamespace(**{k: getattr(torch, k) for k in dir(torch)
                                    if not k.startswith("__")})


def clamp_floor_1e300(t, min=None, max=None):  # torch.clamp's own argument names
    return real_clamp(t, min=None if min is None else 1e-300, max=max)


qp.torch.clamp = clamp_floor_1e300
g_unclamped = grads(solve, v)
qp.torch = torch


def worst(gs):
    return max(float((a - b).abs().max()) for a, b in zip(gs, g_ref, strict=True))


err = worst(g_qpth)
fd_err = float((fd - g_ref[3]).abs().max())
print(f"forward, qpth vs exact KKT solve:                  max abs {fwd:.1e}")
print(f"gradient of h, finite differences vs KKT solve:    max abs {fd_err:.1e}")
print(f"gradients, qpth backward vs KKT solve:             max abs {err:.1e}")
qpth_vs_fd = float((g_qpth[3] - fd).abs().max())
print(f"gradient of h, qpth backward vs finite differences: max abs {qpth_vs_fd:.1e}")
print(f"gradients, backward with the clamp at 1e-300:      max abs {worst(g_unclamped):.1e}")
bug = err > 2e-7 and fd_err < 1e-8 and worst(g_unclamped) < 1e-12
print("BUG REPRODUCED" if bug else "not reproduced")
sys.exit(0 if bug else 1)

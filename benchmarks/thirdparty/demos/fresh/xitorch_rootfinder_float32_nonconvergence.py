"""xitorch 0.5.1 rootfinder (broyden1, the default) on x^3 + c x - y = 0 (c > 0: one real root per
element, elementwise-separable) with 5 elements: in float32 about 1 call in 5 does not converge
(600 iterations, |f| ~ 0.3-0.95) and returns a root off by 0.15-0.4, with only a ConvergenceWarning
the same values in float64 all converge.  This is what gradlab's float32 `ragged[4->5]` rows measure
(its hint, a tile remainder, is not the cause).  No gradlab involved.
usage: python xitorch_rootfinder_float32_nonconvergence.py float32|float64"""
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # configs_fresh
sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import configs_fresh as C
import torch

opt = C._imp("xitorch.optimize")
DT = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
TOLS = (1e-6, 1e-5) if DT == torch.float32 else (1e-14,)
fn, (c, y), _ = C._xt_rootfinder_make()          # the config's 4 values, plus one drawn in range
g = torch.Generator().manual_seed(5)
bad = 0
for trial in range(20):
    c5 = torch.cat([c.detach(), c.min() + (c.max() - c.min()) * torch.rand(1, generator=g, dtype=torch.float64)]).to(DT)
    y5 = torch.cat([y.detach(), y.min() + (y.max() - y.min()) * torch.rand(1, generator=g, dtype=torch.float64)]).to(DT)
    for tol in TOLS:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = opt.rootfinder(lambda x, c, y: x ** 3 + c * x - y, torch.zeros_like(y5), params=(c5, y5), f_tol=tol, x_tol=tol)
        ref = C._cubic_root_implicit(y5.double(), c5.double())
        err = (r.double() - ref).abs().max().item()
        if err > 1e-3:
            bad += 1
            print(trial, tol, f"err {err:.3f}", [str(x.message)[:90] for x in w])
print(DT, "calls off by > 1e-3:", bad, "of", 20 * len(TOLS))

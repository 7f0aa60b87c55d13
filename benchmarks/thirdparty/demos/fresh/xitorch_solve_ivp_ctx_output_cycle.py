"""xitorch 0.5.1 _SolveIVP (xitorch.integrate.solve_ivp) keeps its output on ctx (`ctx.yt = yt`)
instead of save_for_backward: output -> grad_fn -> ctx -> output is a reference cycle, so each
call's graph (and every tensor it holds) stays alive after the caller drops it, until the cyclic
garbage collector runs.  PyTorch's docs ask for outputs to go through save_for_backward for this
reason.  No gradlab involved."""
import gc
import os
import sys
import weakref

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from xitorch.integrate import solve_ivp

gc.disable()
ts = torch.linspace(0, 1, 4, dtype=torch.float64)
y0 = torch.randn(3, dtype=torch.float64, requires_grad=True)
k = torch.rand(3, dtype=torch.float64) + 0.5
k.requires_grad_()
yt = solve_ivp(lambda t, y, k: -k * y, ts, y0, params=(k,), method="rk4")
ref = weakref.ref(yt)
del yt
print("after `del yt`, output still alive (reference cycle):", ref() is not None)
gc.collect()
print("after gc.collect():", ref() is not None)
# the same with a plain autograd op: freed at once
z = torch.exp(y0 * 2)
r2 = weakref.ref(z)
del z
print("plain op's output after del:", r2() is not None)
gc.enable()

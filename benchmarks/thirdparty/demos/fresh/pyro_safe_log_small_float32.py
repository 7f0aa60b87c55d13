"""pyro-ppl 1.9.2 safe_log (_SafeLog): backward is grad / x.clamp(min=finfo(x.dtype).eps), as its
docstring says ("avoids infinite gradients at log(0) by clamping them to at most 1/finfo.eps").
For float32 inputs below eps = 1.19e-7 the gradient is 1/eps, not 1/x: by design, not a bug.
This is what gradlab's float32 `gradient/small` row (inputs scaled to max 1e-6) measures.
No gradlab involved."""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from pyro.ops.special import safe_log

for dt in (torch.float32, torch.float64):
    x = torch.tensor([1e-6, 3e-7, 1e-7, 1e-8], dtype=dt, requires_grad=True)
    (g,) = torch.autograd.grad(safe_log(x).sum(), x)
    print(dt, "x =", x.tolist())
    print("   safe_log grad:", g.tolist())
    print("   1/x          :", (1 / x.detach()).tolist())

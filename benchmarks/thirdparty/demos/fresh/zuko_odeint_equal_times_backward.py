"""zuko 1.6.0 zuko.utils.odeint with t0 == t1 (an empty interval): forward returns x0, but backward
raises IndexError (`x1, _, _ = ctx.steps[-1]` on an empty step list).  gradlab's BUG config
zuko:odeint:times hits it in its `small`/`magnitude` variants, which scale t0 and t1 alike to the
same value.  No gradlab involved."""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from zuko.utils import odeint

x0 = torch.randn(3, dtype=torch.float64, requires_grad=True)
x1 = odeint(lambda t, x: -x, x0, 0.5, 0.5)
print("forward ok, x1 == x0:", torch.equal(x1, x0))
try:
    x1.sum().backward()
    print("backward ok:", x0.grad)
except IndexError as e:
    print("backward raises IndexError:", e)

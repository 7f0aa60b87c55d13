"""torchlie 0.1.0: SO3.exp, SO3.transform and SO3.compose raise under torch.autocast('cpu', bfloat16)
with float32 inputs (forward's matmul runs in bfloat16; backward then mixes the bfloat16
grad_output with float32 saved tensors in a matmul).  The same math in plain autograd runs.
No gradlab involved."""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
import torchlie.functional as L

torch.manual_seed(0)
w = torch.randn(5, 3, requires_grad=True)
R = L.SO3.exp(w.detach()).requires_grad_()
R1 = L.SO3.exp(torch.randn(5, 3)).requires_grad_()
p = torch.randn(5, 3, requires_grad=True)
cases = {
    "SO3.exp": (lambda: L.SO3.exp(w), None),
    "SO3.transform": (lambda: L.SO3.transform(R, p), lambda: (R @ p[..., None])[..., 0]),
    "SO3.compose": (lambda: L.SO3.compose(R, R1), lambda: R @ R1),
}
for name, (f, plain) in cases.items():
    for label, g in (("torchlie", f), ("plain", plain)):
        if g is None:
            continue
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = g()
            out.backward(torch.ones_like(out))     # backward outside the autocast region, as usual
            print(f"{name} [{label}]: ran (out dtype {out.dtype})")
        except RuntimeError as e:
            print(f"{name} [{label}]: raises: {e}")

"""torchinterp1d 1.1's Interp1d.backward never returns under torch 2.x: a demonstration
without gradlab.

Interp1d.forward builds `ynew` under enable_grad, returns it, and saves it with
ctx.save_for_backward.  A saved *output* comes back from ctx.saved_tensors with the Function's
own node as grad_fn, so backward's torch.autograd.grad(ctx.saved_tensors[0], inputs, ...)
differentiates Interp1d again, which calls backward again, and so on (reentrant backward: the
engine moves deep recursion to fresh threads, so it neither stops nor raises).

    python benchmarks/thirdparty/demos/torchinterp1d_recursion.py   # prints the evidence
"""

import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY",
                                  str(Path("~/.cache/gradlab-thirdparty").expanduser())))

import torch
from torchinterp1d import Interp1d

x = torch.linspace(0, 1, 6, dtype=torch.float64)[None]
y = torch.randn(1, 6, dtype=torch.float64, requires_grad=True)
xnew = torch.tensor([[0.1, 0.55, 0.9]], dtype=torch.float64)

out = Interp1d.apply(x, y, xnew)
# the output and the saved tensor share the Function's node: backward differentiates itself
print("output grad_fn:", type(out.grad_fn).__name__)

depth = [0]
original = Interp1d.backward


def counting_backward(ctx, grad_out):
    depth[0] += 1
    if depth[0] > 50:
        raise RecursionError(f"Interp1d.backward re-entered itself {depth[0] - 1} times")
    return original(ctx, grad_out)


Interp1d.backward = staticmethod(counting_backward)
try:
    out.sum().backward()
    print("backward returned: y.grad =", y.grad)
except RecursionError as exc:
    print("BUG:", exc)

# without the counter it does not stop: give it 20 s in a daemon thread
Interp1d.backward = original
y2 = y.detach().requires_grad_()
done = threading.Event()


def plain() -> None:
    Interp1d.apply(x, y2, xnew).sum().backward()
    done.set()


threading.Thread(target=plain, daemon=True).start()
print("plain backward finished within 20 s:", done.wait(20))
os._exit(0)  # the runaway backward threads would keep the interpreter alive

"""zuko 1.6.0 zuko.utils.odeint under torch.autocast('cpu', bfloat16): `x @ A` runs in bfloat16, the
dopri45 error estimate never falls below the requested tolerance, and the step-size loop
(`while True:` ... shrink dt) has no step or iteration limit: the call never returns.
No gradlab involved
stopped here by SIGALRM after 20 s."""
import os
import signal
import sys
import time

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from zuko.utils import odeint

x0 = torch.randn(4, 3, dtype=torch.float32)
A = torch.randn(3, 3, dtype=torch.float32) * 0.5
for tol in (1e-12, 1e-6):
    def on_alarm(*_):
        raise TimeoutError
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(20)
    t = time.time()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            x1 = odeint(lambda t, x: x @ A, x0, 0.0, 1.0, phi=(A,), atol=tol, rtol=tol)
        print(f"atol=rtol={tol:g}: returned after {time.time() - t:.1f} s")
    except TimeoutError:
        print(f"atol=rtol={tol:g}: still running after 20 s (stopped)")
    finally:
        signal.alarm(0)

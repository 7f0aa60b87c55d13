"""pypose: Lie-group maps a pose-graph or odometry step uses (Exp, Log, Mul, Inv, Act, Adj), with
backward, float64 and float32, on random group elements and tangents."""

import pypose as pp
import torch

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    for group in ("so3", "se3", "rxso3", "sim3"):
        x = getattr(pp, f"randn_{group}")(4, dtype=dtype, sigma=0.5).requires_grad_()
        X = x.Exp()  # xxx_Exp
        Y = getattr(pp, f"randn_{group.upper().replace('RXSO3', 'RxSO3').replace('SIM3', 'Sim3')}")(
            4, dtype=dtype
        ).requires_grad_()
        p = torch.randn(4, 3, dtype=dtype, requires_grad=True)
        out = [
            X.Log(),
            (X * Y).tensor(),
            X.Inv().tensor(),
            X.Act(p),
            X.Adj(x).tensor(),
            X.AdjT(x).tensor(),
            X.Act(torch.cat([p, torch.ones(4, 1, dtype=dtype)], -1)),
        ]
        sum(o.square().sum() for o in out).backward()
print("pypose ok")

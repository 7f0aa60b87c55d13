"""norse: the threshold Functions its spiking neurons use for surrogate gradients, called through
norse's functional API as a LIF step does, with backward."""

import torch
from norse.torch.functional import threshold as th
from norse.torch.functional.superspike import super_fn

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    v = torch.randn(6, 5, dtype=dtype, requires_grad=True)
    w = torch.randn(6, 5, dtype=dtype)
    outs = [
        th.heavi_erfc_fn(v, 4.0),
        th.heavi_tanh_fn(v, 4.0),
        th.logistic_fn(v, 4.0),
        th.heavi_circ_fn(v, 4.0),
        th.circ_dist_fn(v, 4.0),
        th.triangle_fn(v, 0.3),
        super_fn(v, 100.0),
    ]
    sum((o * w).sum() for o in outs).backward()
print("norse ok")

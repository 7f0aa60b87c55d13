"""brevitas: the straight-through estimator ops its quantizers call, through its public ste
functions, and a quantized layer's training step."""

import brevitas.nn as qnn
import torch
from brevitas.function import ops_ste

torch.manual_seed(0)
x = torch.randn(6, 5, requires_grad=True)
outs = [
    ops_ste.round_ste(x * 4),
    ops_ste.ceil_ste(x * 4),
    ops_ste.floor_ste(x * 4),
    ops_ste.round_to_zero_ste(x * 4),
    ops_ste.binary_sign_ste(x),
    ops_ste.ternary_sign_ste(x),
    ops_ste.dpu_round_ste(x * 4),
    ops_ste.scalar_clamp_ste(x, -0.5, 0.5),
    ops_ste.scalar_clamp_min_ste(x, -0.5),
    ops_ste.tensor_clamp_ste(x, -torch.ones(5) * 0.3, torch.ones(5) * 0.3),
    ops_ste.abs_binary_sign_grad(x),
]
w = torch.randn(6, 5)
sum((o * w).sum() for o in outs).backward()
layer = qnn.QuantLinear(5, 3, bias=True, weight_bit_width=4)
layer(torch.randn(6, 5)).square().sum().backward()
print("brevitas ok")

"""pytorch-tabnet 4.1.0, pytorch_tabnet.sparsemax. Shown without gradlab:
1. SparsemaxFunction's forward does `input -= max_val`: the caller's tensor is changed in place
   (without ctx.mark_dirty), so x after Sparsemax()(x) is x - max(x).
2. Entmax15Function's double backward is silently wrong: its Hessian-vector products differ from
   those of the same forward written in plain autograd (whose first derivatives agree).
Run: PYTHONPATH=$GRADLAB_HARVEST/site python \
    benchmarks/harvest/demos/tabnet_sparsemax_inplace_entmax_second_order.py
"""

import torch
from pytorch_tabnet.sparsemax import Entmax15Function, SparsemaxFunction

torch.manual_seed(0)
x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
before = x.detach().clone()
SparsemaxFunction.apply(x, -1)
print(
    "1. sparsemax changed its input in place: max |x_after - x_before| =",
    f"{(x.detach() - before).abs().max().item():.3f}",
)


def entmax15_plain(z, dim=-1):  # the same forward, in plain autograd
    z = (z - z.max(dim, keepdim=True).values) / 2
    zs, _ = torch.sort(z, descending=True, dim=dim)
    rho = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype)
    mean = zs.cumsum(dim) / rho
    ss = rho * ((zs**2).cumsum(dim) / rho - mean**2)
    tau = mean - torch.sqrt(torch.clamp((1 - ss) / rho, min=0))
    k = (tau <= zs).sum(dim, keepdim=True)
    return torch.clamp(z - tau.gather(dim, k - 1), min=0) ** 2


z = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
g = torch.randn(3, 5, dtype=torch.float64)
v = torch.randn(3, 5, dtype=torch.float64)
for name, f in (
    ("Entmax15Function", lambda t: Entmax15Function.apply(t, -1)),
    ("plain autograd", entmax15_plain),
):
    (d1,) = torch.autograd.grad(f(z), z, g, create_graph=True)
    (d2,) = torch.autograd.grad(d1, z, v, allow_unused=True)
    hvp = None if d2 is None else [round(t, 4) for t in d2[0].tolist()]
    print(
        f"2. {name}: first derivative row 0 {[round(t, 4) for t in d1[0].tolist()]};"
        f" Hessian-vector product row 0 {hvp}"
    )

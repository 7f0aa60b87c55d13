"""gpytorch 1.15.2: LogNormalCDF (gpytorch.functions.log_normal_cdf). Which is off, the forward or
the backward, and by how much? Shown without gradlab, in float64, against torch.special.log_ndtr
(exact log Phi) and its plain-autograd derivative, and against central differences of
LogNormalCDF's own forward, on the values the harvest's example recorded.
Run: PYTHONPATH=$GRADLAB_HARVEST/site python benchmarks/harvest/demos/gpytorch_log_normal_cdf.py
"""

import torch
from gpytorch.functions._log_normal_cdf import LogNormalCDF

torch.manual_seed(0)
torch.randn(5, 6)  # the example's draws: 3 * randn(5, 6), then linspace(-8, 4, 9)
z = torch.cat(
    [3 * torch.randn(30, dtype=torch.float64), torch.linspace(-8, 4, 9, dtype=torch.float64)]
)
zr = z.clone().requires_grad_()
fwd = LogNormalCDF.apply(zr)
(g,) = torch.autograd.grad(fwd.sum(), zr)
ze = z.clone().requires_grad_()
exact = torch.special.log_ndtr(ze)
(ge,) = torch.autograd.grad(exact.sum(), ze)
h = 1e-6
fd = (LogNormalCDF.apply(z + h) - LogNormalCDF.apply(z - h)) / (2 * h)
for name, mask in (
    ("z < -1", z < -1),
    ("|z| < 0.2", z.abs() < 0.2),
    ("ordinary", (z >= -1) & (z.abs() >= 0.2)),
):
    if not mask.any():
        continue
    rel = lambda a, b: ((a - b).abs() / b.abs().clamp_min(1e-3)).max().item()  # noqa: E731
    print(
        f"{name:10s} z in [{z[mask].min().item():.2f}, {z[mask].max().item():.2f}]"
        f" ({int(mask.sum())} values):"
        f" forward vs log_ndtr rel {rel(fwd.detach()[mask], exact.detach()[mask]):.1e};"
        f" backward vs exact derivative rel {rel(g[mask], ge[mask]):.1e};"
        f" backward vs central differences of its forward rel {rel(g[mask], fd[mask]):.1e};"
        f" central differences vs exact derivative rel {rel(fd[mask], ge[mask]):.1e}"
    )

# part 2: a dense scan of z < -1 (the rational-approximation branch): the backward against the
# exact derivative and against central differences of LogNormalCDF's own forward
z = torch.linspace(-6, -1.001, 2000, dtype=torch.float64, requires_grad=True)
(g,) = torch.autograd.grad(LogNormalCDF.apply(z).sum(), z)
ze = z.detach().clone().requires_grad_()
(ge,) = torch.autograd.grad(torch.special.log_ndtr(ze).sum(), ze)
zd = z.detach()
fd = (LogNormalCDF.apply(zd + 1e-6) - LogNormalCDF.apply(zd - 1e-6)) / 2e-6
i = ((g - ge).abs() / ge.abs()).argmax()
print(
    f"part 2: z < -1: worst backward at z = {zd[i].item():.3f}: backward {g[i].item():.5f},"
    f" exact derivative {ge[i].item():.5f}, central differences of the forward {fd[i].item():.5f}"
    f" (rel {((g[i] - ge[i]) / ge[i]).abs().item():.1e})"
)

# part 3: double backward: silently 0 instead of the exact second derivative of log Phi
z = torch.tensor([-2.5, -1.5, 0.1, 1.0], dtype=torch.float64, requires_grad=True)
(g,) = torch.autograd.grad(LogNormalCDF.apply(z).sum(), z, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), z, allow_unused=True) if g.requires_grad else (None,)
ze = z.detach().clone().requires_grad_()
(ge,) = torch.autograd.grad(torch.special.log_ndtr(ze).sum(), ze, create_graph=True)
(he,) = torch.autograd.grad(ge.sum(), ze)
print(
    f"part 3: d2/dz2 log Phi at {z.tolist()}: LogNormalCDF's double backward"
    f" {None if h is None else [round(v, 4) for v in h.tolist()]}"
    f" (g.requires_grad={g.requires_grad}),"
    f" exact {[round(v, 4) for v in he.tolist()]}"
)

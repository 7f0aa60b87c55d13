"""roma 1.8.0: _ProcrustesManualDerivatives' double backward, against the same maps written with
torch.linalg.svd in plain autograd, on 3x3 special_procrustes (as the harvest's example calls it)
and on 4x4 procrustes without force_rotation (the calls gradlab's second_order row failed).
Run: PYTHONPATH=$GRADLAB_HARVEST/site python \
    benchmarks/harvest/demos/roma_procrustes_second_order.py
"""

import roma
import torch

torch.manual_seed(0)


def procrustes_plain(M):  # nearest rotation, plain autograd
    U, _, Vt = torch.linalg.svd(M)
    d = torch.det(U @ Vt)
    S = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1))
    return U @ S @ Vt


def polar_plain(M):  # nearest orthonormal matrix, plain autograd
    U, _, Vt = torch.linalg.svd(M)
    return U @ Vt


for n, pair in (
    (3, (roma.special_procrustes, procrustes_plain)),
    (4, (roma.procrustes, polar_plain)),
):
    M = torch.randn(2, n, n, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, n, n, dtype=torch.float64)
    v = torch.randn(2, n, n, dtype=torch.float64)
    for name, f in zip(("roma", "plain autograd"), pair, strict=True):
        (d1,) = torch.autograd.grad(f(M), M, g, create_graph=True)
        (d2,) = torch.autograd.grad(d1, M, v, allow_unused=True)
        hv = None if d2 is None else [round(t, 4) for t in d2[0, 0].tolist()]
        print(
            f"{n}x{n} {name}: first derivative [0, 0] {[round(t, 4) for t in d1[0, 0].tolist()]};"
            f" Hessian-vector product [0, 0] {hv}"
        )

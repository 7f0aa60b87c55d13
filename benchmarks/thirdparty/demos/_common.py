"""Shared helpers for the demos: import path of the pinned third-party install, finite differences."""
import os
import sys
import types

import torch

TP = os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty"))
if TP not in sys.path:
    sys.path.insert(0, TP)
try:  # pytorch_wavelets imports pkg_resources (gone from setuptools >= 81); only its DTCWT uses it
    import pkg_resources  # noqa: F401
except ImportError:
    _m = types.ModuleType("pkg_resources")
    _m.resource_stream = lambda pkg, name: __import__("importlib.resources").resources.files(pkg).joinpath(name).open("rb")
    sys.modules["pkg_resources"] = _m
try:  # qpth imports cvxpy for its optional CVXPY solver; the PDIPM solver used here never touches it
    import cvxpy  # noqa: F401
except ImportError:
    sys.modules["cvxpy"] = types.ModuleType("cvxpy")


def fd_vjp(f, x, v, eps=1e-6):
    """Central differences of <v, f(x)> with respect to each element of x (float64)."""
    flat = x.detach().reshape(-1)
    out = torch.empty_like(flat)
    for j in range(flat.numel()):
        xp, xm = flat.clone(), flat.clone()
        xp[j] += eps
        xm[j] -= eps
        out[j] = ((v * f(xp.reshape(x.shape))).sum() - (v * f(xm.reshape(x.shape))).sum()) / (2 * eps)
    return out.reshape(x.shape)


def vjp(f, x, v):
    x = x.detach().clone().requires_grad_(True)
    g, = torch.autograd.grad(f(x), x, v)
    return g

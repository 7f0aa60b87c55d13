"""One config per real bug found in the third-party corpus (issue 28): run_corpus.py checks
``BUGS`` apart from the correct ``CONFIGS`` and expects every one of them to fail (a fail or an
error row, or gradlab's time limit).  Each is shown without gradlab by a script in demos/.

The lead's (torchinterp1d, roma, POT, kornia) reuse configs_lead.py; the independent helper's
(entmax, qpth, pytorch-wavelets, torch-struct) are written here from their demos, with the
references of configs_independent.py or of the demo.  Packages are imported inside make().
"""

from __future__ import annotations

import functools
from typing import Any

import configs_lead as lead
import torch
from corpus import Config, Made

F64 = torch.float64
ENTMAX = "entmax==1.3"
QPTH = "qpth==0.0.18"
WAVELETS = "pytorch-wavelets==1.3.0"
TORCH_STRUCT = "torch-struct==0.5"


def _independent() -> Any:
    """configs_independent.py (its import shims for qpth and pytorch_wavelets included)."""
    import configs_independent

    configs_independent._setup_path()
    return configs_independent


# ---- entmax: Entmax15Function's double backward is NaN where the output is 0 -------------

ENTMAX_X = ((1.2, 0.3, 0.9, -0.8, 0.55, -1.5), (0.1, -0.7, 1.4, 0.6, -1.2, 0.2))


def _entmax15_second_order() -> Made:
    _independent()
    import entmax

    return entmax.entmax15, [torch.tensor(ENTMAX_X, dtype=F64, requires_grad=True)], {}


def ref_entmax15(x: torch.Tensor) -> torch.Tensor:
    return _independent().ref_entmax15(x, -1)


# ---- qpth: the gradient of a parameter shared by the batch is the batch mean --------------

def _qp_problem() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    nb, nz = 3, 3
    low = torch.randn(nz, nz, dtype=F64, generator=g) * 0.5
    return {"Q": low @ low.T + 0.5 * torch.eye(nz, dtype=F64),
            "p": torch.randn(nb, nz, dtype=F64, generator=g),
            "G": torch.randn(2, nz, dtype=F64, generator=g),
            "h": torch.rand(2, dtype=F64, generator=g) + 5.0,  # loose: no inequality active
            "A": torch.randn(1, nz, dtype=F64, generator=g)}


def _qpth_shared_b() -> Made:
    _independent()
    from qpth.qp import QPFunction

    qp = _qp_problem()

    def fn(b: torch.Tensor) -> torch.Tensor:
        d = {k: v.to(b.dtype) for k, v in qp.items()}
        return QPFunction(verbose=-1)(d["Q"], d["p"], d["G"], d["h"], d["A"], b)

    return fn, [torch.tensor([0.2], dtype=F64, requires_grad=True)], {}


def ref_qp_shared_b(b: torch.Tensor) -> torch.Tensor:
    """No inequality active: z solves [[Q, A^T], [A, 0]] [z; nu] = [-p; b] per problem."""
    d = {k: v.to(b.dtype) for k, v in _qp_problem().items()}
    q, a, p = d["Q"], d["A"], d["p"]
    kkt = torch.cat([torch.cat([q, a.T], 1), torch.cat([a, a.new_zeros(1, 1)], 1)], 0)
    rhs = torch.cat([-p, b.expand(p.shape[0], 1)], 1)
    return torch.linalg.solve(kkt, rhs.T).T[:, : q.shape[0]]


# ---- pytorch-wavelets: AFB1D's backward is the inverse transform, wrong for padded modes ----

def _float64_module(cls: Any, **kwargs: Any) -> Any:
    """A pytorch_wavelets module whose filters are float64 from the start: they are made in the
    default dtype, and float32 filters cast up later are off by 1e-8 (a forward mismatch)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(F64)
    try:
        return cls(**kwargs)
    finally:
        torch.set_default_dtype(before)


def _dwt_matrices(n: int, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    import pywt

    eye = torch.eye(n, dtype=F64)
    lo = torch.stack([torch.tensor(pywt.dwt(e.tolist(), "db2", mode=mode)[0]) for e in eye], 1)
    hi = torch.stack([torch.tensor(pywt.dwt(e.tolist(), "db2", mode=mode)[1]) for e in eye], 1)
    return lo, hi


def _wavelets_symmetric() -> Made:
    _independent()
    from pytorch_wavelets import DWT1DForward

    def fn(x: torch.Tensor) -> torch.Tensor:
        lo, hi = _float64_module(DWT1DForward, J=1, wave="db2", mode="symmetric").to(x.dtype)(x)
        return torch.cat([lo, hi[0]], -1)

    return fn, [lead._randn(2, 1, 12, seed=30)], {}


def ref_dwt_symmetric(x: torch.Tensor) -> torch.Tensor:
    """PyWavelets' own dwt (mode 'symmetric', PyWavelets' default) as a matrix."""
    _independent()
    lo, hi = _dwt_matrices(x.shape[-1], "symmetric")
    return torch.cat([x @ lo.T.to(x.dtype), x @ hi.T.to(x.dtype)], -1)


# ---- pytorch-wavelets: SFB1D drops the high-pass gradient when the low-pass needs none -----

def _idwt_matrices(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    import pywt

    eye = torch.eye(n, dtype=F64)
    zero = [0.0] * n
    lo = torch.stack([torch.tensor(pywt.idwt(e.tolist(), zero, "db2", mode="zero")) for e in eye])
    hi = torch.stack([torch.tensor(pywt.idwt(zero, e.tolist(), "db2", mode="zero")) for e in eye])
    return lo, hi


YL = lead._randn(1, 1, 7, seed=31, grad=False)


def _wavelets_inverse_highpass() -> Made:
    _independent()
    from pytorch_wavelets import DWT1DInverse

    def fn(yh: torch.Tensor) -> torch.Tensor:
        idwt = _float64_module(DWT1DInverse, wave="db2", mode="zero").to(yh.dtype)
        return idwt((YL.to(yh.dtype), [yh]))

    return fn, [lead._randn(1, 1, 7, seed=32)], {}


def ref_idwt_highpass(yh: torch.Tensor) -> torch.Tensor:
    """PyWavelets' idwt (mode 'zero') of (YL, yh) as two matrices."""
    _independent()
    lo, hi = _idwt_matrices(yh.shape[-1])
    return YL.to(yh.dtype) @ lo.to(yh.dtype) + yh @ hi.to(yh.dtype)


# ---- torch-struct: _SimplexProject's forward is <x, w> - ||w||, its backward that of -1/2||w||^2

def _simplex_project() -> Made:
    from torch_struct.semirings.sparse_max import _SimplexProject

    def fn(x: torch.Tensor) -> torch.Tensor:
        return _SimplexProject.apply(x, -1)

    return fn, [lead._randn(3, 5, seed=33)], {}


def ref_smoothed_max(x: torch.Tensor) -> torch.Tensor:
    """max_w <x, w> - 1/2 ||w||^2 over the simplex: w* = sparsemax(x)."""
    zs, _ = torch.sort(x, -1, descending=True)
    css = zs.cumsum(-1)
    j = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    with torch.no_grad():
        k = ((1 + j * zs) > css).sum(-1, keepdim=True)
    w = torch.clamp(x - (css.gather(-1, k - 1) - 1) / k, min=0)
    return (x * w).sum(-1) - 0.5 * (w * w).sum(-1)


def _independent_made(name: str) -> Made:
    """configs_independent's make() `name`, its floating args requiring grad (its _rg)."""
    ind = _independent()
    return ind._rg(getattr(ind, name))()


def ref_qp(*args: torch.Tensor) -> torch.Tensor:
    return _independent().ref_qp(*args)


# ---- torchsde: the reversible adjoint is exact only for a dt that is a power of two ------

def _sde_inexact_dt() -> Made:
    return lead._sde(True, 10)


BUGS: list[Config] = [
    Config("torchsde:sdeint_adjoint:revheun,dt=0.05", lead.TORCHSDE, _sde_inexact_dt,
           lead._reversible_heun(True, 10), "at dt = 0.05 the reversible adjoint does not retrace "
           "the forward's grid: float64 gradient 6.4e-3 off the same scheme written out, which "
           "finite differences confirm (demos/torchsde_adjoint_inexact_dt.py)",
           seen_by=("gradient", "jacobian")),
    Config("qpth:QPFunction:nz3,ineq4,eq1,unbatched", QPTH,
           functools.partial(_independent_made, "_mk_qpth_single"), ref_qp,
           "backward clamps lambda / s of the KKT system at 1e8: float64 gradients off by "
           "5e-7 to 3e-6 (demos/qpth_backward_clamp.py)",
           seen_by=("gradient", "jacobian")),
    Config("qpth:QPFunction:b2,nz4,ineq3,eq1", QPTH,
           functools.partial(_independent_made, "_mk_qpth_batched"), ref_qp,
           "the same clamp, batched: off where a multiplier is small (a grown problem) "
           "(demos/qpth_backward_clamp.py)",
           seen_by=("gradient", "jacobian")),
    Config("torchinterp1d:interp1d:y,3x6->3x8", lead.TORCHINTERP1D, lead._interp_values,
           lead.ref_interp1d, "backward differentiates the saved output, whose grad_fn is "
           "Interp1d itself: it re-enters its own backward without end "
           "(demos/torchinterp1d_recursion.py)",
           seen_by=("gradient",)),
    Config("POT:emd2:3x4", lead.POT, lead._pot_emd2, lead.ref_emd2,
           "ot.emd2 raises 'ValueError: ndarray is not C-contiguous' for a non-contiguous "
           "marginal a (a column slice; demos/pot_emd2_noncontiguous.py)",
           seen_by=("forward", "gradient")),
    Config("POT:solve(grad=envelope):sinkhorn,3x4", lead.POT, lead._pot_sinkhorn_envelope,
           lead.ref_sinkhorn, "ValFunction's backward returns the plan as a constant and is not "
           "@once_differentiable: double backward silently 0 where the Hessian is not "
           "(demos/double_backward_silently_wrong.py)",
           seen_by=("second_order",)),
    Config("roma:procrustes:svd,2x2x4x4", lead.ROMA, lead._roma_procrustes_svd,
           lead.ref_orthonormal, "the SVD Function's backward uses U, V saved as outputs marked "
           "non-differentiable, not @once_differentiable: double backward silently wrong "
           "(demos/double_backward_silently_wrong.py)",
           seen_by=("second_order",)),
    Config("kornia:_NullSpaceBasis:projector,2x5x9", lead.KORNIA, lead._kornia_null_space,
           lead.ref_null_space_projector, "backward uses S, V saved as outputs marked "
           "non-differentiable, not @once_differentiable: double backward silently wrong "
           "(demos/double_backward_silently_wrong.py)",
           seen_by=("second_order",)),
    Config("entmax:entmax15:2x6,second-order", ENTMAX, _entmax15_second_order, ref_entmax15,
           "double backward differentiates Y.sqrt() at Y = 0: NaN for every row with a zero "
           "(demos/entmax_second_order.py)",
           seen_by=("second_order",)),
    Config("qpth:QPFunction:shared-b,batch3", QPTH, _qpth_shared_b, ref_qp_shared_b,
           "the gradient of b shared by a batch of 3 is the batch mean, 1/3 of the true sum "
           "(demos/qpth_shared_parameter_grad_is_mean.py)",
           seen_by=("gradient", "jacobian")),
    Config("pytorch_wavelets:DWT1DForward(AFB1D):2x1x12,db2,symmetric", WAVELETS,
           _wavelets_symmetric, ref_dwt_symmetric, "backward runs the inverse transform, which "
           "is not the adjoint under symmetric padding (demos/pytorch_wavelets_backward_bugs.py)",
           seen_by=("gradient", "jacobian")),
    Config("pytorch_wavelets:DWT1DInverse(SFB1D):highpass-only,1x1x7", WAVELETS,
           _wavelets_inverse_highpass, ref_idwt_highpass, "the high-pass gradient is computed "
           "only when the low-pass needs one: None (zero) otherwise "
           "(demos/pytorch_wavelets_backward_bugs.py)",
           seen_by=("gradient", "jacobian")),
    Config("torch_struct:_SimplexProject:3x5", TORCH_STRUCT, _simplex_project, ref_smoothed_max,
           "forward computes <x, w> - ||w||, backward the gradient of <x, w> - 1/2 ||w||^2 "
           "(demos/torch_struct_simplex_project_forward.py)",
           seen_by=("forward", "jacobian")),
]

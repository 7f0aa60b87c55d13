"""Three Functions whose double backward is silently wrong, a demonstration without gradlab.

Each backward computes from tensors that carry no graph back to the input (outputs marked
non-differentiable, or a constant on ctx) and is not decorated @once_differentiable, so
differentiating it again neither raises nor gives the right answer:
  roma 1.8.0   _ProcrustesManualDerivatives (roma.procrustes, SVD route): U, V saved as
               outputs marked non-differentiable;
  kornia 0.9.0 _NullSpaceBasis: S, V saved as outputs marked non-differentiable;
  POT 0.9.7    ValFunction (ot.solve(..., grad="envelope")): the plan is a constant on ctx,
               so its share of a Hessian comes out 0 (alone, double backward raises;
               inside a larger objective, below, it is silently dropped).
First order is right in all three (torch.autograd.gradcheck passes); gradgradcheck fails, and
the plain-autograd references of configs_lead.py pass it.

    python benchmarks/thirdparty/demos/double_backward_silently_wrong.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # configs_lead.py (its set-ups and references)

import configs_lead as lead  # noqa: E402  (puts nothing on the path itself)
import run_corpus  # noqa: E402

run_corpus.setup_path(run_corpus.thirdparty_dir())

import torch  # noqa: E402

cases = {
    "roma.procrustes (SVD)": (lead._roma_procrustes_svd, lead.ref_orthonormal, None),
    "kornia _NullSpaceBasis": (lead._kornia_null_space, lead.ref_null_space_projector, None),
    "POT solve(grad=envelope)": (lead._pot_sinkhorn_envelope, lead.ref_sinkhorn, 2),
}
bugs = []
for name, (make, ref, arg) in cases.items():
    fn, args, _ = make()
    i = len(args) - 1 if arg is None else arg
    x = args[i].detach().requires_grad_()

    def at(f, _args=args, _i=i):
        return lambda t: f(*[t if j == _i else a for j, a in enumerate(_args)])

    first = torch.autograd.gradcheck(at(fn), (x,), raise_exception=False)
    second = torch.autograd.gradgradcheck(at(fn), (x,), raise_exception=False)
    ref_second = torch.autograd.gradgradcheck(at(ref), (x,), raise_exception=False)
    # one Hessian-vector product of sum(f(x)) + ||x||^2 / 2, the Function's against the
    # reference's (the quadratic keeps the first gradient attached to x: POT's alone is not)
    v = torch.randn_like(x)

    def hvp(f, _x=x, _v=v):
        (g,) = torch.autograd.grad(f(_x).sum() + 0.5 * (_x * _x).sum(), _x, create_graph=True)
        return torch.autograd.grad((g * _v).sum(), _x)[0]

    h, h_ref = hvp(at(fn)), hvp(at(ref))
    err = float((h - h_ref).abs().max())
    print(f"{name:26s} gradcheck {first!s:5s}  gradgradcheck {second!s:5s}  reference's "
          f"gradgradcheck {ref_second!s:5s}  |Hv - Hv_ref| {err:.2g}  |Hv_ref| "
          f"{float(h_ref.abs().max()):.2g}")
    bugs.append(first and not second and ref_second)
print("BUGS REPRODUCED" if all(bugs) else f"not reproduced: {bugs}")
sys.exit(0 if all(bugs) else 1)

"""torch-interpol 0.3.0: SplineCoeff's backward returns a list, so autograd sees one gradient
for five inputs and every backward through interpol.spline_coeff raises. Shown without gradlab.

Part 2 asks whether the intended gradient (the backward's own formula, "symmetric filter ->
backward == forward") is right: it compares the forward's Jacobian, built column by column, with
the transpose of the map the backward applies.
Run: PYTHONPATH=$GRADLAB_HARVEST/site python \
    benchmarks/harvest/demos/interpol_spline_coeff_backward.py
"""

import interpol
import torch
from interpol.autograd import SplineCoeff

x = torch.randn(1, 7, dtype=torch.float64, requires_grad=True)
try:
    interpol.spline_coeff(x, interpolation=3, dim=-1).sum().backward()
    print("part 1: backward ran (fixed in this version)")
except RuntimeError as e:
    print("part 1: backward raised:", e)

# part 2: the Jacobian of the forward against the transpose of what backward computes
n = 7
eye = torch.eye(n, dtype=torch.float64)
for bound in ("dct2", "dft", "zero"):
    J = torch.stack(
        [interpol.spline_coeff(eye[i], interpolation=3, bound=bound, dim=-1) for i in range(n)], 1
    )  # column i: forward of unit vector i
    # backward's map: spline_coeff(grad, same options), i.e. J_b = J; correct needs J_b = J^T
    asym = (J - J.T).abs().max().item()
    print(
        f"part 2: bound={bound}: max |J - J^T| = {asym:.2e}"
        f" -> backward's gradient {'correct' if asym < 1e-12 else 'wrong'} where fixed"
    )


# part 3: the same Function with only the list turned into a tuple, under torch's gradcheck
class TupleSplineCoeff(SplineCoeff):
    @staticmethod
    def backward(ctx, grad):
        return tuple(SplineCoeff.backward(ctx, grad))


for bound in ("dct2", "dft", "zero", "replicate"):
    xi = torch.randn(1, 7, dtype=torch.float64, requires_grad=True)
    ok = torch.autograd.gradcheck(
        lambda t, bound=bound: TupleSplineCoeff.apply(t, bound, 3, -1, False),
        (xi,),
        raise_exception=False,
    )
    print(
        f"part 3: tuple-fixed SplineCoeff, bound={bound}: gradcheck {'passes' if ok else 'FAILS'}"
    )

"""torch-interpol: spline interpolation (pull, push, count, grad, coefficients) of a small image
at a deformed grid, orders 0-3 and several boundary conditions, with backward."""

import interpol
import torch

torch.manual_seed(0)


def spline_coeff_backward(img):
    """0.3.0: SplineCoeff's backward returns 1 gradient for 5 inputs (demos/): it raises."""
    try:
        interpol.spline_coeff(img, interpolation=3, dim=-1).sum().backward()
        interpol.spline_coeff_nd(img, interpolation=3, dim=2).square().sum().backward()
    except RuntimeError as e:
        print("interpol: spline_coeff backward raised:", str(e)[:90])


for dtype in (torch.float64, torch.float32):
    img = torch.randn(1, 6, 7, dtype=dtype, requires_grad=True)
    grid = (
        interpol.identity_grid([5, 6], dtype=dtype) + 0.7 * torch.randn(5, 6, 2, dtype=dtype)
    ).requires_grad_()
    for order, bound in ((1, "zero"), (3, "dct2"), (2, "dft"), (0, "replicate")):
        outs = [
            interpol.grid_pull(img, grid, interpolation=order, bound=bound),
            interpol.grid_push(
                img[:, :5, :6], grid, shape=[6, 7], interpolation=order, bound=bound
            ),
            interpol.grid_count(grid, shape=[6, 7], interpolation=order, bound=bound),
            interpol.grid_grad(img, grid, interpolation=order, bound=bound),
        ]
        sum(o.square().sum() for o in outs).backward()
    spline_coeff_backward(img)
print("interpol ok")

"""zuko 1.6.0 zuko.utils.bisection / gauss_legendre: when a parameter in `phi` does not require grad
(a frozen parameter, a constant tensor) while y (bisection) or a/b (gauss_legendre) does, backward
raises: it calls torch.autograd.grad(..., phi, ...) without checking ctx.needs_input_grad.
No gradlab involved."""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
from zuko.utils import bisection, gauss_legendre

w = torch.tensor([0.3, -0.2], dtype=torch.float64)            # frozen parameter
y = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
x = bisection(lambda x: x ** 3 + torch.exp(w) * x, y, -10.0, 10.0, n=100, phi=(w,))
try:
    x.sum().backward()
    print("bisection: backward ran, grad y =", y.grad)
except RuntimeError as e:
    print("bisection: backward raises:", e)

a = torch.tensor([0.0, 0.5], dtype=torch.float64, requires_grad=True)
b = torch.tensor([1.0, 2.0], dtype=torch.float64)
c = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)   # frozen polynomial coefficients
area = gauss_legendre(lambda t: c[0] + c[1] * t + c[2] * t ** 2 + c[3] * t ** 3, a, b, n=3, phi=(c,))
try:
    area.sum().backward()
    print("gauss_legendre: backward ran, grad a =", a.grad)
except RuntimeError as e:
    print("gauss_legendre: backward raises:", e)
# the same calls without phi run: the parameter is just a closure constant
x = bisection(lambda x: x ** 3 + torch.exp(w) * x, y, -10.0, 10.0, n=100)
x.sum().backward()
print("bisection without phi: grad y =", y.grad)

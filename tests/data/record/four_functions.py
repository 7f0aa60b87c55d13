"""A small training program with four custom autograd.Functions inside nn.Modules, one of them
wrong (`SoftplusFn`'s backward halves its gradient): tests/test_record.py records it with
`gradlab record` and checks what was recorded."""

import sys

import torch
from torch import nn


class SwishFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))


class GateFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * torch.sigmoid(w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        s = torch.sigmoid(w)
        return g * s, (g * x * s * (1 - s)).sum(0)


class RowNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps):
        ctx.save_for_backward(x)
        ctx.eps = eps
        return x / (x * x).sum(-1, keepdim=True).add(eps).sqrt()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors  # recomputed from x: double backward differentiates this
        n = (x * x).sum(-1, keepdim=True).add(ctx.eps).sqrt()
        y = x / n
        return (g - y * (g * y).sum(-1, keepdim=True)) / n, None


class SoftplusFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x) * 0.5  # the bug: softplus' derivative is sigmoid(x)


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n, dtype=torch.float64)
        self.gate = nn.Parameter(torch.randn(n, dtype=torch.float64))

    def forward(self, x):
        h = SwishFn.apply(self.lin(x))
        return RowNormFn.apply(GateFn.apply(h, self.gate), 1e-6)


class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.block = Block(n)
        self.out = nn.Linear(n, 1, dtype=torch.float64)

    def forward(self, x):
        return SoftplusFn.apply(self.out(self.block(x)))


def main():
    torch.manual_seed(0)
    net = Net(5)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(4, 5, dtype=torch.float64)
    for step in range(3):
        opt.zero_grad()
        loss = net(x).mean()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.6f}")
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()

"""pytorch-revgrad: gradient reversal between a feature extractor and a domain classifier."""

import torch
from pytorch_revgrad import RevGrad
from pytorch_revgrad.functional import revgrad

torch.manual_seed(0)
feat = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh())
dom = torch.nn.Sequential(RevGrad(alpha=0.5), torch.nn.Linear(4, 2))
x = torch.randn(8, 5)
torch.nn.functional.cross_entropy(dom(feat(x)), torch.randint(0, 2, (8,))).backward()

(
    revgrad(
        torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
        torch.tensor([2.0], dtype=torch.float64),
    )
    ** 2
).sum().backward()
print("revgrad ok")

"""entmax: sparsemax, entmax15 and entmax_bisect mappings and their Fenchel-Young losses, as a
classifier's training step calls them, with backward."""

import entmax
import torch

torch.manual_seed(0)
for dtype in (torch.float64, torch.float32):
    x = torch.randn(4, 6, dtype=dtype, requires_grad=True)
    w = torch.randn(4, 6, dtype=dtype)
    y = torch.randint(0, 6, (4,))
    outs = [
        entmax.sparsemax(x, dim=-1),
        entmax.entmax15(x, dim=-1),
        entmax.entmax_bisect(x, alpha=1.3, dim=-1),
    ]
    loss = sum((o * w).sum() for o in outs)
    loss = loss + entmax.sparsemax_loss(x, y).sum() + entmax.entmax15_loss(x, y).sum()
    loss.backward()
print("entmax ok")

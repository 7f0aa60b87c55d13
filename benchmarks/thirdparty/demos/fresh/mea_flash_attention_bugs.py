"""memory-efficient-attention-pytorch 0.1.6, flash_attention.FlashAttentionFunction and
cosine_sim_flash_attention.FlashAttentionFunction.  No gradlab involved.
 1. float64 inputs raise: `torch.full(..., -torch.finfo(q.dtype).max)` is created in the default
    dtype (float32) and -1.8e308 overflows it.
 2. causal with more keys than queries is misaligned: q_start_index = ind*q_bucket - (nk - nq)
    should be + (nk - nq)
    the package's own `attention()` (memory_efficient_attention.py) aligns
    at the end (triu(j - i + 1)), the flash version lets query i see keys j <= i - (nk - nq) (the
    first rows see none).
 3. cosine-sim flash attention with a key mask: the mask is split along the KEY axis with the
    QUERY bucket size and applied to every key tile: raises (or misapplies) when the buckets differ.
 4. cosine-sim flash attention in float64: the row sums are accumulated in a float32 tensor
    (`torch.zeros(..., device=device)`): float64 outputs/gradients carry float32 errors (~1e-7).
"""
import os
import sys

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY", os.path.expanduser("~/.cache/gradlab-thirdparty")))
import torch
import torch.nn.functional as F
from memory_efficient_attention_pytorch.cosine_sim_flash_attention import (
    FlashAttentionFunction as CFA,
)
from memory_efficient_attention_pytorch.flash_attention import FlashAttentionFunction as FA
from memory_efficient_attention_pytorch.memory_efficient_attention import attention

g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 2, n, 8, generator=g) for n in (6, 10, 10))

print("1. float64:")
try:
    FA.apply(q.double(), k.double(), v.double(), None, False, 4, 3)
    print("   ran")
except RuntimeError as e:
    print("   RuntimeError:", e)

print("2. causal, 6 queries x 10 keys (float32):")
o_flash = FA.apply(q, k, v, None, True, 4, 3)
o_own = attention(q, k, v, causal=True)           # the package's own plain attention
print("   max |flash - package's attention()| =", (o_flash - o_own).abs().max().item())
o_flash_1tile = FA.apply(q, k, v, None, True, 64, 64)
print("   (one tile: max diff =", (o_flash_1tile - o_own).abs().max().item(), ")")

print("3. cosine-sim, key mask, q bucket 4 / k bucket 3 (float32):")
mask = torch.ones(1, 10, dtype=torch.bool)
mask[0, -3:] = False
qn, kn = F.normalize(q[..., :10, :], dim=-1), F.normalize(k, dim=-1)
qn10 = F.normalize(torch.randn(1, 2, 10, 8, generator=g), dim=-1)
try:
    CFA.apply(qn10, kn, v, mask, 4.0, False, 4, 3)
    print("   ran")
except RuntimeError as e:
    print("   RuntimeError:", e)
# equal buckets (5/5): runs, but the mask chunks are indexed by query tile
o = CFA.apply(qn10, kn, v, mask, 4.0, False, 5, 5)
s = (qn10 @ kn.transpose(-1, -2) * 4.0).masked_fill(~mask[:, None, None, :], float("-inf"))
ref = torch.softmax(s, -1) @ v
print("   buckets 5/5: max |out - masked softmax attention| =", (o - ref).abs().max().item())

print("4. cosine-sim float64 precision:")
qd, kd, vd = (F.normalize(torch.randn(1, 2, 10, 8, generator=g, dtype=torch.float64), dim=-1) for _ in range(3))
o = CFA.apply(qd, kd, vd, None, 4.0, False, 4, 3)
ref = torch.softmax(qd @ kd.transpose(-1, -2) * 4.0, -1) @ vd
print("   float64 max |out - ref| =", (o - ref).abs().max().item(), "(float64 should be ~1e-16)")

print("5. backward runs under @torch.no_grad and is not @once_differentiable: double backward")
print("   through the Function is silently absent (no graph), not an error at the call:")
q2 = F.normalize(torch.randn(1, 1, 6, 4, dtype=torch.float64), dim=-1).requires_grad_()
k2 = F.normalize(torch.randn(1, 1, 6, 4, dtype=torch.float64), dim=-1)
v2 = torch.randn(1, 1, 6, 4, dtype=torch.float64)
o = CFA.apply(q2, k2, v2, None, 4.0, False, 4, 3)
(gq,) = torch.autograd.grad(o.sum(), q2, create_graph=True)
print("   grad q with create_graph=True has grad_fn:", gq.grad_fn, "(plain attention's has one)")

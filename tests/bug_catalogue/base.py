"""The catalogue's entry type and the helpers its Functions share.

Each entry reproduces one real, public bug report as a minimal broken Function beside its
correct twin, written from the report's description (never from its code). The inputs are
the ones the Function's author would plausibly have passed to a check: small float64
tensors, contiguous, every floating input requiring grad, index tensors of distinct values,
non-empty shapes. What triggers the bug (the report's condition) is recorded beside them, in
`trigger` and `smallest`, and is deliberately NOT built into the inputs: the catalogue
measures whether a tool finds the condition from an ordinary call, as a user meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

F64 = torch.float64


@dataclass(frozen=True)
class Entry:
    """One real bug: where it was reported, its mechanism, and its reproduction."""

    id: str
    project: str           # owner/name on GitHub
    ref: str               # "issue 1234" or "PR 1234"
    url: str
    mechanism: str         # a short class name; the catalogue counts by this
    trigger: str           # the input or call condition that makes it wrong
    smallest: str          # the smallest failing input the report implies
    buggy: Any             # a torch.autograd.Function subclass or a callable
    twin: Any              # the fix, same signature
    inputs: Callable[[], list[Any]]   # fresh example arguments, as the author would pass
    reference: Callable[..., Any] | None = None   # plain autograd, same signature
    check_kwargs: dict[str, Any] = field(default_factory=dict)  # only where a user must say it
    # How demo.demonstrate shows the bug without gradlab: the smallest failing input (the
    # one `smallest` describes), the grad_output's layout ("expanded" as .sum() gives,
    # "transposed", "narrow" as cat gives), the order of derivatives, and whether the
    # arguments are non-leaf copies ("mul") or outputs an upstream op saved ("exp"); or a
    # demo of its own (returns None when the Function behaves, else what went wrong).
    smallest_inputs: Callable[[], list[Any]] | None = None
    grad_kind: str | None = None
    order: int = 1
    nonleaf: str | None = None
    demo: Callable[[Any], str | None] | None = None
    note: str = ""   # where the reproduction models the report's mechanism loosely

    def fn(self, which: str) -> Callable[..., Any]:
        """The callable for `which` ("buggy" or "twin"): a Function's apply, or itself."""
        obj = self.buggy if which == "buggy" else self.twin
        return obj.apply if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) \
            else obj


def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0,
         grad: bool = True, dtype: torch.dtype = F64) -> Tensor:
    """Seeded uniform values in [low, high), requiring grad unless `grad` is False."""
    gen = torch.Generator().manual_seed(seed)
    v = (low + (high - low) * torch.rand(shape, generator=gen, dtype=F64)).to(dtype)
    return v.requires_grad_(grad)


def vals(*v: float, grad: bool = True, dtype: torch.dtype = F64) -> Tensor:
    """A 1-D tensor of exactly these values (a smallest failing input), requiring grad."""
    return torch.tensor(v, dtype=dtype).requires_grad_(grad)


def ids(*v: int) -> Tensor:
    """An int64 index tensor of exactly these positions."""
    return torch.tensor(v)


def raw_contiguous(t: Tensor) -> Tensor:
    """What a kernel that indexes `t.data_ptr()` as if `t` were contiguous reads.

    Element k of the result is element k of t's storage counted from its offset (zero past
    the storage's end, where a real kernel reads whatever lies there). For a contiguous
    tensor this is t itself; for a transposed, narrowed or expanded one it is not."""
    flat = t.detach().new_empty(0).set_(t.untyped_storage()).view(-1)
    if t.dtype != flat.dtype:  # set_ keeps t's dtype; this is only a guard
        flat = flat.to(t.dtype)
    start = t.storage_offset()
    seen = flat[start:start + t.numel()]
    if seen.numel() < t.numel():
        seen = torch.cat([seen, seen.new_zeros(t.numel() - seen.numel())])
    return seen.reshape(t.shape)


def launch(grid: int) -> None:
    """Stands in for a CUDA kernel launch: a grid of zero blocks is an invalid configuration."""
    if grid <= 0:
        raise RuntimeError("CUDA error: invalid configuration argument (grid of 0 blocks)")


def last_writer(idx: Tensor, n: int) -> Tensor:
    """[n, k] one-hot matrix W with W[idx[j], j] = 1 for the LAST j writing each row."""
    k = idx.numel()
    w = torch.zeros(n, k, dtype=F64)
    for j in range(k):
        w[idx[j]] = 0.0
        w[idx[j], j] = 1.0
    return w


def vjp(fn: Callable[..., Tensor], xs: Sequence[Tensor], g: Tensor) -> tuple[Tensor, ...]:
    """The gradients of fn(*xs) for grad_output g, by autograd, inside a backward: built
    into the graph when backward itself is being differentiated (create_graph), so that
    a twin written this way is right in double backward too."""
    create = torch.is_grad_enabled()
    ins = [x if create and x.requires_grad else x.detach().requires_grad_() for x in xs]
    with torch.enable_grad():
        return torch.autograd.grad(fn(*ins), ins, g, create_graph=create)


def needs(ctx: Any, i: int) -> bool:
    """ctx.needs_input_grad[i], spelt short."""
    return bool(ctx.needs_input_grad[i])


def store_like(values: Tensor, like: Tensor) -> Tensor:
    """`values` written element by element to the memory offsets of `like`'s strides, each
    write replacing the last (a kernel that stores a gradient in its input's layout), then
    read back with those strides. For a contiguous `like` this is `values`; for an expanded
    one every broadcast copy lands on one address and the last write wins."""
    offsets = torch.zeros((), dtype=torch.long)
    for d, (n, s) in enumerate(zip(like.shape, like.stride(), strict=True)):
        shape = [1] * like.dim()
        shape[d] = n
        offsets = offsets + (torch.arange(n) * s).view(shape)
    offsets = offsets.expand(like.shape).reshape(-1)
    flat = values.new_zeros(int(offsets.max()) + 1 if offsets.numel() else 0)
    flat[offsets] = values.reshape(-1)
    return flat.as_strided(like.shape, like.stride())


def shapes_of(args: Sequence[Any]) -> str:
    """The arguments' shapes (or values) in a short line, for the results table."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            kind = "" if a.is_floating_point() else f" {str(a.dtype).replace('torch.', '')}"
            out.append(f"[{','.join(map(str, a.shape))}]{kind}")
        else:
            out.append(repr(a))
    return " ".join(out)

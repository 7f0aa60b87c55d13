"""Concrete inputs for a case: tensors made from their specs for one dtype and device.

Also the one home of memory layouts: those a spec asks for (apply_layout) and those the
variants feed a Function (relayout), and of calling a Function on inputs (call, flat_outputs).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from gradlab.model import Case, FixedValues, TensorArg, is_integer_dtype, non_overlapping
from gradlab.torchstate import replay

_TORCH_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a canonical dtype name."""
    return _TORCH_DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    """The canonical name of a torch dtype ('float64'); other dtypes as torch prints them."""
    for name, value in _TORCH_DTYPES.items():
        if value == dtype:
            return name
    return str(dtype).removeprefix("torch.")


@dataclass
class Inputs:
    """A case's concrete positional args and kwargs, and which args are differentiable."""

    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def tensor_index(self) -> list[int]:
        """Positions of tensor args."""
        return [i for i, a in enumerate(self.args) if isinstance(a, Tensor)]

    @property
    def diff_index(self) -> list[int]:
        """Positions of tensor args that require grad."""
        return [i for i, a in enumerate(self.args) if isinstance(a, Tensor) and a.requires_grad]

    def clone(self, *, dtype: torch.dtype | None = None, device: str | None = None,
              requires_grad: set[int] | None = None, but: int | None = None) -> Inputs:
        """Fresh leaf copies of the tensor args (same strides), optionally cast or moved.

        requires_grad: the positions that should require grad (default: as now).  but: a
        position kept as it is, not copied (the caller puts another tensor there).
        """
        args: list[Any] = []
        for i, a in enumerate(self.args):
            if isinstance(a, Tensor) and i != but:
                want = a.requires_grad if requires_grad is None else i in requires_grad
                args.append(copy_like(a, dtype=dtype, device=device, requires_grad=want))
            else:
                args.append(a)
        return Inputs(args, self.kwargs_copy(dtype=dtype, device=device))

    def kwargs_copy(self, *, dtype: torch.dtype | None = None,
                    device: str | None = None) -> dict[str, Any]:
        """Copies (cast or moved as `clone`'s) of the keyword tensors, never differentiated
        (see diff_index); other keyword values as they are."""
        return {k: copy_like(v, dtype=dtype, device=device, requires_grad=False)
                if isinstance(v, Tensor) else v for k, v in self.kwargs.items()}


def copy_like(t: Tensor, *, dtype: torch.dtype | None = None, device: str | None = None,
              requires_grad: bool | None = None) -> Tensor:
    """A leaf copy of `t` with the same strides (so layouts survive a cast or a move)."""
    base = t.detach()
    target_dtype = dtype if (dtype is not None and base.is_floating_point()) else base.dtype
    if base.is_complex() and dtype is not None:
        target_dtype = complex_in(base.dtype, dtype)
    out = torch.empty_strided(base.shape, base.stride(), dtype=target_dtype,
                              device=device or base.device)
    if 0 in base.stride() and base.numel() > 0:
        # empty_strided with a zero stride would alias writes: rebuild the expansion instead.
        out = _expanded_copy(base.to(target_dtype).to(device or base.device))
    else:
        out.copy_(base)
    want = t.requires_grad if requires_grad is None else requires_grad
    return out.requires_grad_(want and (out.is_floating_point() or out.is_complex()))


def complex_in(own: torch.dtype, run: torch.dtype) -> torch.dtype:
    """A complex tensor's dtype in a run: its own, complex128 in a float64 run (the
    finite-difference checks run in float64)."""
    return torch.complex128 if run == torch.float64 else own


def _expanded_copy(t: Tensor) -> Tensor:
    """A copy of a stride-0 tensor that keeps its zero strides."""
    index = tuple(slice(0, 1) if s == 0 else slice(None) for s in t.stride())
    return t[index].clone().expand(t.shape)


#: The torch dtype each kind of fixed values is stored in (gradlab.model.FixedValues).
_VALUE_DTYPES = {"float64": torch.float64, "int64": torch.int64, "bool": torch.bool}


def fixed_tensor(values: FixedValues, shape: tuple[int, ...]) -> Tensor:
    """Fixed values as a CPU tensor of `shape`, in the dtype they are stored in."""
    # bytearray: frombuffer warns on read-only buffers (and the tensor must own its memory)
    flat = torch.frombuffer(bytearray(values.data), dtype=_VALUE_DTYPES[values.kind])
    return flat.reshape(shape)


def fixed_values(t: Tensor) -> FixedValues:
    """A tensor's values as FixedValues: floats in float64, integers in int64, bool as bool."""
    t = t.detach().cpu()
    kind = ("bool" if t.dtype == torch.bool else "float64" if t.is_floating_point()
            else "int64")
    flat = t.to(_VALUE_DTYPES[kind]).contiguous().reshape(-1)
    # clone: a storage of exactly these elements (a view's storage may hold more)
    return FixedValues(kind, bytes(flat.clone().untyped_storage()))


def standard_normal(shape: int | tuple[int, ...] | torch.Size, gen: torch.Generator) -> Tensor:
    """Gaussian float64 values (probes, random grad_outputs), drawn in float32: torch's CPU
    float64 normal sampler is 5x slower (36 ms against 7 ms for 1e6 values, one thread), and
    a probe needs no more than float32's resolution."""
    size = (shape,) if isinstance(shape, int) else tuple(shape)
    return torch.randn(size, generator=gen, dtype=torch.float32).double()


def drawn_values(spec: TensorArg, gen: torch.Generator) -> Tensor:
    """A spec's random values: floats in float64 (so every dtype sees the same numbers),
    integers in int64 in [low, high), bool as a mask of fair coin flips."""
    if spec.dtype == "bool":
        return torch.rand(spec.shape, generator=gen, dtype=torch.float64) < 0.5
    if is_integer_dtype(spec.dtype):
        return torch.randint(int(spec.low), int(spec.high), spec.shape, generator=gen,
                             dtype=torch.int64)
    if spec.dtype is not None and spec.dtype.startswith("complex"):
        # real and imaginary parts each drawn as a real tensor's values
        real = drawn_values(replace(spec, dtype=None), gen)
        return torch.complex(real, drawn_values(replace(spec, dtype=None), gen))
    values = torch.rand(spec.shape, generator=gen, dtype=torch.float64)
    values = spec.low + (spec.high - spec.low) * values
    if spec.min_abs > 0:
        # Push |v| up to min_abs keeping the sign, so no value sits on a kink at zero.
        sign = torch.where(values >= 0, 1.0, -1.0).to(torch.float64)
        values = sign * values.abs().clamp(min=spec.min_abs)
    return values


def make_tensor(spec: TensorArg, dtype: str, device: str, gen: torch.Generator) -> Tensor:
    """A tensor for `spec` in its own dtype, else `dtype`: its fixed values, or values drawn
    from `gen` (fixed values draw nothing, so they leave the other arguments' values alone)."""
    want = torch_dtype(spec.dtype or dtype)
    if want.is_complex:
        want = complex_in(want, torch_dtype(dtype))
    values = (fixed_tensor(spec.values, spec.shape) if spec.values is not None
              else drawn_values(spec, gen))
    values = values.to(want).to(device)
    out = apply_layout(values, spec.layout, transpose=spec.transpose, strides=spec.strides)
    return out.requires_grad_(spec.requires_grad
                              and (out.is_floating_point() or out.is_complex()))


def narrowed(spec: TensorArg, dim: int) -> TensorArg:
    """`spec` with dim `dim` shrunk to 1 (a size-1 variant); fixed values keep their first
    slice along it."""
    shape = list(spec.shape)
    shape[dim] = 1
    values = spec.values
    if values is not None:
        values = fixed_values(fixed_tensor(values, spec.shape).narrow(dim, 0, 1))
    return replace(spec, shape=tuple(shape), values=values)


def apply_layout(values: Tensor, layout: str, *, transpose: tuple[int, int] = (-2, -1),
                 strides: tuple[int, ...] | None = None) -> Tensor:
    """The same logical values laid out in memory as `layout` says."""
    if layout == "contiguous":
        return values.contiguous()
    if layout == "channels_last":
        if values.dim() != 4:
            raise ValueError(f"channels_last needs a 4-D tensor, got {values.dim()}-D")
        return values.contiguous(memory_format=torch.channels_last)
    if layout == "transposed":
        if values.dim() < 2:
            raise ValueError("transposed needs at least 2 dims")
        d0, d1 = transpose
        return values.transpose(d0, d1).contiguous().transpose(d0, d1)
    if layout == "strided":
        if strides is None:
            raise ValueError("strided layout needs strides")
        return strided_copy(values, strides)
    raise ValueError(f"unknown layout {layout!r}")


#: Layouts relayout() makes (same values, other strides).
RELAYOUTS = ("contiguous", "noncontiguous", "transposed", "channels_last", "expanded",
             "broadcast")


def relayout(t: Tensor, layout: str) -> Tensor | None:
    """A detached copy of `t` with the same values laid out as `layout`; None if it cannot be.

    noncontiguous: every other element of a buffer twice as wide in the last dim (an offset
    view); transposed: the last two dims swapped in memory; channels_last: NHWC memory of a 4-D
    tensor; expanded: stride 0 along the first dim of size > 1 (its values repeat); broadcast:
    one value with stride 0 everywhere, what `.sum()` hands backward as grad_output.
    """
    t = t.detach()
    if layout == "contiguous":
        # always a fresh copy: two callers must never share one tensor
        return t.clone(memory_format=torch.contiguous_format)
    if layout == "noncontiguous":
        if t.dim() == 0:
            return None
        buf = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype, device=t.device)
        out = buf[..., 1::2]
        out.copy_(t)
        return out
    if layout == "transposed":
        if t.dim() < 2:
            return None
        return t.transpose(-2, -1).contiguous().transpose(-2, -1)
    if layout == "channels_last":
        return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else None
    if layout == "expanded":
        dim = next((d for d, n in enumerate(t.shape) if n > 1), None)
        return None if dim is None else t.narrow(dim, 0, 1).clone().expand(t.shape)
    if layout == "broadcast":
        if not t.numel():  # an empty output (a split of size 0): no value to broadcast
            return t.clone()
        return t.reshape(-1)[:1].clone().reshape([1] * t.dim()).expand(t.shape)
    raise ValueError(f"unknown layout {layout!r}")


def strided_copy(values: Tensor, strides: tuple[int, ...]) -> Tensor:
    """`values` copied into a buffer viewed with `strides` (which must not overlap)."""
    if len(strides) != values.dim():
        raise ValueError(f"strides has {len(strides)} entries for a {values.dim()}-D tensor")
    if any(s < 0 for s in strides):
        raise ValueError("strides must be non-negative")
    if values.numel() and not non_overlapping(values.shape, strides):
        raise ValueError(f"strides {list(strides)} make elements of shape "
                         f"{list(values.shape)} overlap")
    size = 1 + sum((n - 1) * s for n, s in zip(values.shape, strides, strict=True))
    buf = torch.zeros(size if values.numel() else 0, dtype=values.dtype, device=values.device)
    out = buf.as_strided(values.shape, strides)
    out.copy_(values)
    return out


def plain_copy(inputs: Inputs, *, dtype: torch.dtype | None = None,
               keep_layout: bool = False) -> Inputs:
    """The same values in fresh contiguous memory (in the same layout when `keep_layout`),
    floating tensors cast to `dtype` when given (requires_grad as they are; keyword tensors
    never require it)."""
    def plain(a: Any, grad: bool | None) -> Any:
        return (copy_like(a if keep_layout else a.contiguous(), dtype=dtype, requires_grad=grad)
                if isinstance(a, Tensor) else a)

    return Inputs([plain(a, None) for a in inputs.args],
                  {k: plain(a, False) for k, a in inputs.kwargs.items()})


def flat_outputs(out: Any) -> list[Tensor]:
    """The floating-point and complex tensor outputs of a call, in order (non-tensors and
    integer tensors dropped)."""
    items = out if isinstance(out, (tuple, list)) else (out,)
    return [comparable(t) for t in items
            if isinstance(t, Tensor) and (t.is_floating_point() or t.is_complex())]


#: Layouts gradlab compares as their dense values (each converts with a differentiable
#: to_dense, so the Function's backward still gets its gradient through it).
SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr,
                  torch.sparse_bsc, torch._mkldnn)  # type: ignore[attr-defined]


def comparable(t: Tensor) -> Tensor:
    """An output as gradlab compares it: a sparse one as its dense values, a complex32 one
    in complex64 (exact: torch implements neither equality nor most reductions for them).
    Both conversions are differentiable, so backward is still checked through them."""
    if t.layout in SPARSE_LAYOUTS:
        t = t.to_dense()
    if t.dtype == torch.complex32:
        t = t.to(torch.complex64)
    return t


def call(fn: Callable[..., Any], inputs: Inputs) -> list[Tensor]:
    """Call `fn` on the inputs and return its floating-point tensor outputs (from the case's
    RNG state: each finite difference of a stochastic Function draws the same numbers)."""
    replay()
    outs = flat_outputs(fn(*inputs.args, **inputs.kwargs))
    not_freed(inputs)
    return outs


#: The words of InputFreed's message that gradlab.checks.run.runner looks for.
INPUT_FREED = "forward freed the storage of input"


class InputFreed(RuntimeError):
    """Forward left an input without the memory its elements need (memcnn's keep_input=False
    resizes the caller's storage to 0 bytes): reading that tensor again segfaults, so the
    check stops before any read, and the case runs again on copies (NonLeafInputs)."""


def not_freed(inputs: Inputs) -> None:
    """Raise InputFreed when forward freed a tensor input's storage (it reads no element)."""
    for i in inputs.tensor_index:
        t = inputs.args[i]
        if t.numel() and t.untyped_storage().nbytes() < (
                t.storage_offset() + 1) * t.element_size():
            raise InputFreed(f"{INPUT_FREED} {i} (resized to "
                             f"{t.untyped_storage().nbytes()} bytes)")


def materialize(case: Case, dtype: str, device: str, seed: int) -> Inputs:
    """The case's concrete inputs for one dtype and device (deterministic in `seed`)."""
    gen = torch.Generator().manual_seed(seed)
    args = [make_tensor(a, dtype, device, gen) if isinstance(a, TensorArg)
            else copy_like(a, dtype=torch_dtype(dtype), device=device) if isinstance(a, Tensor)
            else a for a in case.args]
    # keyword tensors are passed, never differentiated (Inputs.diff_index counts args only)
    kwargs = {k: make_tensor(v, dtype, device, gen).requires_grad_(False)
              if isinstance(v, TensorArg)
              else copy_like(v, dtype=torch_dtype(dtype), device=device, requires_grad=False)
              if isinstance(v, Tensor) else v for k, v in case.kwargs.items()}
    return Inputs(args, kwargs)


def case_seed(seed: int, op: str, case: str) -> int:
    """The inputs' seed of one case: stable under filtering (--case), so a repro sees the same
    values, and shared by `check` and `bench`."""
    return seed + zlib.crc32(f"{op}/{case}".encode()) % 100_003


@dataclass(frozen=True)
class NonLeafInputs:
    """`fn` called on non-leaf copies of the tensor args that require grad (a clone passes the
    gradient through): an in-place Function (ctx.mark_dirty) cannot take a leaf, and in a model
    it never gets one.  every: copies of every tensor arg (a Function freeing an input's memory,
    InputFreed, must not free gradlab's).  A class, not a closure, so that it travels to worker
    processes."""

    fn: Callable[..., Any]
    every: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*(a.clone() if isinstance(a, Tensor) and (a.requires_grad or self.every)
                         else a for a in args), **kwargs)

"""A fake CUDA for CPU machines: gradlab's CUDA-only branches run in the normal suite.

`FakeCuda.install(monkeypatch)` replaces the torch.cuda functions gradlab calls (availability,
synchronize, memory statistics, RNG state, device name, cuDNN version) with fakes that keep
the real function's signature: every call is bound to the real signature first and the device
argument must name a CUDA device, so a misspelt attribute (monkeypatch refuses to set an
attribute torch lacks, and an unpatched one raises on a CPU build), a wrong argument or a CPU
device passed to a CUDA call fails here as it would on a GPU.  Each call is logged.

`cuda_on_cpu()` is a TorchFunctionMode that maps every `cuda` device argument (factories,
`.to`, `.cuda()`) to the CPU, so the placement code of a `--device cuda` run executes end to
end.  What it cannot show (a tensor left on the CPU beside CUDA ones, asynchronous kernels,
real memory numbers) is listed in docs/gpu.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

#: The name the fake device reports (envinfo.environment's device_name).
FAKE_GPU_NAME = "Fake GPU (tests/cuda_fakes.py)"
FAKE_CUDA_VERSION = "12.4"
FAKE_CUDNN_VERSION = 90100


def _cuda_device(device: Any) -> None:
    """Refuse a device argument that does not name a CUDA device (None: the current one)."""
    if device is None or isinstance(device, int):
        return
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind != "cuda":
        raise ValueError(f"fake torch.cuda: expected a CUDA device, got {device!r}")


class FakeCuda:
    """One fake GPU: a log of calls, an allocator counter and a generator state."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.allocated = 0
        self.peak = 0
        self.rng = [torch.zeros(16, dtype=torch.uint8)]
        self.initialized = False

    # -- what the fakes do (signatures are checked against the real functions) ----------------

    def alloc(self, nbytes: int) -> None:
        """Pretend a kernel allocated (positive) or freed (negative) nbytes."""
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)

    def _memory_allocated(self, device: Any = None) -> int:
        _cuda_device(device)
        return self.allocated

    def _max_memory_allocated(self, device: Any = None) -> int:
        _cuda_device(device)
        return self.peak

    def _reset_peak(self, device: Any = None) -> None:
        _cuda_device(device)
        self.peak = self.allocated

    def _synchronize(self, device: Any = None) -> None:
        _cuda_device(device)

    def _device_name(self, device: Any = None) -> str:
        _cuda_device(device)
        return FAKE_GPU_NAME

    def _get_rng_all(self) -> list[torch.Tensor]:
        return [s.clone() for s in self.rng]

    def _set_rng_all(self, new_states: Any) -> None:
        states = list(new_states)
        if len(states) != len(self.rng) or not all(
                isinstance(s, torch.Tensor) and s.dtype == torch.uint8 for s in states):
            raise TypeError(f"fake torch.cuda.set_rng_state_all: expected {len(self.rng)} "
                            f"uint8 tensors, got {states!r}")
        self.rng = [s.clone() for s in states]

    def _manual_seed_all(self, seed: int) -> None:
        self.rng = [torch.full((16,), int(seed) % 256, dtype=torch.uint8)]

    def draw(self) -> None:
        """Pretend a CUDA kernel drew random numbers (the generator moves)."""
        self.rng = [(s + 1) for s in self.rng]

    # -- installing -------------------------------------------------------------------------

    def _faithful(self, name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
        real = getattr(torch.cuda, name)  # AttributeError: torch has no such function
        sig = inspect.signature(real)

        def fake(*args: Any, **kwargs: Any) -> Any:
            sig.bind(*args, **kwargs)  # TypeError for a call the real one would refuse
            self.calls.append(name)
            return impl(*args, **kwargs)

        fake.__name__ = name
        return fake

    def install(self, monkeypatch: pytest.MonkeyPatch, accelerator: bool = True) -> FakeCuda:
        """Patch torch.cuda (and torch.accelerator, torch.version.cuda, cuDNN's version)."""
        fakes: dict[str, Callable[..., Any]] = {
            "is_available": lambda: True,
            "is_initialized": lambda: self.initialized,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "synchronize": self._synchronize,
            "memory_allocated": self._memory_allocated,
            "max_memory_allocated": self._max_memory_allocated,
            "reset_peak_memory_stats": self._reset_peak,
            "empty_cache": lambda: None,
            "get_device_name": self._device_name,
            "get_rng_state_all": self._get_rng_all,
            "set_rng_state_all": self._set_rng_all,
            "manual_seed_all": self._manual_seed_all,
        }
        for name, impl in fakes.items():
            monkeypatch.setattr(torch.cuda, name, self._faithful(name, impl))
        if accelerator and hasattr(torch, "accelerator"):
            monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
        monkeypatch.setattr(torch.version, "cuda", FAKE_CUDA_VERSION)
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda: FAKE_CUDNN_VERSION)
        return self

    def count(self, name: str) -> int:
        return self.calls.count(name)


#: What _on_cpu may change: a device given as a string or a torch.device.
_DEVICE_LIKE = (str, torch.device)


def _names_a_device(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a call's arguments hold a device.  Plain loops: this runs for every torch call
    under CudaOnCpu, where a generator per call cost more than the call itself."""
    for a in args:
        if isinstance(a, _DEVICE_LIKE):
            return True
    for v in kwargs.values():
        if isinstance(v, _DEVICE_LIKE):
            return True
    return False


def _on_cpu(v: Any) -> Any:
    if isinstance(v, str) and v.split(":")[0] == "cuda":
        return "cpu"
    if isinstance(v, torch.device) and v.type == "cuda":
        return torch.device("cpu")
    return v


class CudaOnCpu(TorchFunctionMode):
    """Every `cuda` device argument of a torch call becomes `cpu`; `.cuda()` is the identity.
    `asked` counts the calls that asked for CUDA (proof that a placement path ran)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.device:  # a cuda device object is fine on a CPU build; using it is not
            return func(*args, **kwargs)
        if func is torch.Tensor.cuda:
            self.asked += 1
            return args[0]
        if not _names_a_device(args, kwargs):
            return func(*args, **kwargs)  # most calls: nothing to move
        new_args = tuple(_on_cpu(a) for a in args)
        new_kwargs = {k: _on_cpu(v) for k, v in kwargs.items()}
        if any(a is not b for a, b in zip(new_args, args, strict=True)) or any(
                new_kwargs[k] is not v for k, v in kwargs.items()):
            self.asked += 1
        return func(*new_args, **new_kwargs)


@contextmanager
def cuda_on_cpu() -> Iterator[CudaOnCpu]:
    """The CudaOnCpu mode for the block."""
    with CudaOnCpu() as mode:
        yield mode


# -- a fake TF32 ----------------------------------------------------------------------------------

#: The aten ops cuDNN runs (TF32 by torch.backends.cudnn.allow_tf32) and those cuBLAS runs
#: (torch.backends.cuda.matmul.allow_tf32 / float32_matmul_precision), forward and backward.
TF32_CONV_OPS = ("convolution", "convolution_backward", "_convolution")
TF32_MATMUL_OPS = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot")
TF32_OPS = frozenset(TF32_CONV_OPS + TF32_MATMUL_OPS)


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """t (float32) with each value rounded to TF32's 10-bit mantissa (round half away from
    zero on the magnitude bits), strides kept where an elementwise op keeps them."""
    bits = t.view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _tf32_on(op: str) -> bool:
    import gradlab.tf32 as tf32

    s = tf32.settings()
    if op in TF32_CONV_OPS:
        return s["tf32_cudnn"] is True or s.get("fp32_precision_cudnn_conv") == "tf32"
    return s["tf32_matmul"] is True or s["float32_matmul_precision"] != "highest"


class FakeTf32(TorchDispatchMode):
    """Convolutions and matmuls (forward and backward) on float32 tensors round their tensor
    inputs to TF32 first when torch's TF32 setting for them is on, as cuDNN and cuBLAS do on an
    Ampere or later GPU: a float32 result's error becomes ~1e-3 instead of ~1e-6.  `rounded`
    counts the calls that were (proof that the TF32 path ran)."""

    def __init__(self) -> None:
        super().__init__()
        self.rounded = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a dynamo-disabling frame by default: a
        # third of this mode's cost per op.  Nothing compiles under this mode (the bundled
        # checks measure compile only on request).
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in TF32_OPS and _tf32_on(name) and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in args):
            self.rounded += 1
            args = tuple(round_to_tf32(a) if isinstance(a, torch.Tensor)
                         and a.dtype == torch.float32 else a for a in args)
        return func(*args, **kwargs)


@contextmanager
def fake_tf32(on: bool = True) -> Iterator[FakeTf32]:
    """The FakeTf32 mode for the block, with TF32 on for convolutions and matmuls (on=True)
    or off; torch's settings given back after it."""
    import gradlab.tf32 as tf32

    saved = tf32.settings()
    try:
        torch.backends.cudnn.allow_tf32 = on
        torch.backends.cuda.matmul.allow_tf32 = on
        with FakeTf32() as mode:
            yield mode
    finally:
        tf32.restore(saved)

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

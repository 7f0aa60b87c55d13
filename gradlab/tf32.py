"""TF32: the setting that makes float32 convolutions and matmuls on a GPU round their inputs to
TensorFloat-32 (10 mantissa bits, float16's; float32 has 23): errors near 1e-3 instead of 1e-6.

torch's defaults on an Ampere or later GPU: cuDNN convolutions use it
(torch.backends.cudnn.allow_tf32 True), cuBLAS matmuls do not
(torch.backends.cuda.matmul.allow_tf32 False, torch.get_float32_matmul_precision() 'highest').
torch 2.9 added the fp32_precision settings ('tf32' or 'ieee' per backend and operator, 'none':
inherit); mixing them with the legacy flags makes the legacy getters raise, so every read here
is guarded.  `settings` is what the environment record (gradlab.envinfo) and every CUDA report
state; `disabled` turns every one off for a block (the tf32 hint's rerun,
gradlab.checks.run.runner).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

#: The legacy flags: (environment key, object, attribute).  The keys are the environment
#: record's since before the fp32_precision API (bench compare reads them).
LEGACY = (("tf32_cudnn", "cudnn", "allow_tf32"), ("tf32_matmul", "cuda.matmul", "allow_tf32"))
#: The fp32_precision settings (torch 2.9+): environment key -> object path under
#: torch.backends.
PRECISION = {"fp32_precision": "", "fp32_precision_matmul": "cuda.matmul",
             "fp32_precision_cudnn": "cudnn", "fp32_precision_cudnn_conv": "cudnn.conv",
             "fp32_precision_cudnn_rnn": "cudnn.rnn"}
#: What a value reads as when its getter raises (mixed legacy and new settings).
UNREADABLE = "unreadable"


def _backend(path: str) -> Any:
    obj: Any = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


def _read(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except (AttributeError, RuntimeError):  # RuntimeError: legacy and new API mixed
        return UNREADABLE


def _attr(path: str, attr: str) -> Any:
    """torch.backends.<path>.<attr>, or UNREADABLE."""
    return _read(lambda: getattr(_backend(path), attr))


def settings() -> dict[str, Any]:
    """Every TF32 setting this torch has: the legacy flags, float32_matmul_precision, and the
    fp32_precision settings where torch has them (unreadable ones say so)."""
    out: dict[str, Any] = {key: _attr(path, attr) for key, path, attr in LEGACY}
    out["float32_matmul_precision"] = _read(torch.get_float32_matmul_precision)
    for key, path in PRECISION.items():
        value = _attr(path, "fp32_precision")
        if value != UNREADABLE:
            out[key] = value
    return out


def enabled(s: dict[str, Any] | None = None) -> bool:
    """True when a float32 convolution or matmul on a GPU may run in TF32 under settings `s`
    (now when None); an unreadable setting counts as on."""
    s = settings() if s is None else s
    return (any(s.get(key) in (True, UNREADABLE) for key, _, _ in LEGACY)
            or s.get("float32_matmul_precision") in ("high", "medium", UNREADABLE)
            or any(s.get(key) in ("tf32", UNREADABLE) for key in PRECISION))


@contextmanager
def disabled() -> Iterator[None]:
    """Every TF32 setting off inside the block (IEEE float32), each given back after it.

    Off through the legacy setters, which torch maps onto every fp32_precision setting
    whatever state they were in; given back through the legacy setters, then the
    fp32_precision settings that still differ (the legacy ones cannot say a mixed state)."""
    saved = settings()
    try:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        yield
    finally:
        restore(saved)


def restore(saved: dict[str, Any]) -> None:
    """Set every TF32 setting back to `saved` (a `settings()`)."""
    for key, path, attr in LEGACY:
        if isinstance(saved[key], bool):
            setattr(_backend(path), attr, saved[key])
    if saved["float32_matmul_precision"] != UNREADABLE:
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    now = settings()
    for key, path in PRECISION.items():
        if key in saved and now.get(key) != saved[key]:
            _backend(path).fp32_precision = saved[key]

"""The environment record (gradlab.envinfo) in words: what a report says of the settings its
numbers depend on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gradlab.results import CheckRow

#: The TF32 settings a CUDA report names, in order: (environment key, words); gradlab.tf32
#: reads them (the fp32_precision ones only where torch has them).
TF32_WORDS = (("tf32_cudnn", "torch.backends.cudnn.allow_tf32"),
              ("tf32_matmul", "torch.backends.cuda.matmul.allow_tf32"),
              ("float32_matmul_precision", "float32_matmul_precision"),
              ("fp32_precision_cudnn_conv", "cudnn.conv.fp32_precision"),
              ("fp32_precision_matmul", "cuda.matmul.fp32_precision"))


def tf32_line(rows: Sequence[CheckRow], env: Mapping[str, Any]) -> str:
    """'TF32: torch.backends.cudnn.allow_tf32=True, ...' when a row ran on CUDA (the settings
    that decide float32 convolutions' and matmuls' precision there), else ''."""
    if not any(r.device.startswith("cuda") for r in rows):
        return ""
    said = [f"{words}={env[key]}" for key, words in TF32_WORDS if key in env]
    return "TF32: " + (", ".join(said) if said else "not recorded")

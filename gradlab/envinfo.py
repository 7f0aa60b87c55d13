"""The environment a run happened in: goes into every report."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from gradlab.version import __version__


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The gradlab checkout's commit, or '' when not in a git checkout (asked once per process:
    a git subprocess costs more than a small check)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


@lru_cache(maxsize=1)
def cpu_name() -> str:
    """The CPU model ('AMD EPYC 7B13'); platform.processor() is often empty or just the arch."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(seed: int | None = None, device: str = "cpu") -> dict[str, Any]:
    """torch/CUDA/cuDNN versions, device name, threads, math flags (TF32's among them),
    gradlab version, commit."""
    import os
    import platform

    import torch

    from gradlab import tf32

    cuda = torch.cuda.is_available()
    on_cuda = cuda and device.startswith("cuda")
    env: dict[str, Any] = {
        "gradlab_version": __version__,
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "cudnn_version": torch.backends.cudnn.version() if cuda else "",
        "device_name": torch.cuda.get_device_name(device) if on_cuda else cpu_name(),
        "cpu_count": os.cpu_count() or 0,
        "num_threads": torch.get_num_threads(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        # TF32 (gradlab.tf32): tf32_cudnn, tf32_matmul, float32_matmul_precision and the
        # fp32_precision settings where torch has them
        **tf32.settings(),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
    }
    if seed is not None:
        env["seed"] = seed
    return env

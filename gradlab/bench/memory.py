"""Memory of a call: bytes autograd saves for backward, CUDA peak, bytes of the inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from gradlab.bench.timing import Sync, Task
from gradlab.cases import Inputs


def saved_bytes(call: Callable[[], Any]) -> int:
    """Bytes autograd saves for backward while `call()` runs, each storage counted once.

    Counted through saved_tensors_hooks, so it sees ctx.save_for_backward and the tensors
    built-in ops save; tensors stashed as plain ctx attributes are invisible to it.  A saved view
    counts its whole storage; two saved views of one storage count it once.
    """
    storages: dict[tuple[str, int], int] = {}

    def pack(t: Tensor) -> Tensor:
        try:
            st = t.untyped_storage()
            # Keyed by address: every saved tensor stays alive until the count is done, so an
            # address cannot be reused by another storage meanwhile.
            storages[(str(t.device), st.data_ptr())] = st.nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse)
            pass
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.enable_grad():
        out = call()
    del out
    return sum(storages.values())


def cuda_peak(task: Task, device: str, sync: Sync) -> int:
    """Peak CUDA memory allocated by one call beyond what was allocated before it (setup done)."""
    state = task.setup(1)
    sync()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    task.run(state)
    sync()
    peak = torch.cuda.max_memory_allocated(device) - base
    del state
    return int(peak)


def input_bytes(inputs: Inputs) -> int:
    """Bytes of the tensors among the inputs (each storage once)."""
    tensors = [t for t in (*inputs.args, *inputs.kwargs.values()) if isinstance(t, Tensor)]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in tensors}.values())

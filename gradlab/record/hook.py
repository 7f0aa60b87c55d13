"""The recorder inside a recorded process: Function.apply and custom ops wrapped, calls kept.

Standalone on purpose (the standard library and torch only, no other gradlab module): a
recorded command may run another interpreter than gradlab's, so `boot/sitecustomize.py` loads
this file by its path.  What it writes, per process, under the folder it is given:

- `raw/<pid>-<n>.pt`: one stored call (the first of each signature of an op, up to the limit):
  the op, the signature, and every argument (`entry`), loaded back with weights_only=True;
- `raw/<pid>-counts.pt`: at exit, per op the calls seen and the calls left out, and why.

A stored call is written at once, so a process killed by a signal loses only its counts.
gradlab.record.merge turns the folder into specs.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

#: Module prefixes whose calls are gradlab's own (its checks replaying a Function), never
#: recorded: a recorded program may run gradlab itself (its pytest plugin, gradlab.check).
OWN_MODULES = ("gradlab.checks.", "gradlab.cases", "gradlab.apiguard", "gradlab.bench.")
#: How far up the stack a new signature looks for gradlab's own frames (a check calls a
#: Function within a dozen frames of its runner; deeper user code is not gradlab's).
OWN_DEPTH = 40
#: Longest repr of a non-tensor argument kept in a signature or a reason.
REPR_CHARS = 120


class Stats:
    """One op's counts in this process."""

    __slots__ = ("calls", "info", "left_out", "signatures")

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.calls = 0
        self.signatures: set[Any] = set()
        #: reason -> calls left out for it
        self.left_out: dict[str, int] = {}

    def leave_out(self, reason: str) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + 1


class Recorder:
    """The calls of one process, stored under `folder/raw`."""

    def __init__(self, folder: str | Path, max_signatures: int, max_bytes: int) -> None:
        self.raw = Path(folder) / "raw"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.max_signatures = max_signatures
        self.max_bytes = max_bytes
        self.ops: dict[Any, Stats] = {}
        self.local = threading.local()
        self.lock = threading.Lock()
        self.seq = 0
        self.pid = os.getpid()
        #: set once the folder is finished (the pytest plugin's record): nothing more is kept
        self.stopped = False

    def busy(self) -> bool:
        return self.stopped or bool(getattr(self.local, "busy", False))

    def call(self, key: Any, describe: Callable[[], dict[str, Any]], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> None:
        """Count one call of op `key` (`describe` says what the op is, asked once) and store it
        when its signature is new and within the limits.  Never raises."""
        self.local.busy = True
        try:
            self._call(key, describe, args, kwargs)
        except Exception as exc:  # the recorded program must run on whatever happens here
            stats = self.ops.get(key)
            if stats is not None:
                stats.leave_out(f"the recorder failed: {type(exc).__name__}: {exc}"[:200])
        finally:
            self.local.busy = False

    def _call(self, key: Any, describe: Callable[[], dict[str, Any]], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> None:
        if os.getpid() != self.pid:  # a forked child: its own counts and files
            self.reset()
        stats = self.ops.get(key)
        if stats is None:
            stats = self.ops[key] = Stats(describe())
        if "ignored" in stats.info:
            return
        sig = signature(args, kwargs)
        if sig in stats.signatures:
            stats.calls += 1
            return
        if gradlabs_own():
            return  # gradlab's checks replaying a Function: not the program's call
        stats.calls += 1
        if len(stats.signatures) >= self.max_signatures:
            stats.leave_out(f"over the limit of {self.max_signatures} signatures per op")
            return
        stats.signatures.add(sig)
        if "unreplayable" in stats.info:  # listed with its reason, no values kept
            self.write({"op": stats.info, "signature": repr(sig), "nbytes": 0, "args": [],
                        "kwargs": {}})
            return
        nbytes = sum(tensor_bytes(a) for a in (*args, *kwargs.values()))
        if nbytes > self.max_bytes:
            stats.leave_out(f"its tensors hold {nbytes} bytes, over the limit of "
                            f"{self.max_bytes} bytes per call")
            return
        record = {"op": stats.info, "signature": repr(sig), "nbytes": nbytes,
                  "args": [entry(a) for a in args],
                  "kwargs": {k: entry(v) for k, v in kwargs.items()}}
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.seq += 1
            name = self.raw / f"{self.pid}-{self.seq}.pt"
        tmp = name.with_suffix(".tmp")
        torch.save(record, tmp)
        tmp.replace(name)  # whole or absent, even if the process dies now

    def reset(self) -> None:
        """A forked child starts with no counts of its own (its parent writes those)."""
        self.pid = os.getpid()
        self.seq = 0
        for stats in self.ops.values():
            stats.calls, stats.left_out = 0, {}

    def flush(self) -> None:
        """Write this process's counts (at exit)."""
        if self.stopped:
            return
        if os.getpid() != self.pid:
            self.reset()
        counts = [{"op": s.info, "calls": s.calls, "left_out": dict(s.left_out)}
                  for s in self.ops.values() if s.calls]
        if counts:
            try:
                tmp = self.raw / f"{self.pid}-counts.tmp"
                torch.save(counts, tmp)
                tmp.replace(self.raw / f"{self.pid}-counts.pt")
            except Exception:  # the folder may be gone at exit: nothing to tell
                pass


def gradlabs_own() -> bool:
    """Whether a gradlab check (its runner, a variant, the API) made this call."""
    frame = sys._getframe(3)
    for _ in range(OWN_DEPTH):
        if frame is None:
            return False
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.startswith(OWN_MODULES):
            return True
        frame = frame.f_back
    return False


def plain(v: Any, depth: int = 0) -> bool:
    """Whether `v` is a value YAML holds as it is (tuples become lists)."""
    if v is None or isinstance(v, (bool, int, str)):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if depth < 8 and isinstance(v, (list, tuple)):
        return all(plain(x, depth + 1) for x in v)
    if depth < 8 and isinstance(v, dict):
        return all(isinstance(k, str) and plain(x, depth + 1) for k, x in v.items())
    return False


def signature_of(a: Any) -> Any:
    """One argument's part of a signature: a tensor's metadata, a plain value, or a type."""
    if isinstance(a, torch.Tensor):
        return ("T", tuple(a.shape), str(a.dtype), tuple(a.stride()) if a.layout == torch.strided
                else str(a.layout), bool(a.requires_grad), a.device.type)
    if plain(a):
        r = repr(a)
        return r if len(r) <= REPR_CHARS else ("long", type(a).__name__, hash(r))
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(signature_of(x) for x in a[:64]))
    return ("other", type(a).__module__, type(a).__qualname__)


def signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return (tuple(signature_of(a) for a in args),
            tuple((k, signature_of(v)) for k, v in sorted(kwargs.items())))


def tensor_bytes(a: Any) -> int:
    if isinstance(a, torch.Tensor):
        return int(a.numel()) * a.element_size()
    if isinstance(a, (list, tuple)):
        return sum(tensor_bytes(x) for x in a[:1024])
    return 0


def entry(a: Any) -> dict[str, Any]:
    """One argument as stored: a tensor (its values on the CPU and its metadata), a plain value,
    or why neither."""
    if isinstance(a, torch.Tensor):
        return tensor_entry(a)
    if plain(a):
        return {"value": a}
    r = repr(a)
    shown = r if len(r) <= REPR_CHARS else r[:REPR_CHARS] + "..."
    if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
        why = f"a {type(a).__name__} holding tensors (a spec takes tensors as arguments only)"
    elif isinstance(a, float):
        why = f"the float {r} (a spec holds finite numbers only)"
    else:
        why = f"a {type(a).__module__}.{type(a).__qualname__} ({shown}): not a YAML value"
    return {"unreplayable": why}


def tensor_entry(t: torch.Tensor) -> dict[str, Any]:
    meta: dict[str, Any] = {"dtype": str(t.dtype).removeprefix("torch."),
                            "shape": list(t.shape), "device": str(t.device),
                            "requires_grad": bool(t.requires_grad)}
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        return {**meta, "unreplayable": f"a tensor subclass {type(t).__qualname__}"}
    if t.layout != torch.strided:
        return {**meta, "unreplayable": f"a {t.layout} tensor (a spec holds dense ones)"}
    meta["strides"] = list(t.stride())
    if t.device.type not in ("cpu", "cuda"):
        return {**meta, "unreplayable": f"a tensor on {t.device} (a spec runs on cpu or cuda)"}
    if t.is_complex():
        return {**meta, "unreplayable": "a complex tensor (a spec file holds real ones)"}
    if t.numel() == 0:
        return {**meta, "unreplayable": "an empty tensor (a spec file holds non-empty ones)"}
    values = t.detach().to("cpu", copy=True).contiguous()
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        return {**meta, "unreplayable": "a tensor holding NaN or infinite values (a spec file "
                                        "holds finite ones)"}
    return {**meta, "tensor": values}

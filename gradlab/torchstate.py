"""Process-wide torch settings that a run changes, or that a checked Function might change.

A run gives every setting back as it found it, and so does each case: a Function that flips the
default dtype or grad mode must not make the next, correct op fail (or the caller's program
after `gradlab.check` returns).

Also the one RNG state of a case (`case_rng`, `replay`): a Function may draw random numbers
(dropout), so every evaluation that must agree with another (the Function, its reference, each
finite difference) starts from the same state of torch's global generators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """torch.set_num_threads(n) inside the block, the caller's count restored after (None: as is).

    Check cases are tiny, so threads buy nothing there, while OpenMP's spinning threads on a busy
    2-core machine made a small float64 conv 700x slower (15 ms instead of 0.02 ms, measured).
    """
    saved = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@dataclass(frozen=True)
class TorchState:
    """The global settings a Function can change behind its caller's back."""

    default_dtype: torch.dtype
    grad_enabled: bool
    anomaly_mode: bool
    deterministic_algorithms: bool
    num_threads: int

    @classmethod
    def now(cls) -> TorchState:
        return cls(torch.get_default_dtype(), torch.is_grad_enabled(),
                   torch.is_anomaly_enabled(), torch.are_deterministic_algorithms_enabled(),
                   torch.get_num_threads())

    def changed(self, other: TorchState) -> list[tuple[str, Any, Any]]:
        """(setting, value here, value in other) for each setting that differs."""
        return [(f.name, getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(other, f.name)]

    def restore(self) -> None:
        """Set back what differs from now (only that: the first call of
        torch.use_deterministic_algorithms imports torch._dynamo, over a second)."""
        setters: dict[str, Callable[[Any], Any]] = {
            "default_dtype": torch.set_default_dtype,
            "grad_enabled": torch.set_grad_enabled,
            "anomaly_mode": torch.autograd.set_detect_anomaly,
            "deterministic_algorithms": torch.use_deterministic_algorithms,
            "num_threads": torch.set_num_threads}
        for name, old, _ in self.changed(TorchState.now()):
            setters[name](old)


@contextmanager
def preserved_rng() -> Iterator[None]:
    """The global RNG states (CPU and CUDA) restored after the block.

    Drawing random numbers is a Function's right (dropout does), so this is restored, never
    reported: it keeps every later case seeing the same random stream whatever ran before.
    """
    state = RngState.now("cuda" if torch.cuda.is_available() else "cpu")
    try:
        yield
    finally:
        state.restore()


@dataclass(frozen=True)
class RngState:
    """torch's global generators' state (CPU, and CUDA's on a CUDA run)."""

    cpu: Tensor
    cuda: list[Tensor] | None = None

    @classmethod
    def now(cls, device: str) -> RngState:
        return cls(torch.get_rng_state(),
                   torch.cuda.get_rng_state_all() if device == "cuda" else None)

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)

    def same(self, other: RngState) -> bool:
        """True when both hold the same states (no generator moved between them)."""
        if not torch.equal(self.cpu, other.cpu):
            return False
        if self.cuda is None or other.cuda is None:
            return True
        return all(torch.equal(a, b) for a, b in zip(self.cuda, other.cuda, strict=True))


#: The RNG states of the cases entered (the innermost last); empty outside a case.
_CASES: list[RngState] = []


def seed_generators(seed: int) -> None:
    """torch.manual_seed: the CPU generator and every accelerator's (lazily where one is not
    started).  On a machine with no accelerator only the CPU's exists to draw from, and
    torch.manual_seed's lazy seeding of the absent ones records a stack trace each (0.12 ms
    per case, a tenth of a 1e4-element check's own overhead): the CPU's alone there."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or accelerator.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


@contextmanager
def case_rng(seed: int, device: str) -> Iterator[RngState]:
    """One RNG state for the block: torch's generators seeded with `seed` (a case's seed, so a
    repro draws the same numbers), CUDA's too on a CUDA run; `replay()` sets them back to it.

    The caller's state is not given back here: `preserved_rng` around this does that."""
    seed_generators(seed)
    state = RngState.now(device)
    _CASES.append(state)
    try:
        yield state
    finally:
        _CASES.pop()


def replay() -> None:
    """Set torch's generators back to the current case's state (nothing outside a case).

    Called before every forward that must agree with another, so a stochastic Function draws
    the same numbers in each; setting the CPU state costs about a microsecond."""
    if _CASES:
        _CASES[-1].restore()


def rng_device() -> str:
    """The device whose generators the current case replays besides the CPU's ('cpu': none)."""
    return "cuda" if _CASES and _CASES[-1].cuda is not None else "cpu"


def rng_now() -> RngState:
    """The generators' state now (CUDA's too inside a CUDA case, or once CUDA is started):
    compared before and after a call, it says whether the call drew random numbers."""
    cuda = (bool(_CASES) and _CASES[-1].cuda is not None) or torch.cuda.is_initialized()
    return RngState.now("cuda" if cuda else "cpu")

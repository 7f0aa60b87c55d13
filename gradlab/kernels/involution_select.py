"""Which involution kernel variant runs a launch: a choice per kernel and shape, in plain Python.

Each kernel has variants (VARIANTS): "nchw", the kernels of gradlab/kernels/involution_triton.py
(a [channels, pixels] tile over NCHW memory), "cl", those of involution_triton_cl.py (channels-last
memory: a group's channels contiguous, loaded as 16-byte vectors), and for grad_weight "cl_vec"
(channels last, the channel reduction inside one thread).  On a GPU, the first launch of a shape
times every variant once (each at its own autotuned block size, the layout conversion it needs
included) and keeps the fastest for that shape; without timing (the interpreter, small launches,
GRADLAB_INVOLUTION_AUTOTUNE=0) the input's memory format decides: channels-last input runs "cl"
(no conversion), anything else "nchw".  GRADLAB_INVOLUTION_VARIANT forces one.

The clock is a parameter (`timer`), so the choice is tested on the CPU with a fake one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gradlab.kernels.involution_launch import SHAPE_KEYS, VARIANT_ENV

__all__ = ["VARIANTS", "VARIANT_ENV", "Choice", "choices", "choose", "chosen_variants", "clear",
           "forced_variant", "layout_default", "run"]

#: Each kernel's variants; on a tie in timing, the first listed wins.
VARIANTS: dict[str, tuple[str, ...]] = {
    "forward": ("nchw", "cl"),
    "grad_input": ("nchw", "cl"),
    "grad_weight": ("nchw", "cl", "cl_vec"),
}
# VARIANT_ENV (defined with the other switches in involution_launch): a variant name ("nchw",
# "cl", "cl_vec") runs it for every launch (a kernel without that variant runs "cl" for
# "cl_vec"); unset or "auto": the choice above.

Timer = Callable[[Callable[[], object]], float]
R = TypeVar("R")


@dataclass(frozen=True)
class Choice:
    """The variant one (kernel, shape) runs, how it was chosen, and the times that chose it."""

    variant: str
    #: "timed" (the fastest of `ms`), "layout" (the input's memory format), "env" or "given"
    chosen_by: str
    #: variant -> milliseconds, for a timed choice
    ms: dict[str, float] = field(default_factory=dict)


#: The untimed choices, made once each (Choice is frozen): every launch records one anew.
_UNTIMED = {(v, how): Choice(v, how) for v in {v for vs in VARIANTS.values() for v in vs}
            for how in ("layout", "env", "given")}
#: (kernel, shape key) -> the choice, filled by every launch through `choose`.
_CHOICES: dict[tuple[str, tuple[Any, ...]], Choice] = {}


def forced_variant(kernel: str, value: str | None = None) -> str | None:
    """The variant GRADLAB_INVOLUTION_VARIANT (or `value`, its value as read already) forces for
    `kernel`, None when it forces none."""
    if value is None:
        value = os.environ.get(VARIANT_ENV, "auto").strip() or "auto"
    if value == "auto":
        return None
    known = sorted({v for vs in VARIANTS.values() for v in vs})
    if value not in known:
        raise ValueError(f"{VARIANT_ENV}={value!r}: expected auto or one of {', '.join(known)}")
    return value if value in VARIANTS[kernel] else "cl"


def layout_default(channels_last: bool) -> str:
    """The untimed choice: channels-last input runs the channels-last kernels (no copy)."""
    return "cl" if channels_last else "nchw"


def choose(kernel: str, key: tuple[Any, ...], runs: Mapping[str, Callable[[], object]], *,
           channels_last: bool, timer: Timer | None, env: str | None = None) -> str:
    """The variant of `kernel` for the shape `key`, among `runs` (variant -> one launch).

    With a `timer`, the first call for a key times every run once and keeps the fastest; later
    calls reuse it.  Without one (no timing wanted), the layout default.  `env`: the variant
    switch as read already (forced_variant)."""
    forced = None if env == "auto" else forced_variant(kernel, env)
    if forced is not None:
        _CHOICES[(kernel, key)] = _UNTIMED[(forced, "env")]
        return forced
    done = _CHOICES.get((kernel, key))
    if done is not None and done.chosen_by == "timed":
        return done.variant
    if timer is None:
        choice = _UNTIMED[(layout_default(channels_last), "layout")]
    else:
        ms = {name: float(timer(run)) for name, run in runs.items()}
        choice = Choice(min(ms, key=ms.__getitem__), "timed", ms)
    _CHOICES[(kernel, key)] = choice
    return choice.variant


def run(kernel: str, key: tuple[Any, ...], runs: Mapping[str, Callable[[], R]], *,
        variant: str | None, channels_last: bool, timer: Timer | None,
        env: str | None = None) -> R:
    """Run `variant` of `kernel` (recorded as given), or the one `choose` picks."""
    if variant is None:
        variant = choose(kernel, key, runs, channels_last=channels_last, timer=timer, env=env)
    elif variant in VARIANTS[kernel]:
        _CHOICES[(kernel, key)] = _UNTIMED[(variant, "given")]
    else:
        raise ValueError(f"involution {kernel}: unknown variant {variant!r} (expected one of "
                         f"{', '.join(VARIANTS[kernel])})")
    return runs[variant]()


def choices() -> dict[tuple[str, tuple[Any, ...]], Choice]:
    """Every (kernel, shape key) launched so far and the variant it ran."""
    return dict(_CHOICES)


def chosen_variants() -> list[dict[str, Any]]:
    """Every (kernel, shape, input layout) launched so far, the variant it ran, how that was
    chosen, and each variant's milliseconds when they were timed (the benchmark's table)."""
    fields = (*SHAPE_KEYS, "layout")
    return [{"kernel": kernel, **dict(zip(fields, key, strict=True)), "variant": c.variant,
             "chosen_by": c.chosen_by, "variant_ms": dict(c.ms)}
            for (kernel, key), c in _CHOICES.items()]


def clear() -> None:
    """Forget every choice (a test's fresh start; the next launches choose again)."""
    _CHOICES.clear()

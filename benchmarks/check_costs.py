"""Where one check's time goes (bench_check.py --targets, issue 40): the custom Function's
forward and backward calls and the seconds inside them, per mode; gradlab's seconds per check
(from its rows); and cProfile's top functions by cumulative time for one gradlab.check."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: cProfile's lines shown (functions by cumulative time).
PROFILE_LINES = 25


@contextmanager
def counted_timed(cls: type) -> Iterator[dict[str, float]]:
    """Count `cls`'s forward and backward calls (however they are reached) and the seconds
    spent inside them: {"forward": n, "backward": n, "forward s": s, "backward s": s}."""
    calls: dict[str, float] = {"forward": 0, "backward": 0, "forward s": 0.0, "backward s": 0.0}
    saved = {k: cls.__dict__[k] for k in ("forward", "backward")}

    def counting(kind: str) -> Any:
        inner = saved[kind].__func__

        def call(*a: Any, **kw: Any) -> Any:
            calls[kind] += 1
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                calls[f"{kind} s"] += time.perf_counter() - t0
        return staticmethod(call)

    for kind in saved:
        setattr(cls, kind, counting(kind))
    try:
        yield calls
    finally:
        for kind, method in saved.items():
            setattr(cls, kind, method)


def per_check_seconds(report: Any) -> dict[str, float]:
    """{check or variant family: seconds} of one gradlab report: a variant's forward, gradient
    and contract rows share their seconds (counted once), every other check's row has its own."""
    out: dict[str, float] = defaultdict(float)
    seen: set[tuple[str, str, str]] = set()
    for r in report.rows:
        shared = r.check in ("forward", "gradient", "contract")
        key = (r.dtype, r.variant, "" if shared else r.check)
        if key in seen:
            continue
        seen.add(key)
        family = r.variant.split("[")[0].split(":")[0].split("=")[0]
        out[f"base ({'forward+gradient+contract' if shared else r.check})"
            if r.variant == "base" else f"variant {family}"] += r.seconds
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def profile_top(run: Callable[[], Any], lines: int = PROFILE_LINES) -> str:
    """cProfile's table of `run`'s top functions by cumulative time."""
    prof = cProfile.Profile()
    prof.enable()
    try:
        run()
    finally:
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(lines)
    return out.getvalue()

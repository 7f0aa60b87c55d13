"""Whole-process wall time of `gradlab check specs/` over every bundled spec, torch's import
included (issue 13's target: under 4 s).

    python benchmarks/time_check.py [--repeats 5]

Interleaved rounds of: the defaults (isolated, --jobs 0: one worker per core up to 4), one
worker (-j 1) and in-process (--no-isolate).  Prints each run's wall time and exit code, then
the medians; the checks themselves are untouched (variants on, default modes).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(extra: list[str]) -> tuple[float, int, str]:
    """(wall seconds, exit code, verdict line) of one `gradlab check specs/` process."""
    with tempfile.TemporaryDirectory() as reports:
        cmd = [sys.executable, "-m", "gradlab", "check", str(ROOT / "specs"), "--report-dir",
               reports, *extra]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        wall = time.perf_counter() - t0
    verdict = next((ln for ln in proc.stdout.splitlines()[::-1]
                    if ln.startswith(("PASSED", "FAILED"))), "?")
    return wall, proc.returncode, verdict


#: (label, extra arguments) of each configuration timed.
CONFIGS = (("default", []), ("-j 1", ["--jobs", "1"]), ("--no-isolate", ["--no-isolate"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {label: [] for label, _ in CONFIGS}
    for i in range(args.repeats):
        for label, extra in CONFIGS:
            wall, code, verdict = run_once(extra)
            walls[label].append(wall)
            print(f"{label:>12} run {i + 1}: {wall:6.2f} s  exit {code}  {verdict}")
    for label, values in walls.items():
        print(f"{label:>12} median: {statistics.median(values):.2f} s over {len(values)} runs "
              f"(min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()

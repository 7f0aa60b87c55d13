"""Whole-process wall time of `gradlab check` over every bundled spec (issues: < 60 s).

    python benchmarks/time_check.py [--repeats 3]

Prints each run's wall time and exit code, then the median; the checks themselves are
untouched (variants on, default modes), exactly what `gradlab check specs/` does.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for label, extra in (("all variants", []), ("no variants", ["--no-variants"])):
        walls = []
        for i in range(args.repeats):
            wall, code, verdict = run_once(extra)
            walls.append(wall)
            print(f"{label:>12} run {i + 1}: {wall:6.2f} s  exit {code}  {verdict}")
        print(f"{label:>12} median: {statistics.median(walls):.2f} s over {len(walls)} runs")


if __name__ == "__main__":
    main()

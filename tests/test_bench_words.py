"""bench answers "faster, and by how much" at any ratio (issue 30, item 8): ratios in
significant digits and words ("3,600x slower", never "0.00x"), a warning when a debug mode
distorts the timings (terminal and report files), and how long a conclusive run would take
when the samples were too few to tell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from gradlab.envinfo import timing_distortions
from gradlab.render.bench import ratio_interval, ratio_words, render_bench, speedup_words
from gradlab.results.bench import BenchReport, BenchRow

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("speedup", "words"), [
    (1 / 3600, "3,600x slower"), (2.1, "2.10x faster"), (1.25, "1.25x faster"),
    (0.8, "1.25x slower"), (12.34, "12.3x faster"), (1 / 123.4, "123x slower"),
    (25000.0, "25,000x faster"), (1.0, "1.00x faster")])
def test_ratios_in_significant_digits_and_words(speedup: float, words: str) -> None:
    assert ratio_words(speedup) == words


def test_a_slowdowns_interval_is_said_as_slowdowns() -> None:
    assert ratio_interval(1 / 3600, 1 / 3700, 1 / 3500) == "[3,500, 3,700]"
    assert ratio_interval(1.25, 1.1, 1.4) == "[1.10, 1.40]"
    row = BenchRow("op", "c", "float32", "cpu", "custom", "forward", median_s=3.6, n=12,
                   speedup=1 / 3600, speedup_low=1 / 3700, speedup_high=1 / 3500,
                   significant=True)
    assert speedup_words(row) == "3,600x slower [3,500, 3,700]"
    assert "0.00" not in speedup_words(row)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_debug_modes_that_distort_timings_are_named() -> None:
    said = timing_distortions({"TRITON_INTERPRET": "1", "CUDA_LAUNCH_BLOCKING": "0"})
    assert len(said) == 1 and said[0].startswith("TRITON_INTERPRET=1 (the Triton interpreter")
    assert timing_distortions({}) == []
    import torch

    with torch.autograd.detect_anomaly(check_nan=False):
        assert any("anomaly mode" in s for s in timing_distortions({}))


def _slow_rows() -> list[BenchRow]:
    """A custom Function 3,600x slower than its reference, 3 samples of 0.33 s each."""
    return [BenchRow("op", "c", "float32", "cpu", "custom", "forward", median_s=0.33, n=3,
                     samples_s=[0.33] * 3, speedup=1 / 3600, significant=False),
            BenchRow("op", "c", "float32", "cpu", "reference", "forward", median_s=0.33 / 3600,
                     n=3, number=100, samples_s=[0.33 / 3600] * 3)]


def test_the_terminal_says_the_mode_and_how_long_a_conclusion_takes() -> None:
    report = BenchReport(rows=_slow_rows(), env={
        "timing_distortions": "TRITON_INTERPRET=1 (the Triton interpreter runs kernels in "
                              "Python, thousands of times slower than compiled)"})
    console = Console(width=200, record=True, color_system=None)
    render_bench(report, console)
    text = console.export_text()
    assert "3,600x slower n=3" in text and "0.00" not in text
    assert "warning: timings distorted by TRITON_INTERPRET=1" in text
    # 3 samples of 0.33 s: 10 for an interval take 3.3 s, and a fifth more
    assert ("too few samples to tell: 3 in 990 ms; about 4 s of sampling per case for a "
            "conclusion (--max-time 4)") in text


def test_the_report_files_record_the_mode(tmp_path: Path) -> None:
    """`gradlab bench` under TRITON_INTERPRET=1: the warning in the terminal, the mode in the
    JSON's environment and the CSV's columns."""
    env = dict(os.environ, TRITON_INTERPRET="1", GRADLAB_ISOLATE="0", COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "gradlab", "bench", "exp",
         "--min-time", "0.001", "--min-samples", "3", "--max-time", "0.05",
         "--report-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "warning: timings distorted by TRITON_INTERPRET=1" in proc.stdout
    (js,) = tmp_path.glob("bench-*.json")
    assert json.loads(js.read_text())["env"]["timing_distortions"].startswith(
        "TRITON_INTERPRET=1")
    (csv,) = tmp_path.glob("bench-*.csv")
    assert str(pd.read_csv(csv)["timing_distortions"].iloc[0]).startswith("TRITON_INTERPRET=1")

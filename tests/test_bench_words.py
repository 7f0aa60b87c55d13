"""bench answers "faster, and by how much" at any ratio (issue 30, item 8): ratios in
significant digits and words ("3,600x slower", never "0.00x"), a warning when a debug mode
distorts the timings (terminal and report files), and how long a conclusive run would take
when the samples were too few to tell."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from gradlab.envinfo import timing_distortions
from gradlab.render.bench import ratio_interval, ratio_words, render_bench, speedup_words
from gradlab.results.bench import BenchReport, BenchRow


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
    # too few samples: the ratio without a direction (the summary counts it as too few)
    assert "ratio 1/3,600, n=3: too few to tell" in text and "0.00" not in text
    assert "warning: timings distorted by TRITON_INTERPRET=1" in text
    # 3 samples of 0.33 s: 10 for an interval take 3.3 s, and a fifth more
    assert ("too few samples to tell: 3 in 990 ms; about 4 s of sampling per case for a "
            "conclusion (--max-time 4)") in text


def test_the_report_files_record_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`gradlab bench` under TRITON_INTERPRET=1: the warning in the terminal, the mode in the
    JSON's environment and the CSV's columns."""
    from conftest import run_cli

    spec = tmp_path / "tiny.yaml"
    spec.write_text("function: user_functions:Square\nreference: user_functions:square_reference\n"
                    "args: [{shape: [3, 4]}]\nbench: [{name: tiny, args: [{shape: [8]}]}]\n")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read by the run, not by an import here
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(["bench", str(spec), "--min-time", "0.001", "--min-samples", "3",
                              "--max-time", "0.05", "--report-dir", str(tmp_path / "r")], capsys)
    assert code == 0, out + err
    assert "warning: timings distorted by TRITON_INTERPRET=1" in out
    (js,) = (tmp_path / "r").glob("bench-*.json")
    assert json.loads(js.read_text())["env"]["timing_distortions"].startswith(
        "TRITON_INTERPRET=1")
    (csv,) = (tmp_path / "r").glob("bench-*.csv")
    assert str(pd.read_csv(csv)["timing_distortions"].iloc[0]).startswith("TRITON_INTERPRET=1")


def test_a_row_says_faster_or_slower_only_where_its_summary_counts_it() -> None:
    from rich.console import Console

    from gradlab.render.bench import render_bench, speedup_words
    from gradlab.results.bench import BenchReport, BenchRow

    def row(impl: str, **kw: object) -> BenchRow:
        return BenchRow("op", "case", "float32", "cpu", impl, "forward", median_s=1.0, n=12,
                        samples_s=[1.0] * 12, **kw)  # type: ignore[arg-type]

    spans = row("custom", speedup=1.05, speedup_low=0.95, speedup_high=1.1, significant=False)
    excludes = row("custom", speedup=0.8, speedup_low=0.75, speedup_high=0.85, significant=True)
    assert speedup_words(spans) == "no difference [0.95, 1.1]"
    assert speedup_words(excludes) == "1.25x slower [1.18, 1.33]"
    console = Console(width=100, record=True, color_system=None)
    render_bench(BenchReport(rows=[spans, excludes, row("reference")]), console)
    text = console.export_text()
    assert "0 faster, 1 slower, 1 no significant difference" in text
    assert "no difference [0.95, 1.1]" in text and "faster [" not in text, text
    # the columns a reader cannot guess are said under the table
    assert "saved: bytes autograd keeps for backward" in " ".join(text.split())
    # a column the width dropped is not explained
    narrow = Console(width=70, record=True, color_system=None)
    render_bench(BenchReport(rows=[spans, excludes, row("reference")]), narrow)
    header = next(ln for ln in narrow.export_text().splitlines() if " impl " in ln)
    assert " saved" not in header and "saved:" not in narrow.export_text()

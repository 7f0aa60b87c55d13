"""Bench statistics that are honest about few samples, and Ctrl-C that keeps the samples taken
(issue 23 item 9): under stats.MIN_INTERVAL_SAMPLES samples no bootstrap interval is given (the
count is said instead: `n=3`) and nothing is called significant; a bench stopped in its third
sampling round keeps the two rounds it finished, in the report and in the files the `gradlab`
command writes."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli
from rich.console import Console

from gradlab.bench.compare import compare
from gradlab.bench.stats import MIN_INTERVAL_SAMPLES, median_ratio, ratio_change
from gradlab.render.bench import render_bench, speedup_words
from gradlab.render.junit import interval
from gradlab.results.bench import BenchReport, BenchRow
from gradlab.results.status import PASS

DATA = Path(__file__).parent / "data" / "bench_interrupt"
PHASES = ("forward", "forward_grad", "backward", "forward_backward")


def test_no_interval_under_ten_samples() -> None:
    assert MIN_INTERVAL_SAMPLES == 10
    three = median_ratio([2.0, 2.1, 1.9], [1.0, 1.1, 0.9], paired=True)
    assert three is not None and three.value == pytest.approx(2.0)
    assert (three.low, three.high, three.significant, three.n) == (None, None, False, 3)
    ten = median_ratio([2.0, 2.1, 1.9] * 4, [1.0, 1.1, 0.9] * 4, paired=True)
    assert ten is not None and ten.low is not None and ten.high is not None
    assert ten.low > 1 and ten.significant and ten.n == 12
    few = ratio_change(([2.0] * 5, [1.0] * 5), ([3.0] * 5, [1.0] * 5))
    assert few is not None and (few.low, few.high, few.significant, few.n) == (
        None, None, False, 5)
    assert few.value == pytest.approx(1.5)


def _row(impl: str, n: int, **kw: object) -> BenchRow:
    return BenchRow("op", "case", "float32", "cpu", impl, "forward", median_s=1.0, n=n,
                    samples_s=[1.0] * n, **kw)  # type: ignore[arg-type]


def test_a_speedup_from_three_samples_says_n_not_an_interval() -> None:
    few = _row("custom", 3, speedup=1.25, significant=False,
               note="n=3: too few samples for a confidence interval")
    # too few to tell: no faster or slower on the row, as the summary says
    assert speedup_words(few) == "ratio 1.25, n=3: too few to tell"
    assert interval(few) == "(n=3: too few samples for an interval)"
    many = _row("custom", 12, speedup=1.25, speedup_low=1.1, speedup_high=1.4, significant=True)
    assert speedup_words(many) == "1.25x faster [1.10, 1.40]"
    report = BenchReport(rows=[few, _row("reference", 3)])
    console = Console(width=200, record=True, color_system=None)
    render_bench(report, console)
    text = console.export_text()
    assert "ratio 1.25, n=3: too few to tell" in text and "faster [" not in text
    assert "note:" not in text  # the row's words say it: no note line repeating it
    assert "[" not in text.split("ratio 1.25")[1].split("\n")[0]
    assert "0 no significant difference, 1 with too few samples to tell" in text


def test_compare_does_not_judge_three_rounds() -> None:
    def run(custom_s: float) -> BenchReport:
        return BenchReport(rows=[
            BenchRow("op", "case", "float32", "cpu", impl, "forward", median_s=s, n=3,
                     samples_s=[s] * 3)
            for impl, s in (("custom", custom_s), ("reference", 1.0))])

    (row,) = compare(run(1.0), run(2.0))
    assert row.change_pct == pytest.approx(100.0)
    assert (row.ratio_low, row.ratio_high, row.regression) == (None, None, False)
    assert "n=3, too few samples" in row.note


@pytest.fixture
def interrupted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, Path]:
    """`gradlab bench` on a Function that raises KeyboardInterrupt in its 3rd sampling round,
    run in this process (conftest.run_cli: the entry point the installed command calls; the
    interrupt is the Function's own raise, no signal, so no process of its own is needed)."""
    # interrupting.py counts its calls in a module global: a fresh import starts at zero
    monkeypatch.delitem(sys.modules, "interrupting", raising=False)
    app = importlib.import_module("gradlab.cli.app")  # the module, not gradlab.cli.app (Typer)
    for console in (app.out, app.err):  # made at import: a 200-column terminal from here on
        monkeypatch.setattr(console, "width", 200)
    out = tmp_path / "bench"
    code, stdout, stderr = run_cli(["bench", str(DATA / "interrupting.yaml"), "--report-dir",
                                    str(out), "--junit", str(out / "junit.xml")], capsys)
    monkeypatch.delitem(sys.modules, "interrupting", raising=False)
    return code, stdout + stderr, out


def test_ctrl_c_in_a_bench_keeps_the_rounds_taken(interrupted: tuple[int, str, Path]) -> None:
    code, output, out = interrupted
    assert code == 130, output  # ExitCode.INTERRUPTED
    (csv,) = out.glob("bench-*.csv")
    frame = pd.read_csv(csv)
    assert sorted(zip(frame["phase"], frame["impl"], strict=True)) == sorted(
        (p, i) for p in PHASES for i in ("custom", "reference"))
    # two whole rounds: every row has its 2 samples, and says why so few
    assert set(frame["n"]) == {2} and set(frame["status"]) == {PASS}
    assert all("interrupted after 2 rounds" in note for note in frame["note"])
    custom = frame[frame["impl"] == "custom"]
    assert custom["speedup"].notna().all() and custom["speedup_low"].isna().all()
    (raw,) = out.glob("bench-*.json")
    rows = json.loads(raw.read_text())["rows"]
    assert all(len(r["samples_s"]) == 2 for r in rows)
    assert "n=2" in output and "interrupted: partial results" in output
    assert "too few samples for an interval" in (out / "junit.xml").read_text()

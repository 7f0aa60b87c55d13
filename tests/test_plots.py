"""--plots: the error map a failing gradient keeps, the PNGs check and bench write, and one line
with exit 2 when matplotlib is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA, TESTS
from torch import Tensor
from typer.testing import CliRunner

from gradlab.checks.diagnosis.errormap import error_map
from gradlab.checks.run.driver import run
from gradlab.checks.run.options import Options
from gradlab.cli import app
from gradlab.model import DEFAULT_TOLERANCES, Case, OpDef, Target
from gradlab.render.plots import bench_plots, check_heatmaps
from gradlab.results import ERROR_MAP_SIDE
from gradlab.results.bench import BenchReport, BenchRow

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"


class BorderBand(torch.autograd.Function):
    """3x whose backward drops a 2-wide border (a padding bug)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x * 3

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        out = g * 3
        out[..., :2, :] = 0
        out[..., -2:, :] = 0
        out[..., :, :2] = 0
        out[..., :, -2:] = 0
        return out


def test_error_map_reduces_leading_dims_and_pools_without_losing_a_spike() -> None:
    want = torch.zeros(2, 3, 10, 12, dtype=torch.float64)
    got = want.clone()
    got[1, 2, 4, 5] = 7.0
    m = error_map(got, want)
    assert m.shape == (10, 12) and m[4, 5] == 7.0 and m.sum() == 7.0
    big_want = torch.zeros(600, 1000)
    big_got = big_want.clone()
    big_got[599, 999] = float("nan")  # non-finite where the expected value is finite
    big_got[0, 0] = 2.0
    big = error_map(big_got, big_want)
    assert big.shape == (ERROR_MAP_SIDE, ERROR_MAP_SIDE)
    assert big[0, 0] == 2.0 and big[-1, -1] == float("inf")
    assert error_map(torch.ones(5), torch.zeros(5)).shape == (1, 5)


def _border_target() -> Target:
    x = torch.randn(1, 2, 16, 20, dtype=torch.float64, requires_grad=True)
    return Target(op=OpDef(name="BorderBand", summary="", function=BorderBand.apply,
                           reference=lambda x: x * 3, cases=(Case("img", (x,)),),
                           second_order=None, tolerances=dict(DEFAULT_TOLERANCES),
                           dtypes=("float64",), devices=("cpu",)), source="test")


def test_failing_gradient_keeps_its_error_map_only_when_asked() -> None:
    options = Options(variants=False, checks=frozenset({"gradient"}))
    (plain,) = run([_border_target()], options).failures
    assert plain.findings[0].error_map is None
    (row,) = run([_border_target()], Options(variants=False, checks=frozenset({"gradient"}),
                                             error_maps=True)).failures
    m = row.findings[0].error_map
    assert m.shape == (16, 20)
    band = torch.ones(16, 20, dtype=torch.bool)
    band[2:-2, 2:-2] = False
    assert (torch.from_numpy(m)[~band] == 0).all() and (torch.from_numpy(m)[band] > 0).all()
    assert row.as_dict()["findings"][0]["error_map"] is None  # never into JSON
    assert row.findings[0].error_map is m  # as_dict leaves the row as it was


def test_check_heatmaps_write_one_png_per_failing_gradient_row(tmp_path: Path) -> None:
    report = run([_border_target()], Options(variants=False, error_maps=True,
                                             checks=frozenset({"gradient", "forward"})))
    (path,) = check_heatmaps(report, tmp_path, "run")
    assert path.name == "run_BorderBand_img_float64_cpu_base_gradient.png"
    assert path.read_bytes().startswith(PNG)


def test_cli_check_plots_and_json_without_maps(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TESTS)
    result = runner.invoke(app, ["check", str(DATA / "user_broken.yaml"), "--plots",
                                 "--dtype", "float64", "--report-dir", str(tmp_path)])
    assert result.exit_code == 1
    pngs = list((tmp_path / "plots").glob("check-*_gradient.png"))
    assert pngs and all(p.read_bytes().startswith(PNG) for p in pngs)
    assert any("_base_gradient" in p.name for p in pngs)
    doc = json.loads(next(tmp_path.glob("check-*.json")).read_text())
    assert all(f.get("error_map") is None for r in doc["rows"] for f in r["findings"])


def test_bench_plots_speedups_and_saved_memory(tmp_path: Path) -> None:
    rows = [BenchRow(op, "c", "float32", "cpu", impl, phase, median_s=1e-3, n=5,
                     speedup=s if impl == "custom" else None, speedup_low=s * 0.8,
                     speedup_high=s * 1.2, significant=s > 1.3, saved_bytes=2**20 * k)
            for k, (op, s) in enumerate([("a", 1.1), ("b", 2.5)], start=1)
            for impl in ("custom", "reference") for phase in ("forward_grad", "backward")]
    paths = bench_plots(BenchReport(rows=rows), tmp_path, "bench-x")
    assert [p.name for p in paths] == ["bench-x-speedup.png", "bench-x-saved.png"]
    assert all(p.read_bytes().startswith(PNG) for p in paths)


@pytest.mark.parametrize("command", [["check", "exp"], ["bench", "exp"]])
def test_plots_without_matplotlib_is_one_line_and_exit_2(command: list[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    result = runner.invoke(app, [*command, "--plots", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2
    (line,) = [ln for ln in result.output.splitlines() if ln.strip()]
    assert line.startswith("gradlab: error: --plots needs matplotlib")
    assert not list(tmp_path.glob("*.csv"))  # refused before running anything

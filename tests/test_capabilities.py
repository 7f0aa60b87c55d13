"""Mixed precision and the capability matrix: each broken Function flagged with its hint beside
a correct twin that passes, through `gradlab.check` with defaults and through `gradlab check
SPEC`; the matrix in the terminal, the reports and `gradlab list`.

- autocast: a Function without torch.amp.custom_fwd/custom_bwd whose backward multiplies a half
  grad_output by a float saved tensor (a `warn`; a failure where the spec requires autocast),
  and one that is wrong under autocast only (a failure);
- torch.func: a wrong hand-written vmap rule (a failure), a classic Function where vmap and
  grad are required (a failure; information otherwise);
- a nondeterministic backward where determinism is required;
- torch.compile: a backward that takes another path while compiling (measured when required or
  asked for).
"""

from __future__ import annotations

import importlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA, run_cli
from rich.console import Console
from rich.table import Table
from torchguards import needs
from typer.testing import CliRunner

import gradlab
from gradlab import ops
from gradlab.cli import app
from gradlab.model import MATRIX
from gradlab.render.capabilities import capability_table
from gradlab.render.tables import width_of
from gradlab.render.words import message
from gradlab.results import FAIL, PASS, WARN
from gradlab.results.capabilities import NO, YES, OpCapabilities, capability_matrix, from_states

CLASSES = DATA / "bugclasses"
sys.path.insert(0, str(CLASSES))
import bugclass_functions as bf  # noqa: E402

MATMUL = [(3, 4), (4, 5)]
SQUARE = [(3, 4)]
#: name: (broken, twin, reference, shapes, requires, check, hint, the broken row's status)
CLASSES_TABLE = {
    "autocast_missing": (bf.MatmulNoAmp, bf.MatmulAmp, bf.matmul_reference, MATMUL, (),
                         "autocast", "autocast_missing", WARN),
    "autocast_required": (bf.MatmulNoAmp, bf.MatmulAmp, bf.matmul_reference, MATMUL,
                          ("autocast",), "autocast", "autocast_missing", FAIL),
    "autocast_wrong": (bf.MatmulAutocastFastPath, bf.MatmulAmp, bf.matmul_reference, MATMUL, (),
                       "autocast", "autocast_only", FAIL),
    "vmap_wrong": (bf.ExpBadVmapRule, bf.ExpFunc, torch.exp, SQUARE, (), "capabilities",
                   "vmap_wrong", FAIL),
    "vmap_graph_lost": (bf.exp_vmap_detached, bf.exp_func, torch.exp, SQUARE, (),
                        "capabilities", "vmap_wrong", FAIL),
    "transforms_required": (bf.Exp, bf.ExpFunc, torch.exp, SQUARE, ("vmap", "func_grad"),
                            "capabilities", "vmap_missing", FAIL),
    "deterministic_required": (bf.ExpNoisyBackward, bf.Exp, torch.exp, SQUARE,
                               ("deterministic",), "capabilities", "deterministic_missing",
                               FAIL),
    "compile_wrong": (bf.ScaleCompileFastPath, bf.Scale, bf.scale_reference, SQUARE,
                      ("compile",), "capabilities", "compile_wrong", FAIL),
}


def args(shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.rand(s, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()
            for s in shapes]


def described(r: gradlab.Report) -> list[tuple[str, str, str, str, str]]:
    return [(x.variant, x.check, x.status, x.hint, message(x)) for x in r.rows
            if x.failed or x.status == WARN]


@pytest.mark.parametrize("name", sorted(CLASSES_TABLE))
def test_the_broken_function_is_flagged_with_its_hint(name: str) -> None:
    broken, _, ref, shapes, requires, check, hint, status = CLASSES_TABLE[name]
    if name.startswith("compile"):
        needs("compile_traces_functions")
    r = gradlab.check(broken, args(shapes), reference=ref, requires=requires)
    flagged = [x for x in r.rows if x.check == check and x.hint == hint and x.status == status]
    assert flagged, described(r)
    # a warn is a capability the Function lacks: the run still passes unless it is required
    assert r.passed == (status == WARN), described(r)


@pytest.mark.parametrize("name", sorted(CLASSES_TABLE))
def test_the_correct_twin_passes(name: str) -> None:
    _, twin, ref, shapes, requires, check, _, _ = CLASSES_TABLE[name]
    r = gradlab.check(twin, args(shapes), reference=ref, requires=requires)
    assert r.passed, described(r)
    # the twins are classic Functions without a jvp: information (tests/test_forward_ad.py)
    assert not [x for x in r.rows if x.status == WARN], described(r)
    assert any(x.check == check and x.status == PASS for x in r.rows)


@pytest.mark.parametrize("name", sorted(CLASSES_TABLE))
def test_through_the_cli(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if name.startswith("compile"):
        needs("compile_traces_functions")
    monkeypatch.chdir(CLASSES)
    hint, status = CLASSES_TABLE[name][6:]
    broken = CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path)])
    assert broken.exit_code == (0 if status == WARN else 1), broken.output
    assert hint in broken.output, broken.output
    twin = CliRunner().invoke(app, ["check", f"{name}_ok.yaml", "--no-isolate",
                                    "--report-dir", str(tmp_path)])
    assert twin.exit_code == 0, twin.output
    # no warning (the twins have no jvp: information)
    assert " 0 warnings" in " ".join(twin.output.split()), twin.output


def test_strict_fails_a_missing_autocast_but_not_missing_information() -> None:
    assert not gradlab.check(bf.MatmulNoAmp, args(MATMUL), reference=bf.matmul_reference,
                             strict=True).passed
    # vmap, grad and a jvp are missing from a classic Function: information, even under
    # --strict
    r = gradlab.check(bf.Exp, args(SQUARE), reference=torch.exp, strict=True)
    assert r.passed, described(r)
    (vmap,) = [x for x in r.rows if x.check == "capabilities" and x.variant == "vmap"]
    assert (vmap.status, vmap.reason) == (PASS, "vmap_missing")
    assert "setup_context" in message(vmap)


def test_compile_is_measured_on_request() -> None:
    needs("compile_traces_functions")
    x = args(SQUARE)
    default = gradlab.check(bf.ScaleCompileFastPath, x, reference=bf.scale_reference)
    assert default.passed and "compile" not in {r.variant for r in default.rows}
    asked = gradlab.check(bf.ScaleCompileFastPath, x, reference=bf.scale_reference,
                          capabilities="all")
    assert [r.hint for r in asked.failures] == ["compile_wrong"], described(asked)
    with pytest.raises(ValueError, match="default, all"):
        gradlab.check(bf.Scale, x, reference=bf.scale_reference, capabilities="most")


def test_a_graph_break_is_information() -> None:
    """ScaleConsumesCtx changes ctx in backward: dynamo cannot trace that side effect."""
    needs("compile_traces_functions")
    r = gradlab.check(bf.ScaleConsumesCtx, args(SQUARE), reference=bf.scale_reference,
                      capabilities="all", checks=["capabilities"])
    (row,) = [x for x in r.rows if x.variant == "compile"]
    assert (row.status, row.reason) == (PASS, "graph_break"), message(row)
    assert capability_matrix(r.rows)[0].cell("compile").state == "breaks"


def test_a_required_capability_not_measured_is_no_pass() -> None:
    r = gradlab.check(bf.Exp, args(SQUARE), reference=torch.exp, requires=["cuda"],
                      checks=["capabilities"])
    (row,) = [x for x in r.rows if x.variant == "cuda"]
    if torch.cuda.is_available():
        assert row.status == PASS, message(row)
    else:
        assert row.reason == "cuda_unavailable" and row.unverified and not r.passed


@pytest.mark.cuda
def test_cuda_is_measured_against_the_cpu() -> None:
    r = gradlab.check(bf.Exp, args(SQUARE), reference=torch.exp, checks=["capabilities"])
    (row,) = [x for x in r.rows if x.variant == "cuda"]
    assert row.status == PASS and row.reason == "", message(row)


def test_the_matrix_says_what_each_function_supports() -> None:
    x = args(SQUARE)
    rows = [*gradlab.check(bf.ExpFunc, x, reference=torch.exp).rows,
            *gradlab.check(bf.ExpNoisyBackward, x, reference=torch.exp).rows,
            *gradlab.check(bf.MatmulNoAmp, args(MATMUL), reference=bf.matmul_reference).rows]
    lines = {line.op: line for line in capability_matrix(rows)}
    assert lines["ExpFunc"].states() == {"first_order": YES, "second_order": YES,
                                         "forward_ad": NO,
                                         "autocast": YES, "compile": "-", "vmap": YES,
                                         "func_grad": YES, "batched_grad": YES,
                                         "deterministic": YES, "noncontiguous": YES, "cuda": "-"}
    noisy = lines["ExpNoisyBackward"]
    assert (noisy.cell("deterministic").state, noisy.cell("vmap").state) == (NO, NO)
    assert "differs between two runs" in noisy.cell("deterministic").note
    autocast = lines["MatmulNoAmp"].cell("autocast")
    assert (autocast.state, autocast.status) == (NO, WARN)


class ExpRandomRounding(bf.Exp):
    """Exp whose backward rounds stochastically from the global RNG (deterministic given it,
    as dropout is): the noisy twin draws from a generator of its own instead."""

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * y * (1 + 1e-14 * torch.randn_like(y))


@pytest.mark.parametrize("checks", [None, ["capabilities"]])
def test_randomness_from_the_global_rng_is_deterministic(checks: list[str] | None) -> None:
    # with the jacobian check, the capabilities take their base run from its graph: the
    # deterministic probe must replay the RNG from where that run began
    r = gradlab.check(ExpRandomRounding.apply, args(SQUARE), reference=torch.exp, name="rr",
                      checks=checks, variants=False)
    (line,) = capability_matrix(r.rows)
    assert line.cell("deterministic").state == YES, line.cell("deterministic").note


def test_plain_torch_callables_are_measured_without_calling_vjp_fn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.func's vjp_fn imports torch._dynamo (a second) to run torch's own derivatives:
    # a callable of torch ops only is traced by vjp, and its derivatives are torch's
    from gradlab.checks.numeric.capabilities import PLAIN_TORCH

    real_vjp = torch.func.vjp
    called: list[str] = []

    def vjp(f: Any, *primals: Any) -> Any:
        out, vjp_fn = real_vjp(f, *primals)
        return out, lambda *a: called.append("vjp_fn") or vjp_fn(*a)

    monkeypatch.setattr(torch.func, "vjp", vjp)
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    plain = gradlab.check(lambda x: (x * 3).sin(), [x], reference=lambda x: torch.sin(3 * x),
                          variants=False)
    (row,) = [r for r in plain.rows if r.variant == "func_grad"]
    assert plain.passed and (row.status, row.note) == ("pass", PLAIN_TORCH) and not called
    # a custom Function torch.func can trace is measured through vjp_fn
    custom = gradlab.check(bf.ExpFunc, [x], reference=torch.exp, variants=False)
    (row,) = [r for r in custom.rows if r.variant == "func_grad"]
    assert (row.status, row.note) == ("pass", "") and called == ["vjp_fn"]


def test_the_table_fits_a_100_column_terminal() -> None:
    long = OpCapabilities("a_rather_long_user_function_name_Function", {})
    matrix = [from_states(e.name, e.capabilities) for e in ops.BUNDLED] + [long]
    table = capability_table(matrix, 100)
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(table)
    lines = console.export_text().splitlines()
    assert max(len(ln.rstrip()) for ln in lines) <= 100
    # the long name goes on a line of its own (tests/test_list_devices.py); no state is cut
    assert all(ln.split()[-11:] == ["yes", "yes", "no", "yes", "yes", "no", "no", "yes", "yes",
                                    "yes", "-"]
               for ln in lines if ln.split()[:1] == ["linear"])
    short = capability_table(matrix[:-1], 100)
    assert isinstance(short, Table) and width_of(short) <= 100
    assert [c.header for c in short.columns][1:] == ["1st", "2nd", "fwd", "autocast", "compile",
                                                     "vmap", "grad", "bgrad", "determ",
                                                     "strided", "cuda"]


def test_the_reports_and_the_terminal_show_the_matrix(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CLASSES)
    result = CliRunner().invoke(app, ["check", "autocast_missing.yaml", "--no-isolate",
                                      "--report-dir", str(tmp_path), "--summary-md",
                                      str(tmp_path / "summary.md")])
    assert result.exit_code == 0, result.output
    assert "capabilities" in result.output and "autocast_missing 1" in result.output
    # the warning says the fix
    assert "WARN MatmulNoAmp / base / autocast" in result.output
    assert "torch.amp.custom_fwd" in result.output
    doc = json.loads(next(tmp_path.glob("check-*.json")).read_text())
    states = doc["capabilities"]["MatmulNoAmp"]
    assert list(states) == list(MATRIX)
    assert (states["autocast"], states["vmap"], states["first_order"]) == (NO, NO, YES)
    csv = next(tmp_path.glob("check-*.csv")).read_text()
    assert "capabilities,pass" in csv and "autocast,warn" in csv
    assert "### Capabilities" in (tmp_path / "summary.md").read_text()


def test_list_shows_the_bundled_ops_capabilities(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    console = importlib.import_module("gradlab.cli.app").out
    monkeypatch.setattr(console, "width", 100)  # a 100-column terminal
    code, out, _ = run_cli(["list"], capsys)
    assert code == 0
    assert "autocast" in out and "compile" in out and "grad" in out
    assert max(len(ln.rstrip()) for ln in out.splitlines()) <= 100
    # a summary too long for its line goes on under itself, past the name and devices
    lead = " " * (max(len(e.name) for e in ops.BUNDLED) + len("  cpu  "))
    listing = [ln for ln in out.split("devices: as each")[0].splitlines() if ln.strip()]
    assert all(ln.split()[0] in {e.name for e in ops.BUNDLED} or ln.startswith(lead)
               for ln in listing), listing
    for e in ops.BUNDLED:
        line = next((ln for ln in out.splitlines() if ln.split()[:1] == [e.name]
                     and "yes" in ln), out)
        assert line.split()[1:] == [e.capabilities[c] for c in MATRIX]


def test_bad_capabilities_option_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", "exp", "--capabilities", "some"], capsys)
    assert code == 2 and "--capabilities" in err


class SPDSolve(torch.autograd.Function):
    """A^-1 b for a symmetric positive-definite A, which forward checks (a CG solve breaks
    down on anything else: helper-18's torchsparsegradutils)."""

    @staticmethod
    def forward(ctx, a, b):
        if not torch.allclose(a, a.mT) or bool((torch.linalg.eigvalsh(a) <= 0).any()):
            raise ValueError("A must be symmetric positive definite")
        x = torch.linalg.solve(a, b)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        gb = torch.linalg.solve(a, g)
        return -gb[:, None] * x[None, :], gb


def test_the_vmap_probe_keeps_a_matrix_symmetric_positive_definite() -> None:
    gen = torch.Generator().manual_seed(0)
    m = torch.rand(4, 4, generator=gen, dtype=torch.float64)
    a = (m @ m.T + 4 * torch.eye(4, dtype=torch.float64)).requires_grad_()
    b = torch.rand(4, generator=gen, dtype=torch.float64).requires_grad_()
    report = gradlab.check(SPDSolve, [a, b], reference=lambda a, b: torch.linalg.solve(a, b),
                           checks=["capabilities"])
    assert not [r for r in report.rows if r.failed], [message(r) for r in report.rows]
    (vmap,) = [r for r in report.rows if r.variant == "vmap"]
    assert vmap.reason == "vmap_missing", message(vmap)


def packed_spd(vals: torch.Tensor) -> torch.Tensor:
    """A 3x3 symmetric matrix from packed values: the diagonal first, then the upper part."""
    a = torch.diag(vals[:3])
    i, j = torch.triu_indices(3, 3, 1)
    return a.index_put((i, j), vals[3:]).index_put((j, i), vals[3:])


def test_the_vmap_probe_keeps_to_the_case_s_values_where_flipped_ones_leave_the_domain() -> None:
    # packed values: any flip moves the diagonal off it (indefinite, forward refuses)
    vals = torch.tensor([3.0, 3.5, 4.0, 0.5, -0.25, 0.75], dtype=torch.float64)
    b = torch.rand(3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    report = gradlab.check(lambda v, b: SPDSolve.apply(packed_spd(v), b),
                           [vals.requires_grad_(), b.requires_grad_()],
                           reference=lambda v, b: torch.linalg.solve(packed_spd(v), b),
                           checks=["capabilities"])
    assert not [r for r in report.rows if r.failed], [message(r) for r in report.rows]

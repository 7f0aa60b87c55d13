"""Bug classes gradlab finds on the contract row (issue: bug classes no tool checks yet), each
through `gradlab.check` with defaults and through `gradlab check SPEC`, beside a correct twin.

- an output kept on ctx (a reference cycle: activations live until the cyclic collector runs);
- an input kept on ctx (autograd's version check skipped: in-place updates go unnoticed);
- a backward that is not re-entrant (a second backward on the same graph differs);
- an in-place Function without ctx.mark_dirty (its correct twin, with mark_dirty, passes: it is
  given non-leaf inputs, as in a model);
- a backward that overflows at large magnitudes where the reference is finite (the magnitude
  variant), and a tiled backward that drops the last partial tile (the ragged variant).
"""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import DATA
from typer.testing import CliRunner

import gradlab
from gradlab.cli import app
from gradlab.render.words import message

CLASSES = DATA / "bugclasses"
sys.path.insert(0, str(CLASSES))
import bugclass_functions as bf  # noqa: E402

#: (broken, twin, reference, number of inputs, hint)
CASES = {
    "output_on_ctx": (bf.ExpOutputOnCtx, bf.Exp, torch.exp, 1, "ctx_output"),
    "output_detached_on_ctx": (bf.ExpOutputDetachedOnCtx, bf.Exp, torch.exp, 1,
                               "ctx_output_detached"),
    "input_on_ctx": (bf.MulInputOnCtx, bf.Mul, bf.mul_reference, 2, "ctx_input"),
    "not_reentrant": (bf.ScaleConsumesCtx, bf.Scale, bf.scale_reference, 1, "not_reentrant"),
    "inplace_not_marked": (bf.ClampInPlaceNotMarked, bf.ClampInPlace, torch.relu, 1,
                           "inplace_input"),
    "magnitude_naive": (bf.SoftplusNaive, bf.Softplus, bf.softplus_reference, 1,
                        "magnitude_only"),
    "ragged_floor": (bf.DoubleTiledFloor, bf.DoubleTiled, bf.double_reference, 1,
                     "ragged_only"),
}
#: the check the hint appears on (the contract row unless said here)
CHECK = {"magnitude_naive": "gradient", "ragged_floor": "gradient"}
#: the shape of the example inputs (a multiple of the tile: the base case passes)
SHAPE = {"ragged_floor": (4, 16)}
#: hazards found by looking, not shown by a wrong number: a warn (gradlab.checks.diagnosis.policy),
#: a failure under --strict; reported once, on the base row
WARNS = {"input_on_ctx", "output_detached_on_ctx"}
#: the spec of each broken Function and of its twin
SPECS = {"output_on_ctx": "output_saved", "output_detached_on_ctx": "output_saved",
         "input_on_ctx": "input_saved",
         "not_reentrant": "reentrant", "inplace_not_marked": "inplace_marked",
         "magnitude_naive": "magnitude_stable", "ragged_floor": "ragged_cdiv"}


def args(n: int, shape: tuple[int, ...] = (3, 4),
         dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    # values away from 0, where a clamp's kink would spoil finite differences
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1).add(0.2).to(dtype)
            .requires_grad_() for _ in range(n)]


def example(name: str, n: int) -> list[torch.Tensor]:
    # the magnitude bug shows in float32 (exp overflows at 89), as in a float32 model
    dtype = torch.float32 if name == "magnitude_naive" else torch.float64
    return args(n, SHAPE.get(name, (3, 4)), dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_broken_function_is_flagged_with_its_hint(name: str) -> None:
    broken, _, ref, n, hint = CASES[name]
    r = gradlab.check(broken, example(name, n), reference=ref)
    status = "warn" if name in WARNS else "fail"
    flagged = [x for x in r.rows if x.status == status
               and x.check == CHECK.get(name, "contract") and x.hint == hint]
    assert flagged, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]
    if name in WARNS:
        assert [x.variant for x in flagged] == ["base"] and not r.failures
    else:
        assert not r.passed


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_correct_twin_passes(name: str) -> None:
    _, twin, ref, n, _ = CASES[name]
    r = gradlab.check(twin, example(name, n), reference=ref)
    assert r.passed, [(x.variant, x.check, x.hint, message(x)) for x in r.failures]


@pytest.mark.parametrize("name", sorted(CASES))
def test_through_the_cli(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(CLASSES)
    hint = CASES[name][4]
    strict = ["--strict"] if name in WARNS else []
    broken = CliRunner().invoke(app, ["check", f"{name}.yaml", "--no-isolate", *strict,
                                      "--report-dir", str(tmp_path)])
    assert broken.exit_code == 1 and hint in broken.output, broken.output
    twin = CliRunner().invoke(app, ["check", f"{SPECS[name]}.yaml", "--no-isolate",
                                    "--report-dir", str(tmp_path)])
    assert twin.exit_code == 0, twin.output


def test_what_the_hints_are_about_is_real() -> None:
    """The harm each finding names, shown on the Functions themselves."""
    # an output on ctx outlives its last reference until the cyclic collector runs
    gc.disable()
    try:
        for fn, freed in ((bf.ExpOutputOnCtx, False), (bf.Exp, True),
                          (bf.ExpOutputDetachedOnCtx, True)):
            y = fn.apply(torch.rand(3, requires_grad=True))
            ref = weakref.ref(y)
            del y
            assert (ref() is None) == freed
    finally:
        gc.enable()
        gc.collect()
    # a detached output on ctx: no cycle (above), but an in-place update of the output
    # before backward goes unnoticed (a wrong gradient)
    x = args(1)[0]
    y = bf.ExpOutputDetachedOnCtx.apply(x)
    with torch.no_grad():
        y.mul_(3)
    (gx,) = torch.autograd.grad(y, [x], torch.ones_like(y))
    assert torch.allclose(gx, 3 * x.detach().exp())  # the updated output: silently wrong
    # an input on ctx: an in-place update before backward goes unnoticed (a wrong gradient)
    x, w = args(2)
    y = bf.MulInputOnCtx.apply(x, w)
    with torch.no_grad():
        w.mul_(2)
    (gx,) = torch.autograd.grad(y.sum(), [x])
    assert torch.equal(gx, w.detach())  # the new weight: silently wrong
    y = bf.Mul.apply(x, w)
    with torch.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(y.sum(), [x])


def test_ragged_sizes_grow_together_and_one_at_a_time_only_after_a_failure() -> None:
    def ragged_rows(fn: Any) -> list[tuple[str, str, str]]:
        x = torch.rand(4, 16, dtype=torch.float64, requires_grad=True)
        report = gradlab.check(fn, [x], reference=bf.double_reference, name="tiled",
                               checks=["forward", "gradient"])
        return [(r.variant, r.check, r.status) for r in report.rows if "ragged" in r.variant]

    assert ragged_rows(bf.DoubleTiled) == [("ragged[16->17,4->5]", "forward", "pass"),
                                           ("ragged[16->17,4->5]", "gradient", "pass")]
    # the floor drops the last tile of the 16s: growing each size alone says which one
    assert ragged_rows(bf.DoubleTiledFloor) == [
        ("ragged[16->17,4->5]", "forward", "pass"), ("ragged[16->17,4->5]", "gradient", "fail"),
        ("ragged[16->17]", "forward", "pass"), ("ragged[16->17]", "gradient", "fail"),
        ("ragged[4->5]", "forward", "pass"), ("ragged[4->5]", "gradient", "pass")]


class ExpZeroesGradData(bf.Exp):
    """Exp whose backward zeroes grad_output through .data: no version bump, only the values
    tell (in float64 they are compared with the grad_output's float64 source, not a copy)."""

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        out = g * y
        g.data.zero_()
        return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_grad_output_written_behind_autograds_back_is_seen(dtype: torch.dtype) -> None:
    x = torch.randn(20, dtype=dtype, requires_grad=True)
    rows = gradlab.check(ExpZeroesGradData.apply, [x], reference=torch.exp, name="z",
                         checks=["contract"], variants=False).rows
    assert [(r.status, r.hint) for r in rows if r.check == "contract"] == [
        ("fail", "inplace_grad_output")]
    twin = gradlab.check(bf.Exp.apply, [x.detach().clone().requires_grad_()],
                         reference=torch.exp, name="z", checks=["contract"], variants=False).rows
    assert [(r.status, r.hint) for r in twin if r.check == "contract"] == [("pass", "")]


class ClampsValuesAlreadyInRange(torch.autograd.Function):
    """x * w with w clamped to [0, inf) in place first; BROKEN as a hazard: the case's w is
    positive, so no value changes, but w's version counter moves, and every graph that saved
    w fails in backward (helper-19's tslearn writes its cost matrix so)."""

    clone = False

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        w = w.clone().clamp_(min=0) if cls.clone else w.clamp_(min=0)
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return g * w, g * x


class ClampsACopy(ClampsValuesAlreadyInRange):
    clone = True


def test_an_in_place_write_that_changes_no_value_still_fails_the_contract() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.rand(3, 4, generator=gen, dtype=torch.float64).add(0.1).requires_grad_()
    r = gradlab.check(ClampsValuesAlreadyInRange, [x, w], reference=torch.mul)
    (row,) = [x for x in r.rows if x.check == "contract" and x.variant == "base"]
    assert row.status == "fail" and row.hint == "inplace_input", message(row)
    assert gradlab.check(ClampsACopy, [x, w.detach()], reference=torch.mul).passed
    # the same write into an input that does not require grad: a warn (a state buffer's
    # update is written so by design)
    r = gradlab.check(ClampsValuesAlreadyInRange, [x, w.detach()], reference=torch.mul)
    (row,) = [x for x in r.rows if x.check == "contract" and x.variant == "base"]
    assert row.status == "warn" and row.hint == "inplace_buffer", message(row)


class CentredWithRunningMean(torch.autograd.Function):
    """(x - mean(x, 0)) * w, updating a running mean buffer in place as a batch norm does (torch's
    own SyncBatchNorm Function updates its running statistics so, without mark_dirty): right
    by design, as long as the buffer does not require grad; its wrong twin subtracts the
    running mean in place from x itself."""

    into_input = False

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor, w: torch.Tensor,
                running: torch.Tensor) -> torch.Tensor:
        mu = x.mean(0)
        running.mul_(0.9).add_(0.1 * mu)
        xc = x.sub_(mu) if cls.into_input else x - mu
        ctx.save_for_backward(xc, w)
        return xc * w

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        xc, w = ctx.saved_tensors
        gx = g * w
        return gx - gx.mean(0), (g * xc).sum(0), None


class CentredInPlace(CentredWithRunningMean):
    into_input = True


def centred_ref(x: torch.Tensor, w: torch.Tensor, running: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(0)) * w


def test_a_running_statistics_buffer_updated_in_place_is_no_failure() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(6, 4, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.rand(4, generator=gen, dtype=torch.float64).requires_grad_()
    running = torch.zeros(4, dtype=torch.float64)
    r = gradlab.check(CentredWithRunningMean, [x, w, running], reference=centred_ref,
                      checks=["forward", "gradient", "contract"])
    assert {(x.check, x.status, x.hint) for x in r.rows if x.status != "pass"} == {
        ("contract", "warn", "inplace_buffer")}, [message(x) for x in r.rows]
    r = gradlab.check(CentredInPlace, [x, w, running], reference=centred_ref,
                      checks=["forward", "gradient", "contract"])
    assert ("contract", "fail", "inplace_input") in {(x.check, x.status, x.hint)
                                                     for x in r.rows}, [message(x) for x in r.rows]


class ExpViewOfKeptBuffer(torch.autograd.Function):
    """exp(x) returned as a slice of a buffer kept on ctx (difftopk's LogSumExp_F keeps the
    coefficients its output slices): the output is a view made inside the Function, and
    autograd refuses any in-place update of it, so what backward reads cannot change."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        buf = torch.cat([x.exp(), torch.ones_like(x)], -1)
        ctx.buf = buf.detach()
        return buf[..., :x.shape[-1]]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * ctx.buf[..., :g.shape[-1]]


def test_a_kept_buffer_whose_view_is_the_output_is_no_hazard() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    out = ExpViewOfKeptBuffer.apply(x)
    with pytest.raises(RuntimeError, match="view"):
        out.mul_(2)  # the hazard ctx_output_detached names cannot happen
    report = gradlab.check(ExpViewOfKeptBuffer, [x], reference=torch.exp)
    assert not [r for r in report.rows if r.hint == "ctx_output_detached"]
    assert report.passed, [(r.check, r.variant, r.status, r.hint) for r in report.rows
                           if r.status != "pass"]


class ScaleSetsGrad(torch.autograd.Function):
    """x * s; BROKEN when `sets_grad`: backward also assigns x.grad itself ("mimicking" the
    engine, as memcnn's checkpoint does), so loss.backward() leaves twice the gradient."""

    sets_grad = True

    @classmethod
    def forward(cls, ctx: Any, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, s)
        ctx.inputs = (x,) if cls.sets_grad else ()
        return x * s

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, s = ctx.saved_tensors
        gx = g * s
        for t in ctx.inputs:
            t.grad = gx.detach().clone()
        return gx, g * x


class ScaleReturnsGrad(ScaleSetsGrad):
    sets_grad = False


def test_a_backward_that_sets_an_inputs_grad_itself_fails_the_contract() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
    s = torch.rand(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
    # what a user sees: a leaf's .grad twice the gradient after loss.backward()
    ScaleSetsGrad.apply(x, s).sum().backward()
    assert torch.allclose(x.grad, 2 * s)
    x.grad = s.grad = None
    r = gradlab.check(ScaleSetsGrad, [x, s], reference=torch.mul)
    (row,) = [x for x in r.rows if x.check == "contract" and x.variant == "base"]
    assert row.status == "fail" and row.hint == "grad_side_effect", message(row)
    assert "twice the gradient" in message(row)
    assert x.grad is None  # the caller's tensors as they were given
    assert gradlab.check(ScaleReturnsGrad, [x, s], reference=torch.mul).passed


class DoubleFreesInput(torch.autograd.Function):
    """2x, freeing its input's memory after forward (memcnn's keep_input=False saves memory
    so; its backward needs only the output): right, and a caller reading x afterwards
    segfaults."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = 2 * x
        x.untyped_storage().resize_(0)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return 2 * g


def test_a_forward_that_frees_its_inputs_memory_is_checked_on_copies() -> None:
    # cal8: memcnn's default invertible checkpoint killed the process (a segfault reading the
    # freed input after forward) and every later check with it
    x = torch.rand(3, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    r = gradlab.check(DoubleFreesInput, [x.requires_grad_()], reference=lambda t: 2 * t)
    assert {(x.check, x.status, x.hint) for x in r.rows if x.status != "pass"} == {
        ("contract", "warn", "input_freed")}, [message(x) for x in r.rows]
    assert any(x.check == "jacobian" and x.status == "pass" for x in r.rows)
    assert x.untyped_storage().nbytes() == x.numel() * 8  # the caller's tensor kept its memory


class TwiceOnceOnly(torch.autograd.Function):
    """2x whose backward refuses torch.autograd.grad (as torch.utils.checkpoint's reentrant
    variant, memcnn's checkpoint do) and runs once per graph: a second backward raises."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.runs = 0
        return 2 * x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError("not compatible with .grad(), use .backward()")
        ctx.runs += 1
        if ctx.runs > 1:
            raise RuntimeError("backward ran more than once on this graph")
        return 2 * g


def test_a_second_backward_that_raises_is_named_by_its_own_error() -> None:
    # cal8 (memcnn): the re-entrance row quoted autograd.grad's refusal, not the error of the
    # .backward() that the Function supports
    x = torch.rand(3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    r = gradlab.check(TwiceOnceOnly, [x.requires_grad_()], reference=lambda t: 2 * t,
                      checks=["gradient", "contract"])
    (row,) = [x for x in r.rows if x.check == "contract" and x.variant == "base"]
    assert row.status == "fail" and row.hint == "not_reentrant", message(row)
    assert "more than once" in message(row) and "raises the second time" in message(row)

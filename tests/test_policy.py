"""What turns red (gradlab.checks.diagnosis.policy, issue 28 items 6 and 7): the one table every
check asks, the README and docs tables rendered from it, and the levels it gives, each beside a
Function that must be flagged and a correct twin that must pass."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradlab
from gradlab.checks.diagnosis import hintcodes, policy
from gradlab.model import CAPABILITIES
from gradlab.render.words import HINTS, REASONS, message
from gradlab.results import STATUSES, WARN
from gradlab.results.capabilities import NO, YES, capability_matrix

ROOT = Path(__file__).resolve().parent.parent
CHECKS_DIR = ROOT / "gradlab" / "checks"


# -- the table and its renderings ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "short"), [("README.md", True), ("docs/verdicts.md", False)])
def test_the_rendered_tables_are_the_policy(name: str, short: bool) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    assert policy.rendered(text, short=short) == text, (
        f"{name} is out of date: run `python scripts/policy_tables.py`")


def test_every_level_is_a_row_status_and_every_capability_has_a_level() -> None:
    assert set(policy.ROW_STATUS.values()) <= set(STATUSES)
    assert set(policy.MISSING) == set(CAPABILITIES)
    assert {r.level for r in policy.RULES} <= set(policy.LEVELS)


def test_every_cause_is_a_code_gradlab_words() -> None:
    codes = {c for cs in hintcodes.CODES.values() for c in cs}
    for r in policy.RULES:
        if r.cause != policy.ANY:
            assert r.cause in codes or r.cause in REASONS, r
            # a failing or warning row's hint says the fix; a cause kept as the row's reason
            # beside a more specific hint (scale_limited) says it there
            assert r.cause in HINTS or r.cause in REASONS, r


def test_the_policy_module_is_plain_data() -> None:
    """No torch, no other gradlab module: it moves with checks/'s restructuring (issue 31)."""
    tree = ast.parse((CHECKS_DIR / "diagnosis" / "policy.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "collections", "dataclasses"}, imported


def decides_inline(source: str) -> bool:
    """Whether a module's source names a fail or warn row status itself (the words, or FAIL or
    WARN taken from gradlab.results) instead of asking the policy."""
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(
                "gradlab.results") and {a.name for a in n.names} & {"FAIL", "WARN"}:
            return True
        if isinstance(n, ast.Constant) and n.value in ("fail", "warn"):
            return True
    return False


def test_checks_ask_the_policy_for_fail_and_warn() -> None:
    """Every module of checks/ but the policy asks it (issue 31 converted the last ones:
    compare, numerical, variants and lowprec's criterion, now policy.criterion_status)."""
    inline = {path.relative_to(CHECKS_DIR).as_posix() for path in CHECKS_DIR.rglob("*.py")
              if path.name != "policy.py" and decides_inline(path.read_text(encoding="utf-8"))}
    assert not inline, f"decide fail/warn inline instead of asking policy: {sorted(inline)}"


def test_an_inline_decision_is_found() -> None:
    assert decides_inline('ctx.row(variant, "forward", "fail")')
    assert decides_inline("from gradlab.results import FAIL, PASS")
    assert decides_inline("def f() -> None:\n    from gradlab.results.status import WARN\n")
    assert not decides_inline("from gradlab.results import PASS\nstatus = policy.wrong(check)")


def test_levels() -> None:
    assert policy.missing_status("forward_ad") == "pass"
    assert policy.missing_status("forward_ad", required=True) == "fail"
    assert policy.missing_status("autocast") == "warn"
    assert policy.missing_status("autocast", strict=True) == "fail"
    assert policy.missing_status("vmap", strict=True) == "pass"
    assert policy.status("gradient", "constant_factor") == "fail"
    assert policy.status("contract", "output_not_differentiable") == "warn"
    assert policy.wrong("forward") == policy.wrong("jacobian") == "fail"
    assert policy.criterion_status(2.0, 1.0, within_table=False) == "fail"
    assert policy.criterion_status(2.0, 1.0, within_table=True) == "pass"
    assert policy.criterion_status(1.0, 1.0, within_table=False) == "pass"
    assert policy.precision_status("gradient", seen=False) == "warn"
    assert policy.precision_status("gradient", seen=True) == "pass"


# -- missing capabilities are information (item 6) ----------------------------------------------


def x34(seed: int = 0) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(3, 4, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()


class ExpItemBackward(Function):
    """A correct classic Function with none of the extras: no jvp, no vmap rule (no
    setup_context), and a backward vmap refuses (.item())."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        scale = 2.0 if g.abs().sum().item() < 0 else 1.0  # always 1: a branch on the data
        return g * y * scale


def warn_rows(report: Any) -> list[tuple[str, str, str]]:
    return [(r.variant, r.check, r.hint) for r in report.rows if r.status == WARN]


def test_a_correct_function_without_extras_has_zero_warn_rows() -> None:
    r = gradlab.check(ExpItemBackward, [x34()], reference=torch.exp)
    assert r.passed, [(f.check, f.hint) for f in r.failures]
    assert warn_rows(r) == []
    (line,) = capability_matrix(r.rows)
    assert {c: line.cell(c).state for c in ("first_order", "forward_ad", "vmap",
                                            "batched_grad")} == {
        "first_order": YES, "forward_ad": NO, "vmap": NO, "batched_grad": NO}


@pytest.mark.parametrize(("capability", "check"), [
    ("forward_ad", "forward_ad"), ("vmap", "capabilities"), ("batched_grad", "capabilities")])
def test_requires_makes_a_missing_capability_a_failure(capability: str, check: str) -> None:
    r = gradlab.check(ExpItemBackward, [x34()], reference=torch.exp, requires=[capability])
    assert not r.passed
    assert [(f.check, f.hint) for f in r.failures] == [(check, f"{capability}_missing")]


# -- second order stays a real check (item 6, and the fix named) --------------------------------

EPS = 1e-5


def layer_norm_ref(x: Tensor) -> Tensor:
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=EPS)


def _stats(x: Tensor) -> tuple[Tensor, Tensor]:
    mu = x.mean(-1, keepdim=True)
    return mu, (x.var(-1, unbiased=False, keepdim=True) + EPS).rsqrt()


def _backward(g: Tensor, xhat: Tensor, rstd: Tensor) -> Tensor:
    return rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))


class FusedLayerNorm(Function):
    """A fused LayerNorm: forward computes the statistics (a kernel's) and saves them; backward
    uses them as constants.  First order right, double backward silently wrong."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        mu, rstd = _stats(x)
        xhat = (x - mu) * rstd
        ctx.save_for_backward(xhat, rstd)
        return xhat

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        xhat, rstd = ctx.saved_tensors
        return _backward(g, xhat, rstd)


class FusedLayerNormOnce(FusedLayerNorm):
    """The fix the message names: the same backward, once_differentiable."""

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Tensor) -> Tensor:
        xhat, rstd = ctx.saved_tensors
        return _backward(g, xhat, rstd)


class LayerNormDifferentiable(Function):
    """The other fix: backward recomputes the statistics from the saved input."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        mu, rstd = _stats(x)
        return (x - mu) * rstd

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        mu, rstd = _stats(x)
        return _backward(g, (x - mu) * rstd, rstd)


def x35() -> Tensor:
    gen = torch.Generator().manual_seed(3)
    return torch.randn(3, 5, generator=gen, dtype=torch.float64).requires_grad_()


def test_a_silently_wrong_double_backward_fails_naming_once_differentiable() -> None:
    r = gradlab.check(FusedLayerNorm, [x35()], reference=layer_norm_ref)
    assert [(f.check, f.hint) for f in r.failures] == [("second_order", "second_order_only")]
    words = message(r.failures[0])
    assert "@torch.autograd.function.once_differentiable" in words
    assert "make backward differentiable" in words


@pytest.mark.parametrize(("fn", "second"), [(FusedLayerNormOnce, NO),
                                            (LayerNormDifferentiable, YES)])
def test_either_fix_passes_without_a_warning(fn: Any, second: str) -> None:
    r = gradlab.check(fn, [x35()], reference=layer_norm_ref)
    assert r.passed, [(f.check, f.hint) for f in r.failures]
    assert warn_rows(r) == []
    (line,) = capability_matrix(r.rows)
    assert line.cell("second_order").state == second

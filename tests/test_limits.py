"""The limits of an isolated run hold for the case: `--timeout` bounds all of a case's items
together, a step that hangs is stopped once, in the step that hangs (named on its row), and the
rows made before are kept."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from conftest import DATA

import gradlab
from gradlab.checks.numeric import numerical
from gradlab.checks.run import driver
from gradlab.checks.run.options import Options
from gradlab.results import CheckRow
from gradlab.spec import resolve

LIMITS = DATA / "limits"
#: far more than the correct steps of these tiny cases take in a primed worker, even loaded.
TIMEOUT_S = 4.0


@pytest.fixture(scope="module")
def hung_rows() -> Iterator[list[CheckRow]]:
    sys.path.insert(0, str(LIMITS))
    try:
        targets = resolve(str(LIMITS / "hangs.yaml"))
        yield driver.run(targets, Options(isolate=True, timeout=TIMEOUT_S)).rows
    finally:
        sys.path.remove(str(LIMITS))


def test_a_hung_backward_is_stopped_once_per_case_and_named(hung_rows: list[CheckRow]) -> None:
    rows = [r for r in hung_rows if r.op == "HangsInBackward"]
    stopped = [r for r in rows if r.status == "error"]
    assert len(stopped) == 1, rows  # not once per item: the case's timeout is spent
    (row,) = stopped
    assert (row.check, row.variant, row.hint, row.reason) == (
        "gradient", "base", "timeout", "time_limit")
    assert "in the Function's backward" in row.note
    # the case's other items (float32, the jacobian) never started: skips that say why
    rest = [r for r in rows if r is not row]
    assert rest and all(r.status == "skip" and r.reason == "timeout_spent" for r in rest), rest
    assert not any(r.declared for r in rest)  # unverified: the run cannot pass


def test_rows_made_before_a_limit_are_kept(hung_rows: list[CheckRow]) -> None:
    rows = {r.check: r for r in hung_rows if r.op == "HangsInDoubleBackward"}
    assert rows["jacobian"].status == "pass"  # measured before the hang: kept
    stopped = rows["second_order"]
    assert (stopped.status, stopped.hint, stopped.reason) == ("error", "timeout", "time_limit")
    assert "in the Function's backward" in stopped.note
    assert "1 rows made before are kept" in stopped.note


@pytest.mark.parametrize("max_memory", [32 << 20, 4 << 30])
def test_dense_jacobians_past_the_memory_bound_run_probes(max_memory: int) -> None:
    # 2000 inputs x 2000 outputs x 32 bytes = 122 MiB of dense Jacobians: over a quarter of
    # 32 MiB, within a quarter of 4 GiB
    sys.path.insert(0, str(LIMITS))
    try:
        targets = resolve(str(LIMITS / "wide.yaml"))
        rows = driver.run(targets, Options(mode="dense", max_memory=max_memory)).rows
    finally:
        sys.path.remove(str(LIMITS))
    (row,) = rows
    assert row.status == "pass"
    if max_memory < numerical.DENSE_BYTES_PER_ENTRY * 2000 * 2000 / numerical.DENSE_MEMORY_FRACTION:
        assert row.mode == "fast"
        assert "dense Jacobians would need 122 MiB, over 8 MiB" in row.note
    else:
        assert row.mode == "dense" and not row.note


def test_the_api_isolated_stops_a_hung_backward_and_keeps_the_rows() -> None:
    import torch

    sys.path.insert(0, str(LIMITS))
    try:
        import limit_functions as lf

        x = torch.randn(3, dtype=torch.float64, requires_grad=True)
        with pytest.raises(gradlab.CheckLimitError) as stopped:
            gradlab.check(lf.HangsInDoubleBackward, [x], reference=lf.square,
                          checks=["forward", "gradient", "jacobian", "second_order"],
                          variants=False, timeout=TIMEOUT_S, isolate=True)
        passed = gradlab.check(lf.Square, [x], reference=lf.square, variants=False,
                               checks=["forward", "gradient", "jacobian"], isolate=True)
    finally:
        sys.path.remove(str(LIMITS))
    rows = stopped.value.report.rows
    assert "in check second_order" in str(stopped.value)
    assert "the 3 rows measured before" in str(stopped.value)
    assert {r.check: r.status for r in rows[:-1]} == {
        "forward": "pass", "gradient": "pass", "jacobian": "pass"}
    assert (rows[-1].check, rows[-1].reason) == ("second_order", "time_limit")
    assert "in the Function's backward" in rows[-1].note
    assert passed.passed


def test_the_api_refuses_to_isolate_what_cannot_pickle() -> None:
    import torch

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="isolate=True: the Function, its reference"):
        gradlab.check(lambda t: t * 2, [x], reference=lambda t: t * 2, isolate=True)

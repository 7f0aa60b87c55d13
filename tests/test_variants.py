"""The variants really feed the Function what they claim, and undefined output gradients."""

from typing import Any

import torch
from torch import Tensor

import gradlab
from gradlab.render.words import message


class Recorder(torch.autograd.Function):
    """y = 2x that records the strides of what it is given, forward and backward."""

    seen_inputs: list[tuple[int, ...]] = []  # noqa: RUF012 (test recorder)
    seen_grads: list[tuple[int, ...]] = []  # noqa: RUF012

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        Recorder.seen_inputs.append(tuple(x.stride()))
        return 2 * x

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        Recorder.seen_grads.append(tuple(g.stride()))
        return 2 * g


def test_variants_feed_noncontiguous_expanded_inputs_and_stride0_grad_outputs() -> None:
    Recorder.seen_inputs.clear()
    Recorder.seen_grads.clear()
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(Recorder, [x], reference=lambda x: 2 * x)
    assert report.passed
    variants = {r.variant for r in report.rows}
    assert {"noncontiguous[0]", "transposed[0]", "expanded[0]", "grad_output:noncontiguous",
            "grad_output:transposed", "grad_output:expanded"} <= variants
    assert (4, 1) in Recorder.seen_inputs  # contiguous base
    assert (8, 2) in Recorder.seen_inputs  # every other element of a wider buffer
    assert (1, 3) in Recorder.seen_inputs  # transposed memory
    assert (0, 1) in Recorder.seen_inputs  # stride-0 expanded
    assert (0, 0) in Recorder.seen_grads   # what .sum() hands backward


def test_grad_output_layouts_an_output_cannot_take_are_not_run_again_as_the_base() -> None:
    # a 1-d output has no transposed grad_output (it would be a plain copy: the base run
    # again); a one-element output has no stride-0 one either
    for shape, absent in (((3, 4), set()), ((5,), {"grad_output:transposed"}),
                          ((1,), {"grad_output:transposed", "grad_output:expanded"})):
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        report = gradlab.check(Recorder, [x], reference=lambda x: 2 * x,
                               variants=["grad_output"])
        assert report.passed
        run = {r.variant for r in report.rows if r.variant.startswith("grad_output")}
        every = {"grad_output:noncontiguous", "grad_output:transposed", "grad_output:expanded"}
        assert run == every - absent, (shape, run)


class TwoOutputs(torch.autograd.Function):
    """(2x, x**2) that does not materialise undefined grads, and handles None correctly."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> tuple[Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return 2 * x, x * x

    @staticmethod
    def backward(ctx: Any, g1: Tensor | None, g2: Tensor | None) -> Tensor:
        (x,) = ctx.saved_tensors
        out = torch.zeros_like(x)
        if g1 is not None:
            out = out + 2 * g1
        if g2 is not None:
            out = out + 2 * x * g2
        return out


class TwoOutputsAssumesGrads(TwoOutputs):
    """The same, but backward assumes every output gradient is defined."""

    @staticmethod
    def backward(ctx: Any, g1: Tensor | None, g2: Tensor | None) -> Tensor:
        (x,) = ctx.saved_tensors
        return 2 * g1 + 2 * x * g2  # type: ignore[operator]


def two_outputs_ref(x: Tensor) -> tuple[Tensor, Tensor]:
    return 2 * x, x * x


def test_undefined_output_gradient_flagged_and_correct_twin_passes() -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    good = gradlab.check(TwoOutputs, [x], reference=two_outputs_ref)
    assert good.passed, [(r.variant, r.check, message(r)) for r in good.failures]
    assert {"undefined_grad[out0]", "undefined_grad[out1]"} <= {r.variant for r in good.rows}
    bad = gradlab.check(TwoOutputsAssumesGrads, [x], reference=two_outputs_ref)
    assert not bad.passed
    flagged = [r for r in bad.failures if r.variant.startswith("undefined_grad")]
    assert flagged and all(r.hint == "undefined_grad" for r in flagged)
    assert not [r for r in bad.failures if r.variant == "base"]


def test_variant_families_can_be_switched_off_in_a_spec() -> None:
    from gradlab.checks.run.driver import run
    from gradlab.checks.run.options import Options
    from gradlab.spec import parse_document

    (t,) = parse_document({"op": "exp", "variants": {"expanded": False, "grad_output": False}})
    rows = run([t], Options(dtypes=("float64",))).rows
    variants = {r.variant for r in rows}
    assert not any(v.startswith(("expanded", "grad_output")) for v in variants)
    assert any(v.startswith("noncontiguous") for v in variants)


def test_a_stride_0_grad_output_reuses_the_references_graph() -> None:
    calls = [0]

    def counted_exp(x: Tensor) -> Tensor:
        calls[0] += 1
        return torch.exp(x)

    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(torch.exp, [x], reference=counted_exp, name="e",
                           checks=["forward", "gradient"], variants=["grad_output"])
    names = {r.variant for r in report.rows}
    assert {"grad_output:expanded", "grad_output:transposed"} <= names
    assert all(r.status == "pass" for r in report.rows), [message(r) for r in report.rows]
    assert calls[0] == 1  # the base run only: every grad_output runs backward on its graph

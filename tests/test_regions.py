"""Hints that name the input region (issue 39, part 3): where the wrong elements coincide with a
region of an input's values (one sign, zero, a range, a band of magnitudes, near-ties) or of
its positions (both ends of one dim: a 1-d signal's border), the finding says so with both
shares; a correct twin passes, and scattered wrong elements name no region."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradlab
from gradlab.checks.diagnosis import regions
from gradlab.checks.diagnosis.patterns import find_pattern
from gradlab.checks.diagnosis.regions import value_region
from gradlab.render.words import message, pattern_words
from gradlab.results import Pattern, Report


def example(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64)).requires_grad_()


def only_failure(report: Report, check: str = "gradient"):
    rows = [r for r in report.rows if r.check == check and r.variant == "base"]
    assert len(rows) == 1
    return rows[0]


def leaky(slope: float) -> type[torch.autograd.Function]:
    """leaky_relu(x, 0.1) whose backward uses `slope` for x < 0 (0.1 is right)."""

    class LeakyRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return F.leaky_relu(x, 0.1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.where(x > 0, 1.0, slope)

    return LeakyRelu


LeakyRelu = leaky(0.1)
LeakyReluWrongSlope = leaky(0.182)  # every x < 0 wrong, every x > 0 right


def leaky_reference(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, 0.1)


def test_a_sign_only_bug_names_the_sign_with_both_shares() -> None:
    twin = gradlab.check(LeakyRelu, [example(6, 10)], reference=leaky_reference)
    assert twin.passed, [message(r) for r in twin.failures]
    r = gradlab.check(LeakyReluWrongSlope, [example(6, 10)], reference=leaky_reference,
                      variants=False)
    row = only_failure(r)
    assert row.status == "fail" and row.hint == "sign_region", message(row)
    assert "wrong only where input 0 < 0: 100% of the wrong elements, 0% of the right ones" in \
        message(row)


def hardtanh(passes_outside: bool) -> type[torch.autograd.Function]:
    """clamp(x, -1, 1); `passes_outside` lets the gradient through where |x| > 1 (a bug)."""

    class HardTanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(-1, 1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x.abs() <= 1) | passes_outside)

    return HardTanh


HardTanh, HardTanhLeaks = hardtanh(False), hardtanh(True)


def test_a_threshold_bug_names_the_magnitude_band() -> None:
    x = example(8, 12) * 1.5
    x = x.detach().requires_grad_()
    twin = gradlab.check(HardTanh, [x], reference=lambda t: t.clamp(-1, 1), variants=False)
    assert twin.passed, [message(r) for r in twin.failures]
    row = only_failure(gradlab.check(HardTanhLeaks, [x], reference=lambda t: t.clamp(-1, 1),
                                     variants=False))
    assert row.hint == "magnitude_band", message(row)
    p = row.findings[0].pattern
    assert p is not None and p.kind == "band" and p.input == 0 and p.hi is None
    assert 1.0 < p.lo < 1.1  # the smallest |x| above the threshold
    assert "wrong only where |input 0| >= 1" in message(row)


def smooth(edge_bug: bool) -> type[torch.autograd.Function]:
    """A 3-tap moving average with zero padding over the last dim; `edge_bug` gives the two end
    elements' gradient the wrong weight (boundary handling)."""

    class Smooth1d(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return smooth_reference(x.detach())

        @staticmethod
        def backward(ctx, g):
            gi = smooth_reference(g)  # the filter is symmetric: its adjoint is itself
            if edge_bug:
                gi = gi.clone()
                gi[..., 0] *= 1.5
                gi[..., -1] *= 1.5
            return gi

    return Smooth1d


def smooth_reference(x: torch.Tensor) -> torch.Tensor:
    k = torch.full((1, 1, 3), 1 / 3, dtype=x.dtype)
    return F.conv1d(x.reshape(-1, 1, x.shape[-1]), k, padding=1).reshape(x.shape)


Smooth1d, Smooth1dEdges = smooth(False), smooth(True)


def test_a_border_only_bug_of_a_1d_signal_names_both_ends() -> None:
    x = example(4, 40)
    twin = gradlab.check(Smooth1d, [x], reference=smooth_reference, variants=False)
    assert twin.passed, [message(r) for r in twin.failures]
    row = only_failure(gradlab.check(Smooth1dEdges, [x], reference=smooth_reference,
                                     variants=False))
    assert row.hint == "border_band", message(row)
    assert row.findings[0].pattern == Pattern("edges", dims=(1,), start=0, stop=1)
    assert "within 1 of both ends of dim 1" in message(row)


def test_one_end_only_stays_a_range() -> None:
    m = torch.zeros(4, 40, dtype=torch.bool)
    m[:, :2] = True
    assert find_pattern(m) == Pattern("slice", dims=(1,), start=0, stop=2)


def test_value_regions_unit() -> None:
    x = torch.randn(10, 10, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    # zero: planted zeros, exactly those wrong
    z = x.clone()
    z.view(-1)[::7] = 0
    p = value_region(z == 0, [z])
    assert p is not None and p.kind == "zero" and p.right_share == 0
    # a range of values: wrong where x in a middle band (a branch threshold at both sides)
    m = (x > 0.2) & (x < 1.5)
    p = value_region(m, [x])
    assert p is not None and p.kind == "range" and 0.2 < (p.lo or 0) and (p.hi or 9) < 1.5
    # a broadcast input: a bias of shape [10] laid out along the rows' last dim
    b = torch.randn(10, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    p = value_region((b < 0).expand(10, 10), [b])
    assert p is not None and (p.kind, p.input) == ("negative", 0)
    # the second argument is the one that names it
    p = value_region(x > 0, [b, x])
    assert p is not None and (p.kind, p.input) == ("positive", 1)
    # near-ties: values repeated once each (the ties variant's pairing) wrong where they tie
    t = torch.cat([x.view(-1)[:20], x.view(-1)[:20], x.view(-1)[20:80]])
    tied = torch.zeros(100, dtype=torch.bool)
    tied[:40] = True
    p = value_region(tied, [t])
    assert p is not None and p.kind == "ties"
    assert "(nearly) tie" in pattern_words(p)


def test_scattered_wrong_elements_name_no_region() -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(12, 12, generator=gen, dtype=torch.float64)
    for seed in range(20):
        m = torch.rand(12, 12, generator=torch.Generator().manual_seed(seed)) < 0.1
        assert value_region(m, [x]) is None, seed
    # a few wrong elements lie in some band by chance: not named
    m = torch.zeros(12, 12, dtype=torch.bool)
    m.view(-1)[[3, 50, 97]] = True
    assert value_region(m, [x]) is None
    # an integer or non-finite input is no region's source
    assert value_region(x > 0, [torch.arange(144).view(12, 12)]) is None


def test_region_chance_edges() -> None:
    # 8 wrong filling a region of 8 of 64 (f = 1/8): exact 8 ** -8 = 6e-8, named
    assert regions.region_holds(8, 8, 64)
    # 2 wrong filling a region of 4 of 64: (1/16) ** 2 = 3.9e-3 > 1e-3, chance
    assert not regions.region_holds(2, 4, 64)
    # fitted bounds are judged less strictly: 4 of 8 in 64 exact 2.4e-4 holds, fitted 7.8e-3
    assert regions.region_holds(4, 8, 64) and not regions.region_holds(4, 8, 64, fitted=True)
    # a region mostly right is not "wrong only where": density below REGION_DENSITY
    assert not regions.region_holds(10, 40, 400)

"""`--explore` (issue 39, part 2): a seeded, budgeted search over the inputs a caller can produce
(sizes, empty batches, signs, zeros, ties, tiny and large values) that shrinks a failure to its
smallest input and prints it as a spec case; each broken Function beside a correct twin, and
the conditions the search cannot judge (the reference's domain, a kink) never fail."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from typer.testing import CliRunner

import gradlab
from gradlab.checks.families import explore as ex
from gradlab.cli import app
from gradlab.cli.app import DEFAULT_EXPLORE_S, explore_argv
from gradlab.render.words import message
from gradlab.results import CheckRow, Report

BUDGET = 3.0


def explore_row(report: Report) -> CheckRow:
    (row,) = [r for r in report.rows if r.check == "explore"]
    return row


def checked(fn: type[torch.autograd.Function], ref, *shapes: tuple[int, ...],
            low: float = -1.0) -> Report:
    gen = torch.Generator().manual_seed(0)
    args = [(torch.rand(s, generator=gen, dtype=torch.float64) * (1 - low) + low)
            .requires_grad_() for s in shapes]
    return gradlab.check(fn, args, reference=ref, explore=BUDGET, checks=["forward", "gradient",
                                                                           "explore"])


def column_sum(alone_wrong: bool = False, empty_crash: bool = False
               ) -> type[torch.autograd.Function]:
    """x.sum(0); alone_wrong: the gradient doubled for a batch of one; empty_crash: backward
    reads the first row's gradient (an IndexError for an empty batch)."""

    class ColumnSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.n = x.shape[0]
            return x.sum(0)

        @staticmethod
        def backward(ctx, g):
            scale = 2.0 if alone_wrong and ctx.n == 1 else 1.0
            out = g.expand(ctx.n, *g.shape) * scale
            if empty_crash:
                _ = out[0]  # the first row, assumed to exist
            return out

    return ColumnSum


def test_a_bug_at_a_batch_of_one_is_found_and_shrunk_to_a_spec_case() -> None:
    twin = explore_row(checked(column_sum(), lambda x: x.sum(0), (8, 5)))
    assert twin.status == "pass", message(twin)
    assert "explored" in message(twin) and "inputs in" in message(twin)
    row = explore_row(checked(column_sum(alone_wrong=True), lambda x: x.sum(0), (8, 5)))
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)
    case = row.findings[0].want
    # shrunk to the smallest failing input: a batch of one (and the other dim as small)
    assert case["set"][0]["shape"] == [1, 1]
    assert "- {name: explored, set: {0: {shape: [1, 1]}}}" in message(row)


def test_a_backward_that_crashes_only_on_an_empty_batch_fails() -> None:
    # forward accepted the empty batch and the reference differentiates it: certain
    row = explore_row(checked(column_sum(empty_crash=True), lambda x: x.sum(0), (6, 4)))
    assert row.status == "fail" and row.hint == "explored_empty", message(row)
    assert row.findings[0].want["set"][0]["shape"][0] == 0
    assert "IndexError" in row.note
    # a failure at a non-empty input wins over the empty one (searched on past it)
    row = explore_row(checked(column_sum(alone_wrong=True, empty_crash=True),
                              lambda x: x.sum(0), (6, 4)))
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)


def test_a_backward_that_raises_only_at_other_sizes_warns() -> None:
    # forward accepting a size is evidence, not proof, that the Function supports it
    class Rows16(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g.reshape(-1, 16).reshape(g.shape)  # assumes a multiple of 16

    row = explore_row(checked(Rows16, lambda x: 2 * x, (4, 8)))
    assert row.status == "warn" and row.hint == "explored_reshaped", message(row)
    assert "RuntimeError" in row.note


def tile16(drop_tail: bool) -> type[torch.autograd.Function]:
    """2 * x; drop_tail: backward computes one 16-wide block per row (elements past 16 get
    no gradient: a launch of one block where cdiv(n, 16) are needed)."""

    class Tiled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            out = 2 * g
            if drop_tail:
                out = out.clone()
                out[..., 16:] = 0
            return out

    return Tiled


def test_a_bug_past_the_case_sizes_is_found_and_shrunk_within_twice_the_smallest() -> None:
    ref = lambda x: 2 * x  # noqa: E731
    twin = explore_row(checked(tile16(False), ref, (3, 8)))
    assert twin.status == "pass", message(twin)
    row = explore_row(checked(tile16(True), ref, (3, 8)))
    assert row.status == "fail", message(row)
    shape = row.findings[0].want["set"][0]["shape"]
    # the smallest failing input is [1, 17]: within 2x in every dim
    assert shape[1] >= 17 and shape[1] <= 34 and shape[0] <= 2, shape


class Sqrt(torch.autograd.Function):
    """sqrt with its right derivative: the reference's domain is x >= 0."""

    @staticmethod
    def forward(ctx, x):
        y = x.sqrt()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (2 * y)


class ReluOneAtZero(torch.autograd.Function):
    """relu whose derivative at 0 is 1 (torch's is 0): a convention at a kink, not a bug."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x >= 0)


def test_what_the_reference_cannot_judge_never_fails() -> None:
    # negative values leave sqrt's domain, tiny ones make it ill-conditioned: not judgeable
    row = explore_row(checked(Sqrt, torch.sqrt, (5, 4), low=0.1))
    assert row.status == "pass", message(row)
    assert "not judgeable" in message(row)
    # planted zeros sit on relu's kink: the derivative there is a convention
    row = explore_row(checked(ReluOneAtZero, torch.relu, (5, 4)))
    assert row.status == "pass", message(row)


def test_without_a_reference_explore_is_a_declared_skip() -> None:
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    row = explore_row(gradlab.check(column_sum(), [x], explore=1.0,
                                    checks=["gradient", "explore"]))
    assert row.status == "skip" and row.declared and row.reason == "explore_no_reference"


def test_explore_is_opt_in() -> None:
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    r = gradlab.check(column_sum(), [x], reference=lambda x: x.sum(0), variants=False)
    assert not [row for row in r.rows if row.check == "explore"]


def test_the_search_is_budgeted_and_seeded() -> None:
    clock = iter(range(10**6))  # a fake clock: one second per reading
    calls: list[ex.Point] = []

    def judge(p: ex.Point) -> ex.Outcome:
        calls.append(p)
        return ex.Outcome("pass")

    base = ex.Point(((8, 8), (3, 3)), ((0, "drawn"),))
    s = ex.search(judge, base, budget=5, clock=lambda: float(next(clock)))
    assert s.tried == len(calls) <= 6 and s.failure is None
    # one factor at a time first: the first points move exactly one axis
    assert all(p.moved_axes() == 1 for p in calls)
    again: list[ex.Point] = []
    clock = iter(range(10**6))
    ex.search(lambda p: again.append(p) or ex.Outcome("pass"), base, budget=5,
              clock=lambda: float(next(clock)))
    assert again == calls


def test_cli_explore_budget_and_bad_value(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["check", "exp", "--explore", "abc", "--report-dir",
                              str(tmp_path)])
    assert bad.exit_code == 2
    assert "--explore: expected a positive number of seconds, got 'abc'" in bad.output


def test_explore_without_a_budget_takes_the_default() -> None:
    assert explore_argv(["check", "x.yaml", "--explore"]) == ["check", "x.yaml", "--explore",
                                                               f"{DEFAULT_EXPLORE_S:g}"]
    assert explore_argv(["check", "--explore", "--dtype", "double"])[1:3] == [
        "--explore", f"{DEFAULT_EXPLORE_S:g}"]
    assert explore_argv(["check", "--explore", "2.5", "x"]) == ["check", "--explore", "2.5", "x"]
    assert explore_argv(["check", "--explore", "specs/"])[2] == f"{DEFAULT_EXPLORE_S:g}"
    # another command's words (gradlab record -- CMD ...) are left as they are
    assert explore_argv(["record", "--out", "d", "--", "x", "--explore"]) == [
        "record", "--out", "d", "--", "x", "--explore"]


def test_cli_explore_says_what_it_explored(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["check", "mulconstant", "--explore", "1", "--check",
                                 "explore", "--dtype", "double", "--no-isolate",
                                 "--report-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "mulconstant/" in r.output and "explored" in r.output and " inputs in " in r.output


def test_the_bundled_conv2d_without_input_channels_matches_autograd() -> None:
    """What --explore found in a bundled op: with 0 input channels F.conv2d returns 0 output
    channels, and the bias gradient came back [0] for a [4] bias (backward raised)."""
    from gradlab.ops.conv2d import Conv2dFunction, conv2d_reference

    def grads(fn) -> list[torch.Tensor]:
        x = torch.randn(2, 0, 6, 6, dtype=torch.float64, requires_grad=True)
        w = torch.randn(4, 0, 3, 3, dtype=torch.float64, requires_grad=True)
        b = torch.randn(4, dtype=torch.float64, requires_grad=True)
        fn(x, w, b, 1, 1, 1, 1).sum().backward()
        return [t.grad for t in (x, w, b)]

    for got, want in zip(grads(Conv2dFunction.apply), grads(conv2d_reference), strict=True):
        torch.testing.assert_close(got, want)


def test_a_failure_only_on_shapes_that_disagree_warns() -> None:
    """x * y for equal shapes, whose backward reshapes y's gradient to y's shape: it raises
    only where y is made [n, 1] against x's [n, m] (the reference broadcasts)."""

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, (g * x).reshape(y.shape)  # no sum over broadcast dims

    row = explore_row(checked(Mul, lambda x, y: x * y, (3, 5), (3, 5)))
    assert row.status == "warn" and row.hint == "explored_broadcast", message(row)


def safe_tanh(floor: float, naive: bool = False) -> type[torch.autograd.Function]:
    """tanh whose derivative is floored at `floor` (a damping epsilon by design), or, naive,
    computed as 4 / (exp(x) + exp(-x))^2 (inf / inf: NaN past |x| ~ 355 in float64)."""

    class SafeTanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.tanh(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            if naive:
                return g * 4 / (torch.exp(x) + torch.exp(-x)) ** 2 / (
                    torch.exp(x) * torch.exp(-x))
            return g * (1 - torch.tanh(x) ** 2).clamp(min=floor)

    return SafeTanh


def test_a_damping_epsilon_at_rescaled_values_warns_and_a_nan_fails() -> None:
    row = explore_row(checked(safe_tanh(2e-6), torch.tanh, (4, 3)))
    assert row.status == "warn" and row.hint == "explored_scale", message(row)
    row = explore_row(checked(safe_tanh(0.0, naive=True), torch.tanh, (4, 3)))
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)


def test_an_int_argument_is_an_axis_and_its_value_goes_in_the_spec_case() -> None:
    class Scale(torch.autograd.Function):
        """x * n; backward uses max(n, 1): wrong only at n = 0."""

        @staticmethod
        def forward(ctx, x, n):
            ctx.n = n
            return x * n

        @staticmethod
        def backward(ctx, g):
            return g * max(ctx.n, 1), None

    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(Scale, [x, 3], reference=lambda x, n: x * n, explore=BUDGET,
                           checks=["forward", "gradient", "explore"])
    row = explore_row(report)
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)
    assert row.findings[0].want["set"][1] == 0
    assert "1: 0}" in message(row)


def test_one_dim_of_a_shared_size_shrinks_on_its_own() -> None:
    class StepMatmul(torch.autograd.Function):
        """x @ w whose w gradient keeps the first 4 rows' share only."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w.t(), x[:4].t() @ g[:4]

    # the batch (2) and the out-features (2) share a size: a batch of 5 fails, and the
    # out-features shrink back to 1 on their own
    row = explore_row(checked(StepMatmul, torch.matmul, (2, 3), (3, 2)))
    assert row.status == "fail", message(row)
    got = row.findings[0].want["set"]
    assert got[0]["shape"][0] == 5 and got[1]["shape"][1] == 1, got


class RowScan(torch.autograd.Function):
    """h[t] = a[t] * h[t-1] + x[t] along dim 1, row by row (a loop over the batch, which an
    empty batch skips whatever the lengths); backward multiplies by a, raising where a's and
    x's lengths differ."""

    @staticmethod
    def forward(ctx, a, x):
        ctx.save_for_backward(a)
        out = torch.zeros_like(x)
        for b in range(x.shape[0]):
            h = torch.zeros_like(x[b, 0])
            for t in range(x.shape[1]):
                h = a[b, t] * h + x[b, t]
                out[b, t] = h
        return out

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        gx = torch.zeros_like(g)
        carry = torch.zeros_like(g[:, 0])
        for t in reversed(range(g.shape[1])):
            carry = g[:, t] + carry * (a[:, t + 1] if t + 1 < a.shape[1] else 0)
            gx[:, t] = carry
        return None, gx * torch.ones_like(a)  # a's length against x's: raises where they differ


def row_scan_ref(a, x):
    h, out = torch.zeros_like(x[:, 0]), []
    for t in range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        out.append(h)
    return torch.stack(out, 1)


def test_an_empty_batch_of_shapes_the_reference_refuses_anyway_is_not_judged() -> None:
    # a [0, 2] against x [0, 5]: forward's loop runs no row and the output is empty, but the
    # reference refuses those lengths with rows too: no valid call, never a failure
    a = torch.rand(3, 4, dtype=torch.float64)
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(RowScan.apply, [a, x], reference=row_scan_ref,
                           checks=["forward", "gradient", "explore"], explore=BUDGET)
    row = explore_row(report)
    # (its forward accepts a batch of a against one of x that it does not broadcast: a warn)
    assert row.status != "fail" and row.hint != "explored_empty", message(row)


def edge_scale(index: torch.Tensor, w: torch.Tensor, n: int, detached: bool = False
               ) -> torch.Tensor:
    """Each edge's weight over the root of its source's in-degree (the weights into it):
    finite only where every source has an edge in.  detached: BROKEN, the degree is taken as
    a constant (no gradient through it)."""
    deg = w.new_zeros(n).index_add(0, index[1], w)
    deg = deg.detach() if detached else deg
    return w * deg[index[0]].rsqrt()


def test_an_index_tensor_shrinks_to_its_smallest_positions() -> None:
    # every leading block of these edges has a source with no edge in (the reference is
    # infinite there, not judgeable): only edges on one node shrink below the case's 4
    index = torch.tensor([[0, 0, 1, 2], [1, 2, 2, 0]])
    w = torch.rand(4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5
    report = gradlab.check(lambda i, x, n: edge_scale(i, x, n, detached=True),
                           [index, w.requires_grad_(), 3], reference=edge_scale,
                           checks=["explore"], explore=BUDGET)
    row = explore_row(report)
    assert row.status == "fail", message(row)
    case = row.findings[0].want["set"]
    assert case[0] == {"shape": [2, 1], "values": [[0], [0]]}, case
    assert case[1] == {"shape": [1]}, case
    twin = gradlab.check(edge_scale, [index, w, 3], reference=edge_scale, checks=["explore"],
                         explore=BUDGET)
    assert explore_row(twin).status == "pass", message(explore_row(twin))


def test_a_search_that_judged_nothing_is_a_skip_not_a_pass() -> None:
    def float32_only(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:  # a kernel built for float32 alone
            raise TypeError("float64 is not supported")
        return x * 2

    x = torch.rand(3, 4, dtype=torch.float32).requires_grad_()
    row = explore_row(gradlab.check(float32_only, [x], reference=lambda t: t * 2,
                                    checks=["explore"], explore=1.0))
    assert (row.status, row.declared, row.reason) == ("skip", True, "explore_nothing_judged")
    assert row.findings[0].got["refused"] == row.findings[0].got["tried"] > 0
    assert "not explored" in message(row)


def window_max(x: torch.Tensor, kernel: tuple[int, int], dilation: tuple[int, int],
               rows_dilated_twice: bool = False) -> torch.Tensor:
    """Max over dilated kernel windows of a 2-d x (stride 1); rows_dilated_twice: BROKEN,
    backward keeps an argmax only where it lies in the window rebuilt with dilation[0] for
    both dims (the bug catalogue's burn4466)."""
    out = F.max_pool2d(x[None, None], kernel, stride=1, dilation=dilation)[0, 0]
    if not rows_dilated_twice:
        return out
    wrong = (dilation[0], dilation[0])
    rebuilt = F.max_pool2d(x[None, None], kernel, stride=1, dilation=wrong)[0, 0]
    same = out.shape == rebuilt.shape
    keep = (out == rebuilt) if same else torch.zeros_like(out, dtype=torch.bool)
    return torch.where(keep, out, out.detach())


def test_a_kernel_setting_shrinks_with_the_input() -> None:
    # a dilation made non-square fails at the case's 2x2 kernel; the shrink makes the kernel
    # (1, 2) too, so that a single row fails
    x = torch.rand(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    report = gradlab.check(lambda x, k, d: window_max(x, k, d, rows_dilated_twice=True),
                           [x.requires_grad_(), (2, 2), (1, 1)], reference=window_max,
                           checks=["explore"], explore=BUDGET)
    row = explore_row(report)
    assert row.status == "fail", message(row)
    case = row.findings[0].want["set"]
    assert sorted(case[1]) == [1, 2] and case[0]["shape"][case[1].index(1)] <= 2, case
    twin = gradlab.check(window_max, [x, (2, 2), (1, 1)], reference=window_max,
                         checks=["explore"], explore=BUDGET)
    assert explore_row(twin).status == "pass", message(explore_row(twin))


def clipped_gather(x: torch.Tensor, idx: torch.Tensor, drop_clipped: bool = False
                   ) -> torch.Tensor:
    """x[clip(idx)]: positions past the end read the last element; drop_clipped: BROKEN,
    their gradient is dropped (backward keeps in-range positions only)."""
    clip = idx.clamp(0, x.shape[0] - 1)
    out = x[clip]
    if drop_clipped:
        out = torch.where(idx == clip, out, out.detach())
    return out


def test_an_index_past_a_clipped_end_shrinks_to_one_position() -> None:
    # only the last position (5) is past x's end; a leading block drops it, the largest
    # position kept for every element does not
    x = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    idx = torch.tensor([0, 1, 2, 5])
    report = gradlab.check(lambda x, i: clipped_gather(x, i, drop_clipped=True),
                           [x.requires_grad_(), idx], reference=clipped_gather,
                           checks=["explore"], explore=BUDGET)
    row = explore_row(report)
    assert row.status == "fail", message(row)
    case = row.findings[0].want["set"]
    assert case[1] == {"shape": [1], "values": [5]}, case
    twin = gradlab.check(clipped_gather, [x, idx], reference=clipped_gather,
                         checks=["explore"], explore=BUDGET)
    assert explore_row(twin).status == "pass", message(explore_row(twin))


def soft_threshold(x: torch.Tensor, threshold: float, on_output: bool = False) -> torch.Tensor:
    """softplus(x), linear above `threshold` (F.softplus's threshold); on_output: BROKEN,
    backward tests the threshold on the output (the bug catalogue's pt55587), which differs
    from the input's test only where softplus(x) > threshold >= x: at threshold 20 a band
    of 2e-9, at 0.05 every x below it."""
    out = F.softplus(x, 1.0, threshold)
    if not on_output:
        return out
    linear = out.detach() > threshold
    return torch.where(linear, x + (out - x).detach(), out)


def test_a_float_argument_is_an_axis_under_explore() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 2 - 1
    report = gradlab.check(lambda x, t: soft_threshold(x, t, on_output=True),
                           [x.requires_grad_(), 20.0], reference=soft_threshold,
                           checks=["forward", "gradient", "explore"], explore=BUDGET)
    assert all(r.status == "pass" for r in report.rows if r.check != "explore")
    row = explore_row(report)
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)
    assert row.findings[0].want["set"][1] == 0.05, row.findings[0].want
    twin = gradlab.check(soft_threshold, [x, 20.0], reference=soft_threshold,
                         checks=["explore"], explore=BUDGET)
    assert explore_row(twin).status == "pass", message(explore_row(twin))


class NewtonSqrt(torch.autograd.Function):
    """sqrt(x) by Newton steps until they move less than `tol` (a solver's tolerance, which
    the reference, torch.sqrt, does not read): at a tolerance of 1/1e-12 it stops at once."""

    @staticmethod
    def forward(ctx, x, tol):
        y = torch.ones_like(x)
        for _ in range(100):
            step = 0.5 * (y - x / y)
            y = y - step
            if float(step.abs().max()) < tol:
                break
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / (2 * y), None


def test_a_float_the_reference_does_not_read_is_not_judged() -> None:
    x = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5
    report = gradlab.check(NewtonSqrt, [x.requires_grad_(), 1e-12],
                           reference=lambda x, tol: x.sqrt(), checks=["explore"],
                           explore=BUDGET)
    row = explore_row(report)
    assert row.status == "pass", message(row)
    assert 1e12 in row.findings[0].got["settings"][1], row.findings[0].got


def grouped_matmul(x: torch.Tensor, w: torch.Tensor, groups: int,
                   first_group_only: bool = False) -> torch.Tensor:
    """x [N, C] times a block-diagonal weight: group g's channels of x by w[g*K:(g+1)*K]
    (w [G*K, C/G], as a grouped conv's weight); first_group_only: BROKEN, w's gradient
    takes every group's channels as the first group's (the bug catalogue's pt51430)."""
    c, k = x.shape[1] // groups, w.shape[0] // groups
    outs = []
    for g in range(groups):
        xs = x[:, (0 if first_group_only else g) * c:][:, :c]
        wg = w[g * k:(g + 1) * k]
        out = x[:, g * c:(g + 1) * c] @ wg.detach().T
        outs.append(out + (xs @ wg.T - (xs @ wg.T).detach()))
    if x.shape[1] != c * groups or w.shape[0] != k * groups or w.shape[1] != c:
        raise ValueError("channels must split into groups")
    return torch.cat(outs, 1)


def test_a_setting_the_case_s_shapes_do_not_fit_is_tried_at_shapes_that_do() -> None:
    # groups=2 against w [3, 4]: refused; with w's out-channels doubled and its in-channels
    # halved, it runs, and only there the broken weight gradient shows
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2, 4, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.rand(3, 4, generator=gen, dtype=torch.float64).requires_grad_()
    report = gradlab.check(lambda x, w, g: grouped_matmul(x, w, g, first_group_only=True),
                           [x, w, 1], reference=grouped_matmul,
                           checks=["forward", "gradient", "explore"], explore=BUDGET)
    assert all(r.status == "pass" for r in report.rows if r.check != "explore")
    row = explore_row(report)
    assert row.status == "fail" and row.hint == "explored_wrong", message(row)
    case = row.findings[0].want["set"]
    assert case[2] == 2 and case[1]["shape"][1] * 2 == case.get(0, {"shape": [0, 4]})[
        "shape"][1], case
    twin = gradlab.check(grouped_matmul, [x, w, 1], reference=grouped_matmul,
                         checks=["explore"], explore=BUDGET)
    assert explore_row(twin).status == "pass", message(explore_row(twin))


def test_a_grown_differentiable_input_gets_new_values_and_a_constant_its_own_rows() -> None:
    from gradlab.checks.families.inputspace import _reshaped
    a = torch.tensor([[0.1, 0.9], [0.5, 0.3]], dtype=torch.float64)
    grown = _reshaped(a.clone().requires_grad_(), (4, 2))
    assert grown.requires_grad and not torch.equal(grown[2:], grown[:2].detach())
    assert torch.equal(_reshaped(a, (4, 2))[2:], a)  # a constant's rows repeated


def test_a_budget_spent_before_any_input_was_judged_says_so() -> None:
    class SlowFirstCall(torch.autograd.Function):
        """2 x, whose first call takes longer than the budget (a kernel that compiles), and
        which refuses an empty input."""

        compiled = False

        @classmethod
        def forward(cls, ctx, x):
            if not cls.compiled:
                import time
                time.sleep(0.5)
                cls.compiled = True
            if x.numel() == 0:
                raise ValueError("nothing to transform")
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    report = gradlab.check(SlowFirstCall, [x], reference=lambda x: 2 * x, checks=["explore"],
                           explore=0.2)
    row = explore_row(report)
    assert (row.status, row.reason) == ("skip", "explore_budget_spent"), message(row)

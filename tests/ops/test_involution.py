"""Tests for the bundled involution op.

The CPU tap loop and the claims of the OpDef run in this process.  The Triton kernels run on CPU
under TRITON_INTERPRET=1, which triton reads when it is imported, so they run in one subprocess
(tests/triton_interpreted.py, shared with tests/test_triton_shapes.py) that runs every check of
run_triton_checks (this file run as a script, `python tests/ops/test_involution.py
--triton-interpret`, runs them alone) and prints one JSON line {check name: "ok" | error}; the
`triton` tests below each assert their own entry, so a failure names its check.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the subprocess runs this file as a script from anywhere
    sys.path.insert(0, str(ROOT))

import gradlab.ops.involution as inv  # noqa: E402
from gradlab import bench  # noqa: E402
from gradlab.model import Case, TensorArg  # noqa: E402
from gradlab.ops import entry  # noqa: E402
from gradlab.spec import bundled_op  # noqa: E402

Pair = int | tuple[int, int]

#: The OpDef with the cases of its spec, gradlab/specs/involution.yaml.
SPEC_OP = bundled_op("involution")

#: float64 paths differ from the reference only in summation order.
EXACT = {"atol": 1e-12, "rtol": 1e-9}


@dataclass(frozen=True)
class Geometry:
    """One involution configuration: shapes and stride/padding/dilation (int or pair)."""

    name: str
    x_shape: tuple[int, int, int, int]
    groups: int
    kernel: Pair
    stride: Pair = 1
    padding: Pair = 0
    dilation: Pair = 1

    def pair(self, v: Pair) -> tuple[int, int]:
        return (v, v) if isinstance(v, int) else v

    def w_shape(self) -> tuple[int, ...]:
        b, _, h, w = self.x_shape
        (kh, kw), (sh, sw) = self.pair(self.kernel), self.pair(self.stride)
        (ph, pw), (dh, dw) = self.pair(self.padding), self.pair(self.dilation)
        ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        return (b, self.groups, kh, kw, ho, wo)

    def geo(self) -> tuple[Pair, Pair, Pair]:
        return (self.stride, self.padding, self.dilation)


GEOMETRIES = (
    Geometry("k3_g2_pad1", (2, 4, 5, 6), 2, 3, 1, 1, 1),
    Geometry("stride2_odd", (2, 4, 7, 9), 2, 3, 2, 1, 1),
    Geometry("dilation2_g4", (1, 4, 7, 6), 4, 3, 1, 2, 2),
    Geometry("g1_k3x2_nopad", (2, 3, 6, 5), 1, (3, 2), 1, 0, 1),
    Geometry("pairs_s21_p10_d12", (1, 4, 8, 7), 2, 3, (2, 1), (1, 0), (1, 2)),
    # two groups, not four: under the Triton interpreter each (batch, group) program walks all
    # 49 taps in Python, and this geometry's checks were the costliest of the interpreted set
    Geometry("k7_g2_pad3", (1, 4, 9, 9), 2, 7, 1, 3, 1),
)
LAYOUTS = ("contiguous", "transposed", "sliced", "channels_last")


def make_inputs(
    g: Geometry, dtype: torch.dtype = torch.float64, layout: str = "contiguous", seed: int = 0,
    device: str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, w (leaves requiring grad) for `g`; `layout` makes x (and w but for channels_last)
    non-contiguous."""
    gen = torch.Generator().manual_seed(seed)
    b, c, h, wd = g.x_shape
    ws = g.w_shape()

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)

    if layout == "contiguous":
        x, w = randn(b, c, h, wd), randn(*ws)
    elif layout == "transposed":  # memory order [.., W, H]: last-two-dim strides swapped
        x, w = randn(b, c, wd, h).transpose(2, 3), randn(*ws[:4], ws[5], ws[4]).transpose(4, 5)
    elif layout == "sliced":  # every other column of a wider tensor, and a channel slice
        x = randn(b, c + 2, h, 2 * wd)[:, 1:c + 1, :, ::2]
        w = randn(*ws[:5], 2 * ws[5])[..., ::2]
    elif layout == "channels_last":  # x only; w has no 6-D memory format
        x, w = randn(b, c, h, wd).contiguous(memory_format=torch.channels_last), randn(*ws)
    else:
        raise ValueError(layout)
    assert layout == "contiguous" or not x.is_contiguous()
    return (x.to(device).detach().requires_grad_(), w.to(device).detach().requires_grad_())


def random_grad_output(shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """A fixed random grad_output with `dtype`'s values, as a non-contiguous float64 view."""
    gen = torch.Generator().manual_seed(1)
    go = torch.randn(tuple(shape)[::-1], generator=gen, dtype=torch.float64).to(dtype).double()
    return go.permute(3, 2, 1, 0)


def forward_backward(
    fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor, geo: tuple[Pair, ...],
    grad: str, go_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out, grad_x, grad_w).

    grad 'sum' backpropagates a stride-0 expanded grad_output; 'random' a non-contiguous one whose
    values are representable in `go_dtype` (default: out's dtype), so a float64 reference can see
    exactly the grad_output a low-precision run saw.
    """
    out = fn(x, w, *geo)
    if grad == "x-only":  # w does not require grad: grad_w is returned as zeros
        (gx,) = torch.autograd.grad(out.sum(), x)
        return out.detach(), gx, torch.zeros_like(w)
    if grad == "sum":
        gx, gw = torch.autograd.grad(out.sum(), (x, w))
    else:
        go = random_grad_output(out.shape, go_dtype or out.dtype).to(out)
        gx, gw = torch.autograd.grad(out, (x, w), go)
    return out.detach(), gx, gw


def reference_float64(
    x: torch.Tensor, w: torch.Tensor, geo: tuple[Pair, ...], grad: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The unfold reference in float64 on the very same (possibly rounded) input values."""
    xr = x.detach().double().requires_grad_()
    wr = w.detach().double().requires_grad_()
    return forward_backward(inv.involution_reference, xr, wr, geo, grad, go_dtype=x.dtype)


def saved_bytes(fn: Callable[..., torch.Tensor], *args: Any) -> int:
    """Bytes autograd keeps for backward of fn(*args), each storage counted once."""
    return bench.saved_bytes(lambda: fn(*args))


@contextlib.contextmanager
def forced_triton(via: str = "flag") -> Iterator[list[str]]:
    """Route the Function through the Triton kernels even for CPU tensors.

    via 'flag' sets inv.FORCE_TRITON, 'env' the environment variable.  Yields the list of
    launchers called inside the block, so a check can prove the Triton path really ran.
    """
    import gradlab.kernels.involution_triton as kt

    names = ("involution_forward", "involution_grad_input", "involution_grad_weight")
    real = {n: getattr(kt, n) for n in names}
    calls: list[str] = []

    def spy(name: str) -> Callable[..., torch.Tensor]:
        def launcher(*args: Any, **kwargs: Any) -> torch.Tensor:
            calls.append(name)
            return real[name](*args, **kwargs)  # type: ignore[no-any-return]
        return launcher

    before = inv.FORCE_TRITON
    for n in names:
        setattr(kt, n, spy(n))
    if via == "env":
        os.environ[inv.FORCE_TRITON_ENV] = "1"
    else:
        inv.FORCE_TRITON = True
    try:
        yield calls
    finally:
        inv.FORCE_TRITON = before
        os.environ.pop(inv.FORCE_TRITON_ENV, None)
        for n in names:
            setattr(kt, n, real[n])


def assert_close_all(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...],
                     atol: float, rtol: float) -> None:
    def prefixed(name: str) -> Callable[[str], str]:
        return lambda message: f"{name}: {message}"

    for name, a, b in zip(("out", "grad_x", "grad_w"), got, want, strict=True):
        torch.testing.assert_close(a.double(), b, atol=atol, rtol=rtol, msg=prefixed(name))


# ---------------------------------------------------------------------------------------------
# CPU tap loop


@pytest.mark.parametrize("grad", ["random", "sum"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("g", GEOMETRIES, ids=lambda g: g.name)
def test_cpu_matches_reference(g: Geometry, layout: str, grad: str) -> None:
    x, w = make_inputs(g, layout=layout)
    got = forward_backward(inv.involution, x, w, g.geo(), grad)
    assert_close_all(got, reference_float64(x, w, g.geo(), grad), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_cpu_low_precision_within_tolerance(dtype: str) -> None:
    g = GEOMETRIES[-1]  # K=7: the longest accumulation
    x, w = make_inputs(g, dtype=getattr(torch, dtype))
    got = forward_backward(inv.involution, x, w, g.geo(), "random")
    assert all(t.dtype == getattr(torch, dtype) for t in got)
    tol = inv.OP.tolerance(dtype)
    assert_close_all(got, reference_float64(x, w, g.geo(), "random"), tol.atol, tol.rtol)


def _tensor(arg: TensorArg, gen: torch.Generator) -> torch.Tensor:
    shape = list(arg.shape)
    if arg.layout == "transposed":
        d0, d1 = arg.transpose
        shape[d0], shape[d1] = shape[d1], shape[d0]
    t = torch.rand(shape, generator=gen, dtype=torch.float64) * (arg.high - arg.low) + arg.low
    if arg.layout == "transposed":
        t = t.transpose(*arg.transpose)
    return t.requires_grad_(arg.requires_grad)


@pytest.mark.parametrize("case", SPEC_OP.cases, ids=lambda c: c.name)
def test_default_cases_gradcheck(case: Case) -> None:
    gen = torch.Generator().manual_seed(0)
    args: list[Any] = [_tensor(a, gen) if isinstance(a, TensorArg) else a for a in case.args]
    torch.testing.assert_close(inv.involution(*args), inv.involution_reference(*args))
    assert torch.autograd.gradcheck(inv.involution, tuple(args))


@pytest.mark.parametrize("case", SPEC_OP.cases + SPEC_OP.bench_cases, ids=lambda c: c.name)
def test_case_shapes_are_consistent(case: Case) -> None:
    # Meta tensors: the bench cases' shapes are checked without allocating them.
    x, w = (torch.empty(a.shape, device="meta") for a in case.args[:2])
    inv._check_shapes(x, w, *(inv._pair(v) for v in case.args[2:]))


def test_bad_shapes_raise() -> None:
    x = torch.randn(1, 4, 5, 5)
    with pytest.raises(ValueError, match="does not fit"):
        inv.involution(x, torch.randn(1, 3, 3, 3, 5, 5), 1, 1, 1)  # 4 channels, 3 groups
    with pytest.raises(ValueError, match="does not fit"):
        inv.involution(x, torch.randn(1, 2, 3, 3, 5, 5), 1, 0, 1)  # Ho is 3 without padding
    with pytest.raises(TypeError, match="dtype"):
        inv.involution(x, torch.randn(1, 2, 3, 3, 5, 5, dtype=torch.float64), 1, 1, 1)


def test_needs_input_grad_is_honoured() -> None:
    g = GEOMETRIES[0]
    x, w = make_inputs(g)
    x.requires_grad_(False)
    inv.involution(x, w, *g.geo()).sum().backward()
    assert x.grad is None and w.grad is not None


# ---------------------------------------------------------------------------------------------
# The OpDef's claims


def test_registry_entry_matches_op() -> None:
    e = entry("involution")
    assert e is not None and e.module == inv.__name__
    assert (e.summary, e.second_order, e.devices) == (
        inv.OP.summary, inv.OP.second_order, inv.OP.devices)
    assert inv.OP.name == "involution" and inv.OP.reference is inv.involution_reference


def error_of(fn: Callable[[], object]) -> str:
    """The traceback of what fn raises, '' when it returns."""
    try:
        fn()
    except Exception:
        return traceback.format_exc(limit=4)
    return ""


def second_order_attempts(x: torch.Tensor, w: torch.Tensor, geo: tuple[Pair, ...]) -> list[str]:
    """Try double backward four ways; the error of each ('' where none was raised)."""
    def grad_of_grad(loss_kind: str, first: int, second: int) -> None:
        out = inv.involution(x, w, *geo)
        # sum(): a constant grad_output, so only x and w connect the first grads to the graph.
        loss = out.sum() if loss_kind == "sum" else out.pow(2).sum()
        (g,) = torch.autograd.grad(loss, (x, w)[first], create_graph=True)
        torch.autograd.grad(g.sum(), (x, w)[second])

    attempts = (("pow", 0, 1), ("pow", 1, 1), ("sum", 0, 1), ("sum", 1, 0))
    return [error_of(lambda a=a: grad_of_grad(*a)) for a in attempts]  # type: ignore[misc]


def test_second_order_raises_as_declared() -> None:
    assert inv.OP.second_order is False
    g = GEOMETRIES[1]
    x, w = make_inputs(g)
    for message in second_order_attempts(x, w, g.geo()):
        assert "no second derivative" in message
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.gradgradcheck(inv.involution, (x, w, *g.geo()),  # type: ignore[arg-type]
                                     fast_mode=True)


def test_saves_only_x_and_w() -> None:
    g = GEOMETRIES[-1]
    x, w = make_inputs(g)
    assert saved_bytes(inv.involution, x, w, *g.geo()) == (x.numel() + w.numel()) * 8


def test_saves_ten_times_fewer_bytes_than_unfold() -> None:
    # K=7, C/G=16: the reference keeps the unfolded input, C*K² values per pixel; the Function
    # keeps x (C) and w (G*K²) per pixel: (16*49 + 49) / (16 + 49) = 12.8x.
    g = Geometry("k7_g1", (1, 16, 12, 12), 1, 7, 1, 3, 1)
    x, w = make_inputs(g, dtype=torch.float32)
    custom = saved_bytes(inv.involution, x, w, *g.geo())
    reference = saved_bytes(inv.involution_reference, x, w, *g.geo())
    assert reference >= 10 * custom, (reference, custom)


# ---------------------------------------------------------------------------------------------
# Triton kernels, interpreted on CPU in a subprocess


def _kernel_check(g: Geometry, dtype: torch.dtype, variant: str | None = None,
                  gw_variant: str | None = None) -> Callable[[], None]:
    """The three launchers against the float64 reference; `variant` (None: the selector's
    choice) for forward and grad_input, `gw_variant` (default: `variant`) for grad_weight."""
    def check() -> None:
        from gradlab.kernels import involution_triton as kt

        x, w = make_inputs(g, dtype=dtype)
        want = reference_float64(x, w, g.geo(), "random")
        go = random_grad_output(want[0].shape, dtype).to(dtype)
        x, w = x.detach(), w.detach()
        got = (kt.involution_forward(x, w, *g.geo(), variant=variant),
               kt.involution_grad_input(go, w, x.shape, *g.geo(), variant=variant),
               kt.involution_grad_weight(go, x, w.shape, *g.geo(),
                                         variant=gw_variant or variant))
        tol = inv.OP.tolerance(str(dtype).removeprefix("torch."))
        assert_close_all(got, want, tol.atol, tol.rtol)
        # (that a second run is bitwise identical is test_cuda_kernels_are_deterministic's: the
        # interpreter runs its programs one after another, so a rerun here proved nothing)

    return check


def _function_check(g: Geometry, layout: str, grad: str, dtype: torch.dtype) -> Callable[[], None]:
    def check() -> None:
        from gradlab.kernels import involution_select

        x, w = make_inputs(g, dtype=dtype, layout=layout)
        involution_select.clear()
        with forced_triton() as calls:
            got = forward_backward(inv.involution, x, w, g.geo(), grad)
        assert sorted(calls) == ["involution_forward", "involution_grad_input",
                                 "involution_grad_weight"], calls
        # untimed, x's memory format picks the forward and grad_weight kernels: channels last
        # runs "cl" (grad_input goes by grad_output's, here never channels last)
        ran = {(r["kernel"], r["variant"], r["chosen_by"])
               for r in involution_select.chosen_variants()}
        want = "cl" if layout == "channels_last" else "nchw"
        assert ran == {("forward", want, "layout"), ("grad_input", "nchw", "layout"),
                       ("grad_weight", want, "layout")}, ran
        tol = inv.OP.tolerance(str(dtype).removeprefix("torch."))
        assert_close_all(got, reference_float64(x, w, g.geo(), grad), tol.atol, tol.rtol)

    return check


def _check_function_forced_cl() -> None:
    """Contiguous inputs through the Function with every kernel forced to channels last: the
    forward's channels-last copy of x is kept for grad_weight, grad_output is converted once
    for both backward kernels (tests/test_involution_select.py counts the copies)."""
    from gradlab.kernels import involution_select

    g = GEOMETRIES[1]  # stride 2, K 3: x and its copy fit in the reference's unfolded input
    x, w = make_inputs(g, dtype=torch.float32)
    os.environ[involution_select.VARIANT_ENV] = "cl"
    try:
        with forced_triton():
            out = inv.involution(x, w, *g.geo())
            kept = len(out.grad_fn.saved_tensors) == 3  # type: ignore[union-attr]
            go = random_grad_output(out.shape, torch.float32).to(out)
            got = (out.detach(), *torch.autograd.grad(out, (x, w), go))
    finally:
        os.environ.pop(involution_select.VARIANT_ENV, None)
    assert kept and out.is_contiguous(memory_format=torch.channels_last)
    tol = inv.OP.tolerance("float32")
    assert_close_all(got, reference_float64(x, w, g.geo(), "random"), tol.atol, tol.rtol)


def _check_gradcheck() -> None:
    g = GEOMETRIES[1]
    x, w = make_inputs(g)
    with forced_triton():
        args: tuple[Any, ...] = (x, w, *g.geo())
        assert torch.autograd.gradcheck(inv.involution, args, fast_mode=True)


def _check_second_order_raises() -> None:
    g = GEOMETRIES[0]
    x, w = make_inputs(g)
    with forced_triton():
        messages = second_order_attempts(x, w, g.geo())
    assert all("no second derivative" in m for m in messages), messages


def _check_env_var_forces_triton() -> None:
    g = GEOMETRIES[0]
    x, w = make_inputs(g)
    with forced_triton(via="env") as calls:
        got = forward_backward(inv.involution, x, w.detach(), g.geo(), "x-only")
    assert calls == ["involution_forward", "involution_grad_input"], calls  # needs_input_grad
    assert_close_all(got, reference_float64(x, w, g.geo(), "x-only"), **EXACT)


def _check_bad_shape() -> None:
    from gradlab.kernels import involution_triton as kt

    try:
        kt.involution_forward(torch.randn(1, 4, 5, 5), torch.randn(1, 2, 3, 3, 4, 4), 1, 1, 1)
    except ValueError:
        return
    raise AssertionError("a w of the wrong spatial size was accepted")


def triton_checks() -> dict[str, Callable[[], None]]:
    """Every interpreted Triton check by name (names are known without running anything)."""
    checks: dict[str, Callable[[], None]] = {}
    for g in GEOMETRIES:
        for dtype in (torch.float32, torch.float64):
            checks[f"kernels-{g.name}-{dtype}"] = _kernel_check(g, dtype)
    # a group wider than the kernels' channel block (MAX_BLOCK_C = 32): split over programs in
    # forward and grad_input, looped over in grad_weight
    wide = Geometry("g1_c40_wide", (1, 40, 5, 6), 1, 3, 1, 1, 1)
    checks[f"kernels-{wide.name}-{torch.float32}"] = _kernel_check(wide, torch.float32)
    # the channels-last kernels (issue 41) on the same geometries: "cl" for all three, and
    # grad_weight's one-thread reduction ("cl_vec") in turn; float64 once (its 2-channel vectors)
    for i, g in enumerate((*GEOMETRIES, wide)):
        gw = ("cl", "cl_vec")[i % 2] if g is not wide else "cl"
        checks[f"kernels-cl-{g.name}-gw_{gw}-{torch.float32}"] = _kernel_check(
            g, torch.float32, "cl", gw)
    checks[f"kernels-cl-{GEOMETRIES[0].name}-gw_cl_vec-{torch.float64}"] = _kernel_check(
        GEOMETRIES[0], torch.float64, "cl", "cl_vec")
    for i, g in enumerate(GEOMETRIES):
        layout = LAYOUTS[1 + i % 2]  # transposed / sliced in turn
        dtype = (torch.float64, torch.float32)[i % 2]
        checks[f"function-{g.name}-{layout}-sum"] = _function_check(g, layout, "sum", dtype)
    g = GEOMETRIES[1]
    checks[f"function-{g.name}-contiguous-random"] = _function_check(
        g, "contiguous", "random", torch.float64)
    for dtype in (torch.float16, torch.bfloat16):
        checks[f"function-{g.name}-{dtype}"] = _function_check(g, "sliced", "random", dtype)
    # channels-last input: the selector's untimed choice runs the channels-last kernels
    checks[f"function-{g.name}-channels_last-random"] = _function_check(
        g, "channels_last", "random", torch.float32)
    checks["function-forced-cl-keeps-x-copy"] = _check_function_forced_cl
    checks["gradcheck-fast-float64"] = _check_gradcheck
    checks["second-order-raises"] = _check_second_order_raises
    checks["env-var-forces-triton"] = _check_env_var_forces_triton
    checks["launcher-rejects-bad-shape"] = _check_bad_shape
    return checks


def run_triton_checks() -> dict[str, str]:
    """Run every check in this process (TRITON_INTERPRET=1 must already be set)."""
    return {name: error_of(check) or "ok" for name, check in triton_checks().items()}


@pytest.fixture(scope="module")
def interpreted_results() -> dict[str, str]:
    import triton_interpreted  # tests/, on the path under pytest (conftest)

    return triton_interpreted.results("involution")


@pytest.mark.triton
# one xdist worker takes them all (dev.sh runs --dist loadgroup), with test_triton_shapes.py's:
# the interpreter subprocess they share (tests/triton_interpreted.py, its GROUP; about 25 s)
# would otherwise run once per worker
@pytest.mark.xdist_group("triton_interpreter")
@pytest.mark.parametrize("name", list(triton_checks()))
def test_triton_interpreted(interpreted_results: dict[str, str], name: str) -> None:
    result = interpreted_results.get(name, "missing from the subprocess output")
    if result != "ok":
        pytest.fail(result, pytrace=False)


# ---------------------------------------------------------------------------------------------
# The real GPU path


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("g", GEOMETRIES, ids=lambda g: g.name)
def test_cuda_matches_reference(g: Geometry, dtype: str) -> None:
    x, w = make_inputs(g, dtype=getattr(torch, dtype), layout="transposed", device="cuda")
    got = forward_backward(inv.involution, x, w, g.geo(), "sum")
    tol = inv.OP.tolerance(dtype)
    assert_close_all(got, reference_float64(x, w, g.geo(), "sum"), tol.atol, tol.rtol)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("g", GEOMETRIES, ids=lambda g: g.name)
def test_cuda_kernels_are_deterministic(g: Geometry) -> None:
    """Each program owns its outputs (no atomics): a second run is bitwise identical."""
    from gradlab.kernels import involution_triton as kt

    x, w = (t.detach() for t in make_inputs(g, dtype=torch.float32, device="cuda"))
    go = torch.randn_like(kt.involution_forward(x, w, *g.geo()))
    runs = [(kt.involution_forward(x, w, *g.geo()),
             kt.involution_grad_input(go, w, x.shape, *g.geo()),
             kt.involution_grad_weight(go, x, w.shape, *g.geo())) for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


if __name__ == "__main__" and sys.argv[1:] == ["--triton-interpret"]:
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("set TRITON_INTERPRET=1 before running the interpreted Triton checks")
    print(json.dumps(run_triton_checks()))

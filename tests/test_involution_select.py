"""The per-shape choice among the involution kernel variants (gradlab/kernels/
involution_select.py), in plain Python with a fake clock: on a GPU the first launch of a shape
times every variant and keeps the fastest; untimed, the input's memory format decides; the
environment forces one; every choice is recorded for the benchmark's output."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gradlab.kernels import involution_select as sel

#: A shape key as the launchers build it: dtype, B, C, G, H, W, KH, KW, sh, sw, dh, dw, layout.
KEY = ("float32", 64, 64, 4, 56, 56, 7, 7, 1, 1, 1, 1, "other")


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(sel.VARIANT_ENV, raising=False)
    sel.clear()
    yield
    sel.clear()


def runs_for(kernel: str, ran: list[str]) -> dict[str, Callable[[], str]]:
    """One stand-in launch per variant of `kernel`; each call appends its name to `ran`."""
    def run(name: str) -> Callable[[], str]:
        def launch() -> str:
            ran.append(name)
            return name
        return launch
    return {name: run(name) for name in sel.VARIANTS[kernel]}


def fake_timer(ms: dict[str, float], timed: list[str]) -> Callable[[Callable[[], object]], float]:
    """A clock that 'times' a launch by running it once and reading its variant's ms."""
    def timer(launch: Callable[[], object]) -> float:
        name = str(launch())
        timed.append(name)
        return ms[name]
    return timer


def test_a_timed_choice_keeps_the_fastest_and_times_once_per_shape() -> None:
    ran: list[str] = []
    timed: list[str] = []
    timer = fake_timer({"nchw": 1.30, "cl": 0.70, "cl_vec": 0.55}, timed)
    runs = runs_for("grad_weight", ran)
    for _ in range(3):
        got = sel.run("grad_weight", KEY, runs, variant=None, channels_last=False, timer=timer)
        assert got == "cl_vec"
    assert timed == ["nchw", "cl", "cl_vec"]  # once each, on the first launch only
    assert ran == ["nchw", "cl", "cl_vec", "cl_vec", "cl_vec", "cl_vec"]
    (row,) = sel.chosen_variants()
    assert row["kernel"] == "grad_weight" and row["variant"] == "cl_vec"
    assert row["chosen_by"] == "timed" and row["layout"] == "other"
    assert row["variant_ms"] == {"nchw": 1.30, "cl": 0.70, "cl_vec": 0.55}
    assert (row["C"], row["H"], row["KH"], row["dtype"]) == (64, 56, 7, "float32")


def test_another_shape_is_timed_again() -> None:
    timed: list[str] = []
    runs = runs_for("forward", [])
    sel.choose("forward", KEY, runs, channels_last=False,
               timer=fake_timer({"nchw": 2.0, "cl": 1.0}, timed))
    other = (*KEY[:-1], "channels_last")
    got = sel.choose("forward", other, runs, channels_last=True,
                     timer=fake_timer({"nchw": 0.5, "cl": 1.0}, timed))
    assert got == "nchw"  # the timer, not the layout, decides on a GPU
    assert timed == ["nchw", "cl", "nchw", "cl"]
    assert [r["variant"] for r in sel.chosen_variants()] == ["cl", "nchw"]


def test_a_tie_goes_to_the_first_variant() -> None:
    timer = fake_timer({"nchw": 1.0, "cl": 1.0}, [])
    assert sel.choose("forward", KEY, runs_for("forward", []), channels_last=True,
                      timer=timer) == "nchw"


@pytest.mark.parametrize(("channels_last", "want"), [(True, "cl"), (False, "nchw")])
def test_untimed_the_input_layout_decides(channels_last: bool, want: str) -> None:
    ran: list[str] = []
    got = sel.run("forward", KEY, runs_for("forward", ran), variant=None,
                  channels_last=channels_last, timer=None)
    assert got == want and ran == [want]
    assert sel.choices()[("forward", KEY)] == sel.Choice(want, "layout")


def test_an_untimed_choice_is_timed_once_a_timer_comes() -> None:
    runs = runs_for("forward", [])
    sel.choose("forward", KEY, runs, channels_last=False, timer=None)
    got = sel.choose("forward", KEY, runs, channels_last=False,
                     timer=fake_timer({"nchw": 3.0, "cl": 1.0}, []))
    assert got == "cl" and sel.choices()[("forward", KEY)].chosen_by == "timed"


def test_a_named_variant_runs_and_is_recorded_as_given() -> None:
    ran: list[str] = []
    timed: list[str] = []
    got = sel.run("grad_input", KEY, runs_for("grad_input", ran), variant="cl",
                  channels_last=False, timer=fake_timer({"nchw": 0.1, "cl": 9.0}, timed))
    assert got == "cl" and ran == ["cl"] and timed == []
    assert sel.choices()[("grad_input", KEY)].chosen_by == "given"
    with pytest.raises(ValueError, match="unknown variant 'cl_vec'"):
        sel.run("grad_input", KEY, runs_for("grad_input", []), variant="cl_vec",
                channels_last=False, timer=None)


def test_the_environment_forces_a_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    timed: list[str] = []
    timer = fake_timer({"nchw": 0.1, "cl": 5.0, "cl_vec": 5.0}, timed)
    monkeypatch.setenv(sel.VARIANT_ENV, "cl_vec")
    assert sel.choose("grad_weight", KEY, runs_for("grad_weight", []), channels_last=False,
                      timer=timer) == "cl_vec"
    # a kernel without a one-thread-reduction variant runs the channels-last kernel
    assert sel.choose("forward", KEY, runs_for("forward", []), channels_last=False,
                      timer=timer) == "cl"
    assert timed == [] and {c.chosen_by for c in sel.choices().values()} == {"env"}
    monkeypatch.setenv(sel.VARIANT_ENV, "auto")
    assert sel.forced_variant("forward") is None
    monkeypatch.setenv(sel.VARIANT_ENV, "fastest")
    with pytest.raises(ValueError, match="GRADLAB_INVOLUTION_VARIANT='fastest'"):
        sel.forced_variant("forward")


def test_the_launchers_time_the_variants_when_autotuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Triton launchers' glue: with autotuning on (a GPU, a large launch) their plan passes
    the selector its clock; off, none (the layout decides).  Stand-in launches, no kernel runs.
    The plan is kept per shape and switches, so switching the mode is seen by the next call."""
    pytest.importorskip("triton")
    import torch

    from gradlab.kernels import involution_launch as il
    from gradlab.kernels import involution_triton as kt
    from gradlab.kernels import involution_triton_cl as kcl

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    timed: list[str] = []
    monkeypatch.setattr(kcl, "time_ms", fake_timer({"nchw": 2.0, "cl": 1.0}, timed))
    for mode, want in (("0", "nchw"), ("variants", "cl"), ("0", "nchw"), ("1", "cl")):
        sel.clear()
        monkeypatch.setenv(il.AUTOTUNE_ENV, mode)
        plan = il.plan("forward", (64, 64, 56, 56), (64, 4, 7, 7, 56, 56), 1, 3, 1,
                       torch.float32, False, None)
        assert plan.timed == (mode != "0") and plan.autotune == (mode == "1")
        assert kt._run_variant("forward", plan, runs_for("forward", []), None, None) == want
    assert timed == ["nchw", "cl", "nchw", "cl"]
    (row,) = kt.chosen_variants()
    assert (row["variant"], row["chosen_by"], row["B"], row["C"]) == ("cl", "timed", 64, 64)
    # a block size without a variant is the NCHW kernels' (the tests' and the benchmark's)
    assert kt._run_variant("forward", plan, runs_for("forward", []), None,
                           (64, 2, 0)) == "nchw"
    # a small launch is neither timed nor tuned
    small = il.plan("forward", (1, 4, 8, 8), (1, 2, 3, 3, 8, 8), 1, 1, 1, torch.float32, True,
                    None)
    assert not small.timed and not small.autotune and small.key[-1] == "channels_last"


@pytest.mark.parametrize(("mode", "blocks", "variants"), [
    (None, True, True), ("1", True, True), ("variants", False, True), ("0", False, False)])
def test_the_autotune_modes(monkeypatch: pytest.MonkeyPatch, mode: str | None, blocks: bool,
                            variants: bool) -> None:
    """GRADLAB_INVOLUTION_AUTOTUNE: "1" (default) tunes block sizes and times the variants,
    "variants" times only the variants (one compile per variant), "0" neither; never under
    the interpreter, nor for a launch under AUTOTUNE_MIN_WORK."""
    from gradlab.kernels import involution_launch as il

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if mode is None:
        monkeypatch.delenv(il.AUTOTUNE_ENV, raising=False)
    else:
        monkeypatch.setenv(il.AUTOTUNE_ENV, mode)
    big, small = il.AUTOTUNE_MIN_WORK, il.AUTOTUNE_MIN_WORK - 1
    assert (il.autotuning(big), il.variant_timing(big)) == (blocks, variants)
    assert not il.autotuning(small) and not il.variant_timing(small)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not il.autotuning(big) and not il.variant_timing(big)
    monkeypatch.setenv(il.AUTOTUNE_ENV, "sometimes")
    with pytest.raises(ValueError, match="GRADLAB_INVOLUTION_AUTOTUNE='sometimes'"):
        il.autotune_mode()


class _NoLaunch:
    """A jitted kernel that launches nothing: `kernel[grid](*args, **meta)` returns."""

    def __getitem__(self, grid: object) -> Callable[..., None]:
        return lambda *args, **meta: None


@pytest.mark.parametrize(("size", "k", "stride", "w_grad", "want"), [
    # K 7, stride 1: x and its copy (2 values per input pixel) are far below the reference's
    # unfolded input (49 per output pixel): the forward's copy serves grad_weight
    (7, 7, 1, True, ["x", "go"]),
    # K 1, stride 2: keeping the copy would hold more than the reference: grad_weight converts
    (8, 1, 2, True, ["x", "go", "x"]),
    # w needs no gradient: no grad_weight, nothing kept
    (7, 7, 1, False, ["x", "go"]),
])
def test_a_forward_and_backward_convert_each_tensor_once(
        monkeypatch: pytest.MonkeyPatch, size: int, k: int, stride: int, w_grad: bool,
        want: list[str]) -> None:
    """Through the Function with every kernel forced to channels last and contiguous inputs,
    x is converted once (the forward's copy kept for grad_weight where it fits the reference's
    memory) and grad_output once for both backward kernels.  Launches stubbed: the glue only."""
    pytest.importorskip("triton")
    import torch

    import gradlab.ops.involution as inv
    from gradlab.kernels import involution_triton as kt
    from gradlab.kernels import involution_triton_cl as kcl

    for table in (kt._JIT, kcl._JIT):
        for name in list(table):
            monkeypatch.setitem(table, name, _NoLaunch())
    monkeypatch.setattr(inv, "FORCE_TRITON", True)
    monkeypatch.setenv(sel.VARIANT_ENV, "cl")
    x = torch.randn(1, 32, size, size, requires_grad=True)
    pad = k // 2
    out_size = (size + 2 * pad - k) // stride + 1
    w = torch.randn(1, 2, k, k, out_size, out_size, requires_grad=w_grad)
    go = torch.randn(1, 32, out_size, out_size)
    names = {id(x): "x", id(go): "go", id(w): "w"}
    copies: list[str] = []
    real_get = kcl.LayoutCache.get

    def get(self: kcl.LayoutCache, t: torch.Tensor, fmt: torch.memory_format) -> torch.Tensor:
        before = len(self.entries)
        got = real_get(self, t, fmt)
        if len(self.entries) > before:
            copies.append(names[id(t)])
        return got

    monkeypatch.setattr(kcl.LayoutCache, "get", get)
    out = inv.involution(x, w, stride, pad, 1)
    kept = len(out.grad_fn.saved_tensors) == 3  # x, w and x's copy
    assert kept == (want == ["x", "go"] and w_grad)
    torch.autograd.grad(out, (x, w) if w_grad else (x,), go)
    assert copies == want
    assert {r["variant"] for r in sel.chosen_variants()} == {"cl"}


def test_the_variant_timing_pays_every_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Timed, each run converts its input afresh (as a launch without a layout cache does), so
    the cache leaves the clock's choice as it was; the chosen run's copy is kept and the next
    launch of the shape, choice made, reuses it.  Launches stubbed."""
    pytest.importorskip("triton")
    import torch

    from gradlab.kernels import involution_launch as il
    from gradlab.kernels import involution_triton as kt
    from gradlab.kernels import involution_triton_cl as kcl

    for table in (kt._JIT, kcl._JIT):
        for name in list(table):
            monkeypatch.setitem(table, name, _NoLaunch())
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv(il.AUTOTUNE_ENV, "variants")
    monkeypatch.setattr(il, "AUTOTUNE_MIN_WORK", 0)  # this small shape is timed
    monkeypatch.setattr(il, "_PLANS", {})
    x, w = torch.randn(1, 32, 7, 7), torch.randn(1, 2, 7, 7, 7, 7)
    copies: list[int] = []
    real_contiguous = torch.Tensor.contiguous

    def contiguous(t: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        got = real_contiguous(t, *args, **kwargs)
        if t is x and got is not t:
            copies.append(1)
        return got

    def clock(run: Callable[[], object]) -> float:  # three calls per variant, as do_bench
        out = [run() for _ in range(3)][-1]
        return 1.0 if out.is_contiguous(memory_format=torch.channels_last) else 2.0

    monkeypatch.setattr(torch.Tensor, "contiguous", contiguous)
    monkeypatch.setattr(kcl, "time_ms", clock)
    layouts = kcl.LayoutCache()
    kt.involution_forward(x, w, 1, 3, 1, layouts=layouts)
    assert len(copies) == 3 + 1  # each timed "cl" run, then the chosen run's (kept)
    assert len(layouts.entries) == 1 and kt.chosen_variants()[0]["chosen_by"] == "timed"
    kt.involution_forward(x, w, 1, 3, 1, layouts=layouts)
    assert len(copies) == 4

"""Results in words: hint and reason codes as sentences, a row's message and location.

No rich here: the terminal renderer, the report files and the API's messages all use these.
"""

from __future__ import annotations

from gradlab.render.explored import SEARCH_HINTS, case_words, explored_words
from gradlab.render.reasons import REASONS
from gradlab.render.valuewords import VALUE_HINTS
from gradlab.results import CheckRow, Finding, Pattern

#: Likely-cause codes and the sentence each stands for.
HINTS: dict[str, str] = {
    "no_chain_rule": "backward ignores grad_output (not multiplied by it: missing chain rule)",
    "constant_factor": "off by a constant factor",
    "sign": "sign flipped",
    "transposed": "gradient is transposed",
    "swapped": "gradients swapped between inputs",
    # the constant-input advice only where it applies: describe() adds it on a base
    # gradient or jacobian row (MISSING_ADVICE_CHECKS), never on second order
    "missing": "gradient missing (None) for an input that requires grad",
    "zero": "gradient is zero where it should not be",
    "noncontiguous_only": "fails only for non-contiguous inputs (assumes contiguous memory)",
    "transposed_only": "fails only for inputs with transposed memory (assumes row-major strides)",
    "channels_last_only": "fails only for channels_last inputs (assumes NCHW-contiguous memory)",
    "expanded_only": "fails only for expanded (stride-0) inputs",
    "grad_output_layout": "fails only for non-contiguous or expanded grad_output (backward "
                          "assumes a contiguous grad_output; .sum() gives a stride-0 one)",
    "requires_grad_subset": "fails only for some requires_grad subsets (gradient gated on the "
                            "wrong needs_input_grad entry?)",
    "second_order_only": "first order is right but double backward is silently wrong: backward "
                         "is not differentiable as written (a tensor kept on ctx instead of "
                         "save_for_backward, or one computed in forward, such as a fused "
                         "kernel's statistics, used as a constant). Fix: decorate backward with "
                         "@torch.autograd.function.once_differentiable, so double backward "
                         "raises instead of being wrong, or make backward differentiable "
                         "(recompute what it needs from saved inputs with torch ops)",
    "second_order_claimed": "the op declares second_order: false, yet double backward runs and "
                            "is silently wrong: a Hessian or gradient penalty through it gets "
                            "wrong numbers without an error. Fix: decorate backward with "
                            "@torch.autograd.function.once_differentiable so double backward "
                            "raises, or make backward differentiable; to leave second order "
                            "unchecked, say checks: {second_order: false} (spec) or leave "
                            "second_order out of checks= (API)",
    "once_differentiable": "the op declares second_order: true, but its backward is "
                           "decorated with @torch.autograd.function.once_differentiable, so "
                           "double backward raises (a gradient penalty or Hessian through it "
                           "crashes). Fix: declare second_order: false (or leave it out: "
                           "gradlab then checks that it raises), or remove "
                           "@once_differentiable and make backward differentiable (torch ops on "
                           "tensors saved with ctx.save_for_backward)",
    "tf32": "right with TF32 off: on this GPU float32 convolutions (torch.backends.cudnn."
            "allow_tf32, on by default) or matmuls (torch.backends.cuda.matmul.allow_tf32, "
            "torch.set_float32_matmul_precision) round their inputs to 10 mantissa bits, and "
            "this Function's result is further from the float64 reference than that allows. "
            "The run passes with torch.backends.cudnn.allow_tf32 = False and "
            "torch.backends.cuda.matmul.allow_tf32 = False (or NVIDIA_TF32_OVERRIDE=0); the "
            "run's TF32 settings are in its environment record",
    "inplace_grad_output": "backward modified grad_output in place",
    "inplace_saved": "a saved tensor or input was modified in place during backward",
    "inplace_input": "forward modified an input in place without ctx.mark_dirty",
    "wrong_count": "backward returned the wrong number of gradients",
    "non_tensor_grad": "a gradient was returned for a non-tensor argument (must be None)",
    "wrong_shape": "gradient has the wrong shape",
    "summed_shape": "backward returns a gradient at a shape autograd sums down to the input's: "
                    "the gradient you get is right, but only through the engine's reduction "
                    "(anything calling backward itself gets the wrong shape); return "
                    "grad.sum_to_size(input.shape)",
    "wrong_dtype": "backward returns a gradient of another dtype than the input's: autograd "
                   "casts it, so the gradient you get has the right dtype (its precision is "
                   "judged on the gradient rows), but anything calling backward itself gets "
                   "the wrong one; return grad.to(input.dtype)",
    "input_freed": "forward freed an input's memory (its storage resized to 0 bytes, as "
                   "memcnn's keep_input=False does to save memory): a caller reading that "
                   "tensor afterwards crashes the process. Checked on copies of the inputs, "
                   "as a model's intermediates",
    "grad_side_effect": "backward sets the input's .grad itself, besides returning its "
                        "gradient: loss.backward() adds the returned gradient on top (twice "
                        "the gradient on a leaf), and autograd.grad leaves .grad set; return "
                        "the gradient only",
    "wrong_device": "gradient is on the wrong device",
    "forward": "forward output differs from the reference",
    "non_finite": "NaN or inf where the expected value is finite (overflow, 0/0, log of 0?)",
    "global_state": "the Function changed a global torch setting and did not restore it",
    "undefined_grad": "backward fails when an output's gradient is undefined (None)",
    "crash": "the Function raised an exception",
    "conjugate": "wrong by a complex conjugate, right once conjugated (PyTorch's convention: "
                 "backward returns grad_output * conj(df/dz), plus conj(grad_output) * df/dz* "
                 "where f is not holomorphic)",
    "timeout": "the case ran past --timeout (a hang, or a case too big for the limit)",
    "worker_died": "the process running the case died (segfault, os._exit, out of memory?)",
    "worker_load": "the isolated worker could not load the Function (an import that works "
                   "only in this process, such as modules made at import time): run with "
                   "--no-isolate",
    **VALUE_HINTS,
    "border_band": "wrong only near the borders (padding or boundary handling?)",
    "tail_tile": "wrong only in the last partial tile along a dim (a launch grid of n // BLOCK "
                 "instead of cdiv(n, BLOCK), or a loop that drops the remainder?)",
    "index_range": "wrong only in one range of one dim (an index or group offset?)",
    **SEARCH_HINTS,
    "sign_region": "wrong only for one sign of an input (a branch on the sign whose other "
                   "side's derivative is wrong, abs or a leaky slope?)",
    "zero_region": "wrong only where an input is 0 (the derivative's value at 0: a convention "
                   "at a kink, a 0/0?)",
    "value_range": "wrong only in one range of an input's values (a clamp or a branch "
                   "threshold?)",
    "magnitude_band": "wrong only in one band of an input's magnitudes (a threshold on |x|, an "
                      "approximation's range, overflow?)",
    "near_ties": "wrong only where an input's values (nearly) tie (how tied values share the "
                 "gradient: a max, sort or median?)",
    "ctx_output": "an output is kept on ctx instead of save_for_backward: a reference cycle "
                  "that keeps every activation alive until the cyclic garbage collector runs "
                  "(memory grows step by step)",
    "ctx_output_detached": "an output's storage is kept on ctx, detached, instead of "
                           "save_for_backward: no reference cycle, but autograd's version "
                           "check is skipped, so an in-place update of the output before "
                           "backward gives a silently wrong gradient instead of an error",
    "inplace_buffer": "forward modified in place an input that does not require grad (without "
                      "ctx.mark_dirty, not returned): right for a state buffer such as running "
                      "statistics, a bug if the caller's data changes under it",
    "ctx_input": "an input is kept on ctx instead of save_for_backward: autograd's version "
                 "check is skipped, so an in-place update between forward and backward (an "
                 "optimizer step) gives a silently wrong gradient instead of an error",
    "not_reentrant": "backward run twice on the same graph (retain_graph=True) gives another "
                     "result, or raises the second time: it changes ctx or saved state (a "
                     "second loss or a gradient penalty through it is wrong)",
    "state_outside_ctx": "backward used what a later forward left: state kept on the Function "
                         "class or a global instead of ctx (two micro-batches, or activation "
                         "checkpointing, run two forwards before the first backward): save it "
                         "with ctx.save_for_backward or on ctx",
    "output_differentiable": "this output requires grad where the reference's does not: a "
                             "running-statistics buffer updated from it keeps every step's "
                             "graph alive, and a second backward through it raises; mark it "
                             "with ctx.mark_non_differentiable or return it detached",
    "output_not_differentiable": "this output does not require grad where the reference's "
                                 "does: a loss through it gets no gradient (marked "
                                 "non-differentiable, or returned detached, by mistake?)",
    "gradient_dropped": "this output does not require grad where the reference's does, and "
                        "the reference's gradient through it is not zero: a loss through it "
                        "silently gets none (an output computed from detached data?)",
    "second_order_missing": "double backward raises where the reference supports it (a "
                            "gradient penalty through this Function will crash in training): "
                            "make backward differentiable (save_for_backward, no "
                            "once_differentiable), or declare second_order: false",
    "expanded_refused": "forward refuses an expanded (stride-0) input that the reference "
                        "accepts: call .contiguous() in forward, or declare variants: "
                        "{expanded: false}",
    "autocast_missing": "raises under torch.autocast where the reference runs (a mixed-precision "
                        "training step will crash; typically backward multiplies a half "
                        "grad_output by a float saved tensor): decorate forward and backward "
                        "with torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32) "
                        "and torch.amp.custom_bwd(device_type=...), or compute backward in "
                        "grad_output's dtype; or declare checks: {autocast: false}",
    "forward_ad_missing": "raises under forward-mode AD where the reference supports it "
                          "(torch.func.jvp, jacfwd and dual numbers need a jvp): add a jvp "
                          "staticmethod (with setup_context, ctx.save_for_forward), or declare "
                          "checks: {forward_ad: false}",
    "forward_ad_only": "the jvp is wrong where backward is right: forward mode has a formula of "
                       "its own (the jvp staticmethod): check it against the derivative",
    "also_without_autocast": "wrong without torch.autocast too, on the same float32 values "
                             "(not an autocast bug: the float32 forward and gradient rows say "
                             "what is wrong)",
    "autocast_only": "wrong only under torch.autocast (a low-precision path of its own, or a "
                     "dtype assumed in forward or backward?)",
    "compile_wrong": "torch.compile gives other outputs or gradients than eager (Python side "
                     "effects in forward or backward, state on ctx that tracing freezes?)",
    "vmap_wrong": "torch.func.vmap gives other outputs than one eager call per sample (a "
                  "wrong vmap staticmethod, or a batch dim the forward mixes in?)",
    "func_grad_wrong": "torch.func.grad gives other gradients than autograd",
    "cuda_wrong": "the Function on CUDA gives other outputs or gradients than on the CPU",
    "compile_missing": "required by the spec (requires: [compile]) and missing",
    "vmap_missing": "required by the spec (requires: [vmap]) and missing: write forward "
                    "without ctx, add setup_context, and set generate_vmap_rule = True or write "
                    "a vmap staticmethod",
    "func_grad_missing": "required by the spec (requires: [func_grad]) and missing: write "
                         "forward without ctx and add setup_context",
    "deterministic_missing": "required by the spec (requires: [deterministic]) and missing: "
                             "no atomics or other nondeterministic kernels in backward",
    "noncontiguous_missing": "required by the spec (requires: [noncontiguous]) and missing: "
                             "call .contiguous() where the code needs it",
    "cuda_missing": "required by the spec (requires: [cuda]) and missing",
    "batched_grad_wrong": "backward under vmap over grad_outputs (autograd.grad with "
                          "is_grads_batched, vectorized Jacobians and Hessians) gives other "
                          "gradients than one backward per grad_output (a backward that mixes "
                          "the batch, or takes another path when a kernel refuses a batched "
                          "tensor?)",
    "batched_grad_missing": "required by the spec (requires: [batched_grad]) and missing: "
                            "backward must run under vmap (no .item(), no Python branches on "
                            "grad_output's values, no in-place writes of batched values into "
                            "other tensors, no data pointers handed to a kernel)",
    "cached_forward": "the numerical Jacobian w.r.t. this input is exactly zero while the "
                      "analytical one is not: forward ignores in-place updates of the input (a "
                      "cache keyed on the tensor, its values read once?); an optimizer step "
                      "that updates it in place would go unseen",
    "rng_replay": "backward does not replay forward's random draws (a fresh mask drawn in "
                  "backward, or the RNG state saved after drawing): save "
                  "torch.get_rng_state() before drawing and replay it in backward",
    "precision_loss": "a float64 result only about float32-accurate (computed in float32 "
                      "internally, or a formula that cancels at these values: log(1 + x) "
                      "for log1p(x) near 0?)",
    "approximate": "small error everywhere: an approximate method (a solver at its "
                   "tolerance, a truncated series?), float32 arithmetic inside a float64 "
                   "Function, or a small wrong term in a derivative (a series stopped when "
                   "the value converged, not its derivative?); set `tolerances:` only if the "
                   "method is approximate by design",
    "value_dependent": "fails on these values whatever their layout (a plain contiguous copy "
                       "fails alike): the error depends on the values, not the memory layout",
    # torch.library ops, opcheck's utilities (gradlab.checks.numeric.opcheck)
    "undeclared_mutation": "the op writes into an input its schema does not declare mutable: "
                           "add it to mutates_args (torch.compile, functionalization and "
                           "autograd take an undeclared input as untouched), or write into a "
                           "copy",
    "undeclared_alias": "an output is an input or a view of one, which a torch.library op's "
                        "schema may not say: return a copy (.clone())",
    "schema_violation": "the op breaks its schema (torch's SchemaCheckMode; the note says how)",
    "fake_mismatch": "the fake (meta) kernel disagrees with the real one in an output's shape, "
                     "dtype or strides: register_fake must compute the real output's metadata "
                     "from the inputs' (torch.compile and export trace with it)",
    "fake_missing": "no fake (meta) kernel: torch.compile, export and FX tracing cannot trace "
                    "the op; add one with register_fake (torch.library.register_fake)",
    "autograd_registration": "the op has a backend kernel but none at an autograd key: its "
                             "outputs require grad without a formula; use register_autograd "
                             "(torch.library.register_autograd), not an Autograd-key kernel "
                             "by hand",
    "autograd_missing": "no autograd formula registered: backward through the op raises; add "
                        "one with register_autograd",
    "aot_dispatch": "fails when traced by AOTAutograd with fake tensors, as torch.compile "
                    "runs it (the note says how): an op that reads data pointers or values in "
                    "Python, or whose registered autograd formula or fake kernel cannot be "
                    "traced",
}

def _subject(f: Finding) -> str:
    if f.subject == "setting":
        return f"torch setting {f.got[0]}"
    of = f" of {f.node}" if f.node else ""
    if f.subject in ("input", "grad_output"):
        shape = f" {list(f.shape)}" if f.shape is not None else ""
        return f"{f.subject} {f.index}{shape}{of}"
    return (f"{f.subject} {f.index}" if f.index >= 0 else f.subject) + of


def criterion_words(f: Finding, dtype: str) -> str:
    """The low-precision criterion's numbers on a finding it failed: 'yours 6.3e-2; the
    reference's own in bfloat16 1.2e-2 (5.2x, allowed 2x); gold in float64'."""
    if f.own_error is None or f.stats is None:
        return ""
    mine, own = f.stats.max_abs, f.own_error
    times = f"{mine / own:.2g}x" if own > 0 else "the reference exact"
    return (f"yours {mine:.2g}; the reference's own in {dtype or 'this dtype'} {own:.2g} "
            f"({times}, allowed {f.allowed_factor:g}x plus one ulp); gold in float64")


def _stats(f: Finding) -> str:
    s = f.stats
    if s is None:
        return ""
    if f.probes is not None:
        p = f.probes
        located = (f"{p.located}{'+' if p.more else ''} wrong input elements located"
                   if p.located else "errors spread too thin to locate by bisection")
        return "; ".join([f"{p.n_bad} of {p.n_probes} probes disagree (v^T J u: got "
                          f"{p.got:.6g} want {p.want:.6g})",
                          f"cosine over probes {s.cosine:.4f}, best-fit ratio {s.ratio:.4g}"
                          f"{_ratio_range(f)}",
                          located])
    what = "Jacobian entries" if s.of == "jacobian entries" else s.of
    nonfinite = f"{s.nonfinite} non-finite, " if s.nonfinite else ""
    return (f"max abs err {s.max_abs:.3g}, {nonfinite}{100 * s.frac_wrong:.3g}% of {what} wrong, "
            f"cosine {s.cosine:.4f}, best-fit ratio {s.ratio:.4g}{_ratio_range(f)}")


#: A per-element ratio range narrower than this (relative to the best-fit ratio) goes
#: unsaid: the ratio is one constant (gradlab.checks.diagnosis.hints.RATIO_SPREAD decides the hint).
SAID_SPREAD = 1e-3


def _ratio_range(f: Finding) -> str:
    """The per-element ratio's range when measured and no constant: why no factor hint."""
    s = f.stats
    if s is None or s.ratio_lo is None or s.ratio_hi is None:
        return ""
    if f.hint in ("constant_factor", "sign") or s.ratio_hi - s.ratio_lo <= SAID_SPREAD * abs(
            s.ratio):
        return ""
    return f" (per-element ratio {s.ratio_lo:.3g}..{s.ratio_hi:.3g}: no constant factor)"


def _fact(f: Finding) -> str:
    """The finding's own facts: what came against what was expected."""
    if f.subject == "explored" and isinstance(f.got, dict):
        return explored_words(f.got, f.want if isinstance(f.want, dict) else None)
    if f.subject == "edge" and isinstance(f.want, dict):
        return f"failing input, as a spec case: {case_words(f.want)}"
    if f.hint == "wrong_count":
        return f"backward returned {f.got} values for {f.want} forward inputs"
    if f.subject == "outputs":
        return f"{f.got} outputs, reference has {f.want}"
    if f.hint == "non_tensor_grad":
        return f"gradient {f.index} returned for a {f.want} argument"
    if f.got is not None and f.hint in ("wrong_shape", "summed_shape", "forward"):
        return f"shape {f.got}, expected {f.want}"
    if f.subject == "setting" and f.got is not None:
        return f"{f.got[0]} left at {f.got[1]} (was {f.want})"
    if f.got is not None:
        # a fact alone (ctx.x, 'differs by 2') or what came against what was expected
        return f"{f.got}" if f.want is None else f"{f.got}, expected {f.want}"
    if f.dims is not None:
        return f"dims {f.dims[0]} and {f.dims[1]} swapped"
    if f.equals_input is not None:
        return f"it equals the expected gradient of input {f.equals_input}"
    return ""


#: A value region's condition on input i, in words (regions.py's kinds).
REGION_WORDS = {"zero": "input {i} == 0", "negative": "input {i} < 0",
                "positive": "input {i} > 0", "ties": "input {i}'s values (nearly) tie",
                "range": "input {i}", "band": "|input {i}|"}


def pattern_words(p: Pattern) -> str:
    """Where a pattern's wrong elements lie, in words."""
    if p.kind in REGION_WORDS:
        where = REGION_WORDS[p.kind].format(i=p.input)
        if p.kind in ("range", "band"):  # a fitted region: an open end is its values' extreme
            where = (f"{where} >= {p.lo:.3g}" if p.hi is None else
                     f"{where} <= {p.hi:.3g}" if p.lo is None else
                     f"{where} is in [{p.lo:.3g}, {p.hi:.3g}]")
        return (f"wrong only where {where}: {p.wrong_share or 0:.0%} of the wrong elements, "
                f"{p.right_share or 0:.0%} of the right ones")
    if p.kind == "edges":
        return f"all wrong elements within {p.stop} of both ends of dim {p.dims[0]}"
    if p.kind == "border":
        return (f"all wrong elements within {p.stop} of the borders of dims {p.dims[0]} and "
                f"{p.dims[1]}")
    where = f"indices {p.start}..{p.stop - 1} of dim {p.dims[0]}"
    if p.kind == "tail":
        return (f"all wrong elements in {where}: the last partial tile, after {p.start} (a "
                f"multiple of {p.tile})")
    return f"all wrong elements in {where}"


def tolerance_words(f: Finding, dtype: str) -> str:
    """The tolerance that would pass, as a spec's `tolerances:` would say it."""
    if f.passing_tolerance is None:
        return ""
    atol, rtol = f.passing_tolerance
    return (f"tolerances that would pass: {{{dtype or 'this dtype'}: {{atol: {atol:.1g}, "
            f"rtol: {rtol:.1g}}}}}")


#: The checks whose base row is about the inputs a spec declares: only there may a missing
#: gradient be an input the spec should not have made require grad.
MISSING_ADVICE_CHECKS = ("gradient", "jacobian")


def describe(f: Finding, dtype: str = "", row: CheckRow | None = None) -> str:
    """One finding as a clause: 'input 1 [3, 5]: off by a constant factor 2; max abs err ...'.

    dtype: the row's, to name it in the tolerance that would pass.  row: the row the finding
    belongs to (advice that fits only some rows needs it)."""
    words = HINTS.get(f.hint, "")
    if f.hint == "constant_factor" and f.stats is not None:
        words = f"off by a constant factor {f.stats.ratio:.4g}"
    if f.hint == "missing":
        words = "gradient missing (None) for an input that requires grad"
        if (f.subject == "input" and row is not None and row.variant == "base"
                and row.check in MISSING_ADVICE_CHECKS):
            # the usual cause: a constant (filter taps, a mask) the spec left requiring grad;
            # wrong advice in second order or a requires_grad subset, where the inputs that
            # lost their gradient are not the spec's choice
            words += f" (if input {f.index} is a constant, mark it requires_grad: false)"
    where = pattern_words(f.pattern) if f.pattern is not None else ""
    body = "; ".join(p for p in (words, _fact(f), where, criterion_words(f, dtype), _stats(f),
                                 tolerance_words(f, dtype)) if p)
    return f"{_subject(f)}: {body}" if body else _subject(f)


def message(row: CheckRow) -> str:
    """What a row says, in one line: mode, row-level hint, each finding, reason, raw note."""
    parts = []
    if row.mode:
        parts.append(f"{row.mode} mode")
    if row.hint and row.hint not in {f.hint for f in row.findings}:
        parts.append(HINTS.get(row.hint, row.hint))
    parts += [describe(f, row.dtype, row) for f in row.findings]
    if row.reason:
        parts.append(REASONS.get(row.reason, row.reason))
    if row.note:
        parts.append(row.note)
    return "; ".join(parts)


def location(row: CheckRow) -> str:
    """Where: the worst wrong elements, or the user's code line where the Function raised."""
    worst = "; ".join(str(e) for e in row.worst)
    return worst or row.crash_location

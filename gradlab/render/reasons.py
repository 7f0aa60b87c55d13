"""What each reason code of a row (gradlab.results.CheckRow.reason) says, in words."""

from __future__ import annotations

#: Why a row was skipped, or passed with a remark.
REASONS: dict[str, str] = {
    "reference_surrogate": "the gradient is not the finite-difference derivative, and the "
                           "reference's is not either, while the two agree: a surrogate "
                           "gradient by design (straight-through, clipped) or values where "
                           "neither is finite, as the reference states it",
    "fd_unresolved": "not checked: the forward's own rounding noise is above what any "
                     "finite-difference step resolves (its error moves with the step)",
    "float32_accurate": "only float32-accurate, within float32's tolerance (the case's one "
                        "precision_loss warning says so)",
    "cuda_unavailable": "CUDA is not available on this machine",
    "reference_failed": "the reference failed on this case (nothing to compare with)",
    "spec_inputs": "the Function and the reference both raise on this case's inputs: the "
                   "case's arguments are wrong (shapes that do not fit, values neither "
                   "accepts), not the Function",
    "expanded_refused": "forward does not accept an expanded input",
    "ragged_refused": "forward does not accept the grown (ragged) sizes",
    "values_refused": "forward raises on these values in any layout (a contiguous copy "
                      "raises alike) where the reference accepts them: a domain narrower than "
                      "the reference's by design (a Cholesky solve of a singular matrix), or a "
                      "bug. A warn: --strict fails it",
    "expanded_refused_by_reference": "neither the Function nor the reference accepts an "
                                     "expanded input",
    "second_order_unsupported": "double backward not supported (and no reference supports it "
                                "either)",
    "second_order_missing": "capability missing: double backward",
    "raw_backward_unavailable": "backward's raw return value could not be checked",
    "first_order_failed": "not checked: first order already fails",
    "edges_after_failure": "edges not checked: the case or a variant already fails (its "
                           "failure is the one to fix first)",
    "no_custom_function": "no custom Function in the graph: only in-place writes were checked",
    "raises_as_declared": "double backward raises as declared",
    "reshaped_raises": "backward raises only at sizes your case lacks (the ragged variant's), "
                       "where forward and the reference ran: a bug if the Function is meant "
                       "for them",
    "scale_limited": "wrong only at inputs rescaled far from yours (finite values, or a "
                     "raise): an unstable formula, or an absolute scale by design (a damping "
                     "epsilon, a solver tolerance or step). A warn: --strict fails it; declare "
                     "variants: {magnitude: false} or {small: false} where the Function is not "
                     "meant for such values",
    "runs_undeclared": "double backward runs and is right, though the op declares "
                       "second_order: false",
    "inputs_failed": "could not make inputs",
    "autocast_missing": "capability missing: torch.autocast",
    "forward_ad_missing": "capability missing: forward-mode AD (no jvp)",
    "forward_ad_unsupported": "forward-mode AD not supported (and the reference has none "
                              "either, or there is no reference): nothing lost",
    "forward_ad_unavailable": "this torch has no forward-mode AD (torch.autograd.forward_ad)",
    "autocast_unsupported": "the reference does not run under torch.autocast either (nothing to "
                            "compare with)",
    "autocast_complex": "not checked: torch.autocast casts no complex tensors (they run in their "
                        "own dtype under it)",
    "graph_break": "torch.compile: same outputs and gradients as eager, with graph breaks",
    "compile_missing": "not supported: torch.compile raises",
    "vmap_missing": "not supported: torch.func.vmap raises",
    "func_grad_missing": "not supported: torch.func.grad raises",
    "deterministic_missing": "backward not deterministic",
    "noncontiguous_missing": "not supported: raises on non-contiguous inputs",
    "cuda_missing": "not supported: raises on CUDA",
    "batched_grad_missing": "not supported: backward raises under vmap over grad_outputs "
                            "(autograd.grad with is_grads_batched)",
    "batched_grad_unsupported": "backward under vmap over grad_outputs not supported (and the "
                                "reference's raises too): nothing lost",
    "batched_grad_old_torch": "not checked: this torch's autograd.grad has no "
                              "is_grads_batched",
    "triton_interpreted": "not checked: under TRITON_INTERPRET=1 a triton_op's kernel runs on "
                          "the fake tensors' memory, which opcheck's fake and AOT rows do not "
                          "have (a false failure); checked on a GPU without the interpreter",
    "tensor_list_input": "not checked: gradients through a list of tensors (an argument "
                         "holding tensors that require grad: a custom op's Tensor[]); gradlab "
                         "checks tensors passed one argument each: check `lambda a, b, *rest: "
                         "op([a, b], *rest)`",
    "data_dependent_shape": "not checked: the op's output shape depends on its values, so "
                            "it cannot be traced with static shapes (torch.compile breaks the "
                            "graph there); traced with dynamic shapes it passed",
    "old_torch": "not checked: this torch is older than a feature the check needs (the note "
                 "names it and the torch release that brought it)",
    "kink": "a non-differentiable point in the example values (left and right differences "
            "disagree): judged one-sidedly",
    "tie_convention": "at tied values the gradient is shared among the ties otherwise than "
                      "the reference's convention, but each tied group's total agrees (another "
                      "valid subgradient)",
    "overflow_alike": "non-finite where the reference overflows alike in this dtype (the "
                      "dtype's range, not the Function's bug)",
    "past_clamp": "wrong only where the reference's gradient is exactly 0 (past a clamp or "
                  "a saturation your case's values never reach): a convention there, or a "
                  "missing mask. A warn: --strict fails it",
    "method_accuracy": "off only at this variant's values, by an error small everywhere with "
                       "its direction kept, where the base case is within tolerance: an "
                       "approximate method's accuracy on these values (the note's numbers). A "
                       "warn: --strict fails it",
    "outside_domain": "the reference itself raises, or is finite nowhere, in float64 on the "
                      "variant's values: outside its domain, not judgeable (see the note)",
    "ill_conditioned": "the reference itself is ill-conditioned on the variant's values "
                       "(condition number above ~1e5): not judgeable (the note's numbers)",
    "special_kink": "planted special values left out where they are a kink of the reference "
                    "(its one-sided slopes disagree, the Function's value between them: a "
                    "convention such as relu'(0)) or outside its domain",
    "internal_error": "gradlab itself failed here (a gradlab bug: please report it with the "
                      "traceback from the JSON report)",
    "reference_refused": "the reference refuses this variant's inputs (outside the op's "
                         "domain: nothing to compare with, not a bug of the Function)",
    "reference_refused_function_accepts": "the reference refuses this variant's inputs and the "
                                          "Function computes anyway (it lacks input validation? "
                                          "not a failure: nothing to compare with)",
    "no_reference": "no reference: compared with the Function's own contiguous run",
    "explore_no_reference": "not explored: the search compares with a reference, and this op "
                            "has none",
    "explore_nothing_judged": "not explored: forward refused every input the search tried in "
                              "float64, the case's own too, or the reference could not judge "
                              "them (the base rows say why)",
    "explore_budget_spent": "not explored: the budget ran out before the search judged an "
                            "input (a first call that compiles, numba or torch.compile, can "
                            "take longer than the budget): give --explore more seconds",
    "edges_no_reference": "edges not checked: an edge input is compared with a reference, "
                          "and this op has none (without one only an empty output is judged, "
                          "and no edge input gave one)",
    "cost_envelope": "stopped: this variant ran far longer than the base case (outside the "
                     "op's cost envelope, e.g. a solver's steps growing with the magnitude; "
                     "gradlab.check(cost_envelope=) sets the factor, 0 never stops)",
    "time_limit": "stopped here: the case ran past its time limit (--timeout, "
                  "gradlab.check(timeout=)); the rows made before are kept",
    "memory_limit": "stopped here: the check's memory grew past its limit "
                    "(--max-memory, gradlab.check(max_memory=)); the rows made before are kept",
    "timeout_spent": "not run: the case's time limit (--timeout) was spent by its other items",
    "no_reference_base": "no reference: the forward's values are not verified (a run compared "
                         "with itself measures nothing); the variants are compared with the "
                         "Function's own contiguous run, the gradients with finite differences "
                         "(jacobian)",
}

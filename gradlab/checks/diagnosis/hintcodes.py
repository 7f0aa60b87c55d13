"""Every hint code gradlab gives, by the gradlab.checks module that decides it (the
vocabulary of gradlab.checks.diagnosis.hints' decisions and of the measuring modules' own facts).

A module of its own beside hints.py: hints.py holds the decisions and their thresholds; a new
check registers the codes it writes here.
"""

from __future__ import annotations

from gradlab.checks.diagnosis.hints import LEVEL_HINTS, ONLY_HINT, PATTERN_HINTS

#: Every hint code gradlab gives, by the gradlab.checks module that decides it: here, or the
#: module that measures a fact which is its own cause (a contract breach, a crash, a missing
#: capability, a worker's death).  gradlab.render.words.HINTS words exactly these, and each is
#: written in its module (tests/test_hint_codes.py; capabilities' `*_missing` are f-strings).
CODES: dict[str, tuple[str, ...]] = {
    "hints": ("non_finite", "zero", "constant_factor", "sign", *LEVEL_HINTS,
              *dict.fromkeys(PATTERN_HINTS.values()), "transposed", "swapped", *ONLY_HINT.values(),
              "value_dependent", "rng_replay", "second_order_only", "autocast_only",
              "also_without_autocast", "wrong_count", "non_tensor_grad",
              "wrong_shape", "inplace_saved", "crash"),
    "compare": ("forward", "missing"), "runner": ("global_state", "tf32", "input_freed"),
    "numerical": ("cached_forward", "conjugate", "no_chain_rule"),
    "forward_ad": ("forward_ad_only", "forward_ad_missing"), "autocast": ("autocast_missing",),
    "contract": ("inplace_grad_output", "inplace_input", "inplace_buffer", "not_reentrant",
                 "state_outside_ctx", "output_differentiable", "output_not_differentiable",
                 "gradient_dropped", "grad_side_effect"),
    "rawbackward": ("summed_shape", "wrong_dtype", "wrong_device", "ctx_output",
                    "ctx_output_detached", "ctx_input"),
    "second_order": ("second_order_claimed", "second_order_missing", "once_differentiable"),
    "verdicts": ("expanded_refused", "scale_constant"),
    "isolate": ("timeout", "worker_died", "worker_load"),
    "explore": ("explored_wrong", "explored_raises", "explored_empty", "explored_broadcast",
                "explored_scale", "explored_domain", "explored_reshaped",
                "explored_constant", "explored_unread"),
    "edges": ("edge_wrong", "edge_raises", "edge_empty", "edge_domain", "edge_reshaped",
              "edge_broadcast", "edge_scale", "edge_negative", "edge_unread",
              "graph_cut"),
    "capabilities": ("compile_wrong", "vmap_wrong", "func_grad_wrong", "cuda_wrong",
                     "compile_missing", "vmap_missing", "func_grad_missing",
                     "deterministic_missing", "noncontiguous_missing", "cuda_missing"),
    "batched_grad": ("batched_grad_wrong", "batched_grad_missing"),
    "opcheck": ("undeclared_mutation", "undeclared_alias", "schema_violation", "fake_mismatch",
                "fake_missing", "autograd_registration", "autograd_missing", "aot_dispatch"),
}

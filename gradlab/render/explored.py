"""What `--explore` searched, in words: the whole search and its shrunk failing input as a spec
case (a finding's facts), and one short line per passing op and case (the CLI's)."""

from __future__ import annotations

from typing import Any

#: The words of the hints of the edges check and the explore search (words.HINTS has them).
SEARCH_HINTS: dict[str, str] = {
    "edge_wrong": "wrong on an input at an edge of the case's signature (the variant names "
                  "which: an empty, one-element or non-square size, all-zero values, an int, "
                  "float, tuple, flag or mode argument moved, a batch, a rank more): the spec "
                  "case to paste follows",
    "edge_raises": "backward raises on an input at an edge of the case's signature, where "
                   "forward and the reference ran: the spec case to paste follows",
    "edge_empty": "wrong, or backward raises, on an input with an empty tensor (a size or an "
                  "int argument at 0) that forward accepted: the spec case to paste follows",
    "edge_domain": "finite but wrong, or raising, only at values beyond the range the case's "
                   "own values span (0, or one sign), finite but other than the reference's "
                   "at an input all zero (padding by convention?), or only where the "
                   "reference's gradient is 0 (past a clamp the case never reaches): a bug if "
                   "callers pass such values",
    "explored_domain": "finite but wrong, or raising, only at values beyond the range the "
                       "case's own values span (0, or one sign), finite but other than the "
                       "reference's at an input all zero (padding by convention?), or only "
                       "where the reference's gradient is 0 (past a clamp the case never "
                       "reaches): a bug if callers pass such values",
    "edge_reshaped": "backward raises only at a shape or an int argument the case does not "
                     "have, where forward and the reference ran: a bug if the Function is "
                     "meant for it",
    "explored_reshaped": "backward raises only at a shape or an int argument the case does "
                         "not have, where forward and the reference ran: a bug if the Function "
                         "is meant for it",
    "edge_broadcast": "wrong or raising only where one argument's dim is moved apart from the "
                      "others' (the reference broadcasts them)",
    "edge_scale": "off only at rescaled values, every value finite",
    "edge_unread": "wrong only at a setting of an int argument the reference does not read (its "
                   "outputs stay the same): an iteration count gives a less converged value "
                   "by design, a block size that changes the result is a bug",
    "explored_unread": "wrong only at a setting of an int argument the reference does not "
                       "read (its outputs stay the same): an iteration count gives a less "
                       "converged value by design, a block size that changes the result is a "
                       "bug",
    "edge_negative": "wrong only at an int argument of -1, where forward agrees with the "
                     "reference (a cropping pad, a shift back): a bug if the Function is "
                     "meant to take negative values",
    "graph_cut": "in float16 the output does not require grad (it does in float64): the half "
                 "path cuts the graph (a .detach() or a conversion outside autograd), so "
                 "nothing upstream trains",
    "explored_wrong": "wrong on an input the explore search found (shrunk to the smallest that "
                      "fails; the spec case to paste follows)",
    "explored_raises": "backward raises on an input the explore search found, where forward "
                       "and the reference ran (shrunk to the smallest that does; the spec case "
                       "to paste follows)",
    "explored_empty": "wrong, or backward raises, on an input with an empty tensor (an empty "
                      "batch, no points) that forward accepted: shrunk to the smallest (the "
                      "spec case to paste follows)",
    "explored_broadcast": "wrong or raising only when one argument's dim is moved apart from "
                          "the others' (shapes that disagree, which the reference broadcasts): "
                          "a bug only if callers broadcast",
    "explored_scale": "off only at values rescaled 1e-6x or 1e3x, every value finite: an "
                      "unstable formula, or a method's absolute scale by design (a damping "
                      "epsilon)",
    "explored_constant": "wrong or raising only where a constant (a tensor that does not "
                         "require grad: targets, boxes, poses) takes values gradlab made up: "
                         "a bug if the Function accepts any such values",
}


def explored_words(facts: dict[str, Any], case: dict[str, Any] | None) -> str:
    """What the explore search tried, and the shrunk failing input as a spec case (one flow
    item to paste under a spec's `cases:`)."""
    sizes = "; ".join(f"{n} -> {', '.join(map(str, ms))}" for n, ms in facts["sizes"].items())
    said = (f"explored {facts['tried']} inputs in {facts['seconds']:.1f} s: sizes {sizes or '-'}"
            f"; values {', '.join(facts['values']) or '-'}")
    settings = "; ".join(f"{i} -> {', '.join(map(str, vs))}"
                         for i, vs in facts.get("settings", {}).items())
    if settings:
        said += f"; arguments {settings}"
    if facts.get("refused"):
        said += f"; {facts['refused']} refused by forward (not failures)"
    if facts["unjudgeable"]:
        said += f"; {facts['unjudgeable']} not judgeable (the reference raises, is not finite " \
                "or ill-conditioned there)"
    if case is not None:
        said += f"; smallest failing input, as a spec case: {case_words(case)}"
    return said


def case_words(case: dict[str, Any]) -> str:
    """A point as a spec case to paste (explore.spec_case's), saying where a spec cannot."""
    sets = ", ".join(f"{i}: {_argument(kv)}" for i, kv in case["set"].items())
    said = f"- {{name: {case['name']}, set: {{{sets}}}}}"
    if any(isinstance(kv, dict) and 0 in kv.get("shape", [1]) for kv in case["set"].values()):
        said += " (an empty shape, which a spec cannot hold: gradlab.check with tensors of " \
                "these shapes reproduces it)"
    return said


def _argument(kv: Any) -> str:
    """One argument of a spec case's `set`: a tensor's keys in braces, a plain value as is."""
    if isinstance(kv, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in kv.items()) + "}"
    return str(kv)


def explored_summary(facts: dict[str, Any]) -> str:
    """explored_words' first clause, short: what the search covered."""
    kinds = [k for k in facts["values"] if k != "drawn"]
    sizes = sorted({m for ms in facts["sizes"].values() for m in ms})
    said = f"explored {facts['tried']} inputs in {facts['seconds']:.1f} s"
    if sizes:
        said += f": sizes {sizes[0]}..{sizes[-1]} on {len(facts['sizes'])} axes"
    said += f"; values {', '.join(kinds)}" if kinds else "; no value axes"
    if facts["unjudgeable"]:
        said += f"; {facts['unjudgeable']} not judgeable"
    return said

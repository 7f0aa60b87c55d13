"""What `--explore` searched, in words: the whole search and its shrunk failing input as a spec
case (a finding's facts), and one short line per passing op and case (the CLI's)."""

from __future__ import annotations

from typing import Any


def explored_words(facts: dict[str, Any], case: dict[str, Any] | None) -> str:
    """What the explore search tried, and the shrunk failing input as a spec case (one flow
    item to paste under a spec's `cases:`)."""
    sizes = "; ".join(f"{n} -> {', '.join(map(str, ms))}" for n, ms in facts["sizes"].items())
    said = (f"explored {facts['tried']} inputs in {facts['seconds']:.1f} s: sizes {sizes or '-'}"
            f"; values {', '.join(facts['values']) or '-'}")
    if facts.get("refused"):
        said += f"; {facts['refused']} refused by forward (not failures)"
    if facts["unjudgeable"]:
        said += f"; {facts['unjudgeable']} not judgeable (the reference raises, is not finite " \
                "or ill-conditioned there)"
    if case is not None:
        sets = ", ".join(f"{i}: {{{', '.join(f'{k}: {v}' for k, v in kv.items())}}}"
                         for i, kv in case["set"].items())
        said += f"; smallest failing input, as a spec case: - {{name: {case['name']}, set: " \
                f"{{{sets}}}}}"
        if any(0 in kv.get("shape", [1]) for kv in case["set"].values()):
            said += " (an empty shape, which a spec cannot hold: gradlab.check with tensors of " \
                    "these shapes reproduces it)"
    return said


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

"""Error statistics between a gradient and the one it should be, and likely-cause hints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gradlab.model import Tolerance

#: Likely-cause codes and the sentence each stands for.
HINTS: dict[str, str] = {
    "no_chain_rule": "backward ignores grad_output (not multiplied by it: missing chain rule)",
    "constant_factor": "off by a constant factor",
    "sign": "sign flipped",
    "transposed": "gradient is transposed",
    "swapped": "gradients swapped between inputs",
    "missing": "gradient missing (None) for an input that requires grad",
    "zero": "gradient is zero where it should not be",
    "noncontiguous_only": "fails only for non-contiguous inputs (assumes contiguous memory)",
    "channels_last_only": "fails only for channels_last inputs (assumes NCHW-contiguous memory)",
    "expanded_only": "fails only for expanded (stride-0) inputs",
    "grad_output_layout": "fails only for non-contiguous or expanded grad_output (backward "
                          "assumes a contiguous grad_output; .sum() gives a stride-0 one)",
    "requires_grad_subset": "fails only for some requires_grad subsets (gradient gated on the "
                            "wrong needs_input_grad entry?)",
    "second_order_only": "first order is right but second order is wrong (a tensor kept on ctx "
                         "instead of save_for_backward, or a backward that is not differentiable)",
    "second_order_claimed": "the op claims no double backward, but second order ran without error",
    "inplace_grad_output": "backward modified grad_output in place",
    "inplace_saved": "a saved tensor or input was modified in place during backward",
    "inplace_input": "forward modified an input in place without ctx.mark_dirty",
    "wrong_count": "backward returned the wrong number of gradients",
    "non_tensor_grad": "a gradient was returned for a non-tensor argument (must be None)",
    "wrong_shape": "gradient has the wrong shape",
    "wrong_dtype": "gradient has the wrong dtype",
    "wrong_device": "gradient is on the wrong device",
    "forward": "forward output differs from the reference",
    "undefined_grad": "backward fails when an output's gradient is undefined (None)",
    "crash": "the Function raised an exception",
    "size1_only": "fails only for size-1 dimensions (a squeeze() shape edge case?)",
}


@dataclass
class Diff:
    """How far `got` is from `want`, and where."""

    max_abs: float
    max_rel: float
    frac_wrong: float
    cosine: float
    #: c minimising |got - c*want|: the constant factor got is off by (1.0 when right).
    ratio: float
    #: flat indices of the worst elements with (got, want), worst first.
    worst: list[tuple[int, float, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.frac_wrong == 0.0


def compare(got: Tensor, want: Tensor, tol: Tolerance, k: int = 5, *,
            scaled: bool = False) -> Diff:
    """Compare two tensors of equal numel elementwise: |got-want| <= atol + rtol*|want|.

    scaled: atol is relative to the tensor's largest magnitude (when above 1).  Low-precision
    results carry rounding error proportional to the terms summed, not to each element, so an
    element that cancels to ~0 inside a tensor of large values would otherwise be a false alarm.
    """
    g = got.detach().reshape(-1).to(torch.float64).cpu()
    w = want.detach().reshape(-1).to(torch.float64).cpu()
    if g.numel() == 0:
        return Diff(0.0, 0.0, 0.0, 1.0, 1.0)
    if scaled:
        finite = w[torch.isfinite(w)]
        top = float(finite.abs().max()) if finite.numel() else 1.0
        tol = Tolerance(tol.atol * max(1.0, top), tol.rtol)
    err = (g - w).abs()
    # NaN/inf in got is always wrong; nan_to_num keeps the statistics finite.
    bad = ~torch.isfinite(g) & torch.isfinite(w)
    err = torch.where(bad, torch.full_like(err, float("inf")), torch.nan_to_num(err, nan=0.0))
    wrong = err > tol.atol + tol.rtol * w.abs()
    rel = err / w.abs().clamp(min=tol.atol)
    gn, wn = g.norm(), w.norm()
    cosine = float(g @ w / (gn * wn)) if gn > 0 and wn > 0 else (1.0 if gn == wn else 0.0)
    ratio = float(g @ w / (wn * wn)) if wn > 0 else (1.0 if gn == 0 else float("inf"))
    order = torch.argsort(err, descending=True)[:k]
    worst = [(int(i), float(g[i]), float(w[i])) for i in order if wrong[i]]
    return Diff(float(err.max()), float(rel.max()), float(wrong.double().mean()), cosine, ratio,
                worst)


def unravel(flat: int, shape: Sequence[int]) -> list[int]:
    """A flat index as a list of indices into `shape`."""
    if not shape:
        return []
    return [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))]


def factor_hint(d: Diff) -> str:
    """'constant_factor' / 'sign' / 'zero' when the error has that shape, else ''."""
    if d.ok:
        return ""
    if abs(d.ratio) < 1e-12 or (d.cosine == 0.0 and d.max_abs > 0 and abs(d.ratio) < 1e-6):
        return "zero"
    if d.cosine > 0.999 and abs(d.ratio - 1) > 1e-3:
        return "constant_factor"
    if d.cosine < -0.999:
        return "sign" if abs(d.ratio + 1) < 1e-3 else "constant_factor"
    return ""


def transposed_hint(got: Tensor, want: Tensor, tol: Tolerance) -> tuple[int, int] | None:
    """The pair of dims whose swap turns `got` into `want` (same-size dims only), or None."""
    if got.shape != want.shape:
        return None
    for a in range(want.dim()):
        for b in range(a + 1, want.dim()):
            if want.shape[a] == want.shape[b] and want.shape[a] > 1:
                if compare(got.transpose(a, b), want, tol).ok:
                    return (a, b)
    return None


def describe(d: Diff, hint: str, extra: str = "") -> str:
    """One readable sentence for a failed comparison."""
    words = HINTS.get(hint, "")
    if hint == "constant_factor":
        words = f"off by a constant factor {d.ratio:.4g}"
    stats = (f"max abs err {d.max_abs:.3g}, {100 * d.frac_wrong:.3g}% of elements wrong, "
             f"cosine {d.cosine:.4f}, best-fit ratio {d.ratio:.4g}")
    return "; ".join(p for p in (words, extra, stats) if p)


def details(d: Diff) -> dict[str, Any]:
    """Diff statistics as a plain dict for reports."""
    return {"max_abs_err": d.max_abs, "max_rel_err": d.max_rel, "frac_wrong": d.frac_wrong,
            "cosine": d.cosine, "ratio": d.ratio}

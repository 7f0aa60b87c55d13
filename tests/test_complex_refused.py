"""Sparse tensors are refused up front (their values cannot be laid out in the memory layouts
the checks use).  Complex tensors, once refused here too, are checked: tests/test_complex.py."""

from __future__ import annotations

import pytest
import torch

import gradlab


def test_sparse_inputs_are_refused_by_the_api_too() -> None:
    dense = torch.randn(3, 4, dtype=torch.float64)
    sparse = dense.to_sparse().requires_grad_()
    with pytest.raises(ValueError, match=r"args\[0\] has layout torch.sparse_coo"):
        gradlab.check(torch.sparse.sum, [sparse])
    assert gradlab.check(torch.sin, [dense.requires_grad_()], reference=torch.sin).passed

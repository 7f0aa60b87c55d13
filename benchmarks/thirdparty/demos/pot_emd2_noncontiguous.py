"""POT 0.9.7.post1: ot.emd2 (and ot.emd) raise on a non-contiguous marginal, a demonstration
without gradlab.

The torch backend hands the marginals to the C network simplex as numpy views of the tensors;
a column slice of a matrix is a valid 1-D tensor but a non-contiguous ndarray, and the C code
refuses it ("ValueError: ndarray is not C-contiguous") instead of copying.  The same values
made contiguous solve.  (gradlab's noncontiguous[0] variant meets this as an error row.)

    python benchmarks/thirdparty/demos/pot_emd2_noncontiguous.py
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("GRADLAB_THIRDPARTY",
                                  str(Path("~/.cache/gradlab-thirdparty").expanduser())))

import ot
import torch

a = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
b = torch.tensor([0.1, 0.4, 0.25, 0.25], dtype=torch.float64)
m = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
a_slice = torch.stack([a, a], 1)[:, 0]  # the same values, a column of a (3, 2) matrix
print("contiguous a:      ", float(ot.emd2(a, b, m)))
print("a_slice == a:      ", bool((a_slice == a).all()), " contiguous:", a_slice.is_contiguous())
try:
    print("non-contiguous a:  ", float(ot.emd2(a_slice, b, m)))
    bug = False
except ValueError as exc:
    print("non-contiguous a:   ValueError:", exc)
    bug = True
print("BUG REPRODUCED" if bug else "not reproduced")
sys.exit(0 if bug else 1)

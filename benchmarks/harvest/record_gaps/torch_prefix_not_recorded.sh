#!/usr/bin/env bash
# gradlab record (i38b cfe8147) silently records nothing from a package whose module name starts
# with "torch" (torchkbnufft, torch_struct, torchsparsegradutils, torchdiffeq, ...): the same
# Function in torchfoo.py and barfoo.py, one call each; only barfoo's is recorded, and the summary
# says "1 op called" (torchfoo's call is neither recorded nor listed as unreplayable).
# Use: bash benchmarks/harvest/record_gaps/torch_prefix_not_recorded.sh  (from the repo root)
set -euo pipefail
D=$(mktemp -d)
for m in torchfoo barfoo; do cat > "$D/$m.py" <<'PY'
import torch
class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x
    @staticmethod
    def backward(ctx, g):
        return 2 * g
PY
done
cat > "$D/main.py" <<'PY'
import torch, torchfoo, barfoo
x = torch.randn(3, dtype=torch.float64, requires_grad=True)
(torchfoo.Double.apply(x) + barfoo.Double.apply(x)).sum().backward()
PY
GL="$(pwd)/.venv/bin/gradlab"
(cd "$D" && "$GL" record --out "$D/out" -- "$(dirname "$GL")/python" main.py)

#!/usr/bin/env bash
# Installs the third-party packages whose custom autograd.Functions the corpus checks,
# pinned, into a scratch folder outside the repository (their code never enters the repo).
# --no-deps so pip cannot replace the system torch / numpy; extra deps are listed explicitly.
# Use: bash benchmarks/thirdparty/install.sh ; then PYTHONPATH="$GRADLAB_THIRDPARTY" ...
set -euo pipefail
TARGET="${GRADLAB_THIRDPARTY:-$HOME/.cache/gradlab-thirdparty}"
mkdir -p "$TARGET"
pipi() { python3 -m pip install --quiet --disable-pip-version-check --target "$TARGET" --no-deps "$@"; }

# lead picks
# configs_lead.py: torchdiffeq, torchsde (+ trampoline), POT, roma, kornia (+ kornia_rs, a binary
# wheel its io module imports at import time); torchinterp1d (an sdist: pure Python, built by
# pip) for KNOWN_BUGS.  numpy, scipy and packaging are the system's, as torch is.
pipi torchdiffeq==0.2.5 torchsde==0.2.6 trampoline==0.1.2 POT==0.9.7.post1 roma==1.8.0 \
     kornia==0.9.0 kornia_rs==0.2.0 torchinterp1d==1.1

# independent picks
# configs_independent.py: entmax, sparsemax, qpth, pytorch-wavelets (+ its deps PyWavelets, six);
# demos/ also uses torch-struct. qpth's cvxpy and pytorch-wavelets' pkg_resources imports are
# shimmed at import time (unused code paths), so neither cvxpy nor an old setuptools is installed.
pipi entmax==1.3 sparsemax==0.1.9 qpth==0.0.18 \
     pytorch-wavelets==1.3.0 PyWavelets==1.8.0 six==1.17.0 torch-struct==0.5

# fresh picks (issue 39's session: a helper who had not read gradlab's checks)
# configs_fresh.py and demos/fresh/: timm (its activations_me.py loaded by path), pyro-ppl (+
# pyro-api, opt-einsum), zuko, xitorch, diffsort, torchlie, memory-efficient-attention-pytorch
# (+ einops)
pipi timm==1.0.31 pyro-ppl==1.9.2 pyro-api==0.1.2 opt-einsum==3.4.0 zuko==1.6.0 \
     xitorch==0.5.1 diffsort==0.2.0 torchlie==0.1.0 memory-efficient-attention-pytorch==0.1.6 \
     einops==0.8.2 revlib==1.7.2 tqdm==4.70.1

echo "installed into $TARGET"

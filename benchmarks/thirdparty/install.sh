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

echo "installed into $TARGET"

#!/usr/bin/env bash
# Set up gradlab in ./.venv (once) and run the main job or the tests.
#
#   bash scripts/dev.sh check [ARGS...]   # gradlab check (default: every spec under specs/)
#   bash scripts/dev.sh test  [ARGS...]   # the test suite (pytest)
#   bash scripts/dev.sh bench [ARGS...]   # gradlab bench (default: specs/)
#   bash scripts/dev.sh gpu   [ARGS...]   # on a GPU machine: every CUDA phase, one report folder
#                                         # (scripts/gpu.py; --dry-run plans it, --phase NAME)
#
# PyTorch: the venv sees the system's site-packages, so a torch already installed (a CUDA build
# on a GPU machine, say) is used as it is.  Only when no torch is importable does this install
# one: $GRADLAB_TORCH (default torch==2.13.0, which on the project's CPU machines is a local CPU
# wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${GRADLAB_VENV:-.venv}
TORCH_REQ=${GRADLAB_TORCH:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$VENV"
fi
VPY="$VENV/bin/python"

if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
    echo "dev.sh: no torch found; installing $TORCH_REQ" >&2
    "$VPY" -m pip install -q "$TORCH_REQ"
fi

# Reinstall only when pyproject.toml changed since the last install.
stamp="$VENV/.gradlab-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VPY" -m pip install -q -e ".[test]"
    echo "$want" >"$stamp"
fi

cmd=${1:-check}
[ $# -gt 0 ] && shift
case "$cmd" in
    check) [ $# -eq 0 ] && set -- specs/; exec "$VENV/bin/gradlab" check "$@" ;;
    bench) [ $# -eq 0 ] && set -- specs/; exec "$VENV/bin/gradlab" bench "$@" ;;
    # two workers (pytest-xdist): the suite is CPU-bound and this machine has two cores;
    # GRADLAB_TEST_WORKERS=0 runs it in one process.  loadgroup: tests marked with one
    # xdist_group share a worker (and its module-scoped fixture)
    test) exec "$VPY" -m pytest -n "${GRADLAB_TEST_WORKERS:-2}" --dist loadgroup "$@" ;;
    gpu) exec "$VPY" scripts/gpu.py "$@" ;;
    *) echo "usage: bash scripts/dev.sh check|test|bench|gpu [ARGS...]" >&2; exit 2 ;;
esac

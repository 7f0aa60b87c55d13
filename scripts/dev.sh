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
# one (torch==2.13.0, which on the project's CPU machines is a local CPU wheel).
#
# Another torch (the tested range, docs/ci.md):  GRADLAB_TORCH=torch==2.1.2 bash scripts/dev.sh test
# sets up a venv of its own for that request, .venv-torch-2.1.2 (GRADLAB_VENV names another),
# WITHOUT the system's site-packages, installs exactly that torch into it (from pip's index; with
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu, the small CPU wheel) and runs there.
# torch is pinned while gradlab's dependencies install, so they never upgrade it; a torch older
# than 2.4 (built against numpy 1; NumPy 2 support came in 2.4) gets numpy<2.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
SITE=(--system-site-packages)
TORCH_REQ=torch==2.13.0
VENV=${GRADLAB_VENV:-.venv}
if [ -n "${GRADLAB_TORCH:-}" ]; then
    TORCH_REQ=$GRADLAB_TORCH
    SITE=()
    # torch==2.1.* -> .venv-torch-2.1
    VENV=${GRADLAB_VENV:-.venv-$(printf %s "$TORCH_REQ" | sed -e 's/[^A-Za-z0-9.]\{1,\}/-/g' \
                                                             -e 's/[-.]*$//')}
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "${SITE[@]}" "$VENV"
fi
VPY="$VENV/bin/python"

tstamp="$VENV/.gradlab-torch"
if [ -n "${GRADLAB_TORCH:-}" ] && [ "$(cat "$tstamp" 2>/dev/null)" != "$TORCH_REQ" ]; then
    echo "dev.sh: installing $TORCH_REQ into $VENV" >&2
    "$VPY" -m pip install -q "$TORCH_REQ"
    echo "$TORCH_REQ" >"$tstamp"
    rm -f "$VENV/.gradlab-installed"
elif ! "$VPY" -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('torch'))" \
        >/dev/null 2>&1; then  # found, not imported: importing torch costs 1.5 s per call
    echo "dev.sh: no torch found; installing $TORCH_REQ" >&2
    "$VPY" -m pip install -q "$TORCH_REQ"
fi

# Reinstall only when pyproject.toml changed since the last install.  The constraints keep the
# torch there is (gradlab's dependencies must not replace it) and numpy 1 under an old torch.
stamp="$VENV/.gradlab-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    pins="$VENV/.gradlab-constraints.txt"
    "$VPY" - >"$pins" <<'PINS'
from importlib.metadata import version
v = version("torch")  # the installed distribution's (torch.__version__ may add +cu132)
print(f"torch=={v}")
major, minor = (int(p) for p in v.split(".")[:2])
if (major, minor) < (2, 4):  # wheels built against numpy 1: numpy 2 breaks torch.from_numpy
    print("numpy<2")
PINS
    # a `gradlab` distribution here is this checkout from before its rename to gradlab-torch
    # (README, "Install") or PyPI's unrelated project: either would shadow this checkout
    "$VPY" -m pip uninstall -y -q gradlab >/dev/null 2>&1 || true
    "$VPY" -m pip install -q -c "$pins" -e ".[test]"
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
    # bytecode cached in the venv, whatever PYTHONDONTWRITEBYTECODE says: without it every
    # pytest worker and every child process compiles gradlab, the tests and their imports from
    # source again (collection 6.5 s instead of 3.4 s); the tree itself stays free of .pyc
    test) exec env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$(cd "$VENV" && pwd)/pycache" \
              "$VPY" -m pytest -n "${GRADLAB_TEST_WORKERS:-2}" --dist loadgroup "$@" ;;
    gpu) exec "$VPY" scripts/gpu.py "$@" ;;
    *) echo "usage: bash scripts/dev.sh check|test|bench|gpu [ARGS...]" >&2; exit 2 ;;
esac

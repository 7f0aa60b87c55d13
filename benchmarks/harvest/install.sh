#!/usr/bin/env bash
# Installs the harvest's third-party packages (issue 38 part 5), pinned, outside the repository:
# $GRADLAB_HARVEST/site holds the installed packages (pip --target, --no-deps so pip never replaces
# torch or numpy; every extra dependency is listed here explicitly), $GRADLAB_HARVEST/src the
# unpacked sdists whose tests/ the harvest runs (tests usually ship only in the sdist).
# Use: bash benchmarks/harvest/install.sh [PYTHON] ; then python benchmarks/harvest/run_harvest.py
set -euo pipefail
TARGET="${GRADLAB_HARVEST:-$HOME/.cache/gradlab-harvest}"
PY="${1:-python3}"
mkdir -p "$TARGET/site" "$TARGET/src" "$TARGET/sdist"
pipi() { "$PY" -m pip install --quiet --disable-pip-version-check --target "$TARGET/site" --no-deps "$@"; }
sdist() {   # NAME==VERSION: the sdist, unpacked under src/ (its tests and examples)
    "$PY" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
        --no-build-isolation -d "$TARGET/sdist" "$1" >/dev/null 2>&1 || \
    "$PY" -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps -d "$TARGET/sdist" "$1"
}

# the packages whose custom autograd.Functions the harvest records
PKGS=(
  pypose==0.9.5 linear-operator==0.6.1 snntorch==1.0.0 spikingjelly==2.0.0 sinabs==3.1.3
  geomloss==0.3.1 brevitas==0.13.4 torchkbnufft==1.5.2 kymatio==0.3.0 torch-interpol==0.3.0
  torchsparsegradutils==0.2.7 pylops==2.8.0 memcnn==1.5.2 pytorch-tabnet==4.1.0
  efficientnet-pytorch==0.7.1 pytorch-revgrad==0.2.0 norse==1.1.0 gpytorch==1.15.2 monai==1.6.1
  entmax==1.3 sparsemax==0.1.9 torch-struct==0.5 roma==1.8.0
)
# their dependencies beyond torch and numpy (pure Python, or binary wheels of their own)
DEPS=(
  scipy==1.16.3 jaxtyping==0.3.3 wadler-lindig==0.1.7 mpmath==1.3.0 packaging==25.0
  dependencies==2.0.1 typing-extensions==4.15.0 appdirs==1.4.4 pbr==6.1.1 loguru==0.7.3
  nir==1.0.6 nirtorch==2.0.5 h5py==3.14.0
)
# the sdists whose tests run_harvest.py runs (the others' wheels ship their tests, or an example
# program under examples/ drives them)
SDISTS=(linear-operator==0.6.1 sinabs==3.1.3 torchkbnufft==1.5.2)
pipi "${PKGS[@]}" "${DEPS[@]}"
for p in "${SDISTS[@]}"; do sdist "$p" || echo "no sdist for $p"; done
for a in "$TARGET"/sdist/*.tar.gz; do tar -xzf "$a" -C "$TARGET/src"; done
for a in "$TARGET"/sdist/*.zip; do [ -e "$a" ] && (cd "$TARGET/src" && unzip -oq "$a"); done
echo "installed into $TARGET"

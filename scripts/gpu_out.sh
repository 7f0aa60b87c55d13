#!/usr/bin/env bash
# The GPU command for a machine that hands back only $OUT (at most 8 files): the CUDA tests and
# the involution benchmark (scripts/gpu.py --phase tests --phase involution, under 7 minutes),
# then a few files copied out and the whole report folder as one tarball.
#
#   OUT=/some/folder bash scripts/gpu_out.sh          # PYTHON=python3 by default
#   OUT=... bash scripts/gpu_out.sh --phase involution --phase check --timeout check=90
#                                       # other phases, in this order, with other timeouts
#
# Writes $OUT/console.log, summary.md, involution.md, involution.json, pytest-tail.log and
# gpu-run.tar.gz (everything: env, tests/junit.xml, tests/pytest.log, involution/*); exits with
# scripts/gpu.py's status.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder whose files come back}"
PY=${PYTHON:-python3}
run=$(mktemp -d)/run
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ $# -eq 0 ] && set -- --phase tests --phase involution
"$PY" scripts/gpu.py "$@" --out "$run" >"$OUT/console.log" 2>&1
rc=$?
cp "$run/summary.md" "$OUT/" 2>/dev/null
cp "$run/involution/involution.md" "$run/involution/involution.json" "$OUT/" 2>/dev/null
cp "$run/check/summary.md" "$OUT/check-summary.md" 2>/dev/null
tail -c 400000 "$run/tests/pytest.log" >"$OUT/pytest-tail.log" 2>/dev/null
[ -d "$run" ] && tar czf "$OUT/gpu-run.tar.gz" -C "$(dirname "$run")" run
echo "gpu_out: scripts/gpu.py exited $rc; files in $OUT" | tee -a "$OUT/console.log"
exit $rc

#!/usr/bin/env bash
# The GPU command for a machine that hands back only one folder ($OUT): scripts/gpu.py's "out"
# profile, every phase time-boxed, 460 s of timeouts in all (under 8 minutes with start-up):
#   env, involution (float32 stages: new kernels vs official vs unfold), involution_s2 (stride-2
#   layers, stride-2 and dilated bundled cases), involution16 (float16, bfloat16), check
#   (gradlab check specs/ --device cuda, TF32 on), tests (pytest -m cuda).
#
#   OUT=/some/folder bash scripts/gpu_out.sh        # PYTHON=python3 by default
#   bash scripts/gpu_out.sh --dry-run               # the phases, commands and time boxes only
#   OUT=... bash scripts/gpu_out.sh --phase involution --timeout involution=200
#                                       # other phases or timeouts (scripts/gpu.py's options)
#   GRADLAB_OFFICIAL_INVOLUTION=/path/to/involution  # the official kernels, outside the repo
#
# Without OUT, the files go to reports/gpu-out/.  Writes $OUT/console.log, summary.md (every
# phase's outcome and every table), involution.json, involution_s2.json, involution16.json,
# pytest-tail.log and gpu-run.tar.gz (the whole report folder); exits with scripts/gpu.py's
# status.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
for arg in "$@"; do
    if [ "$arg" = --dry-run ]; then  # nothing written, nothing launched
        exec "$PY" scripts/gpu.py --profile out "$@" --out "${OUT:-reports/gpu-out}/run"
    fi
done
OUT=${OUT:-$PWD/reports/gpu-out}
mkdir -p "$OUT"
run=$(mktemp -d)/run
"$PY" scripts/gpu.py --profile out "$@" --out "$run" >"$OUT/console.log" 2>&1
rc=$?
cp "$run/summary.md" "$OUT/" 2>/dev/null
for name in involution involution_s2 involution16; do
    cp "$run/$name/$name.json" "$OUT/" 2>/dev/null
done
tail -c 400000 "$run/tests/pytest.log" >"$OUT/pytest-tail.log" 2>/dev/null
[ -d "$run" ] && tar czf "$OUT/gpu-run.tar.gz" -C "$(dirname "$run")" run
echo "gpu_out: scripts/gpu.py exited $rc; files in $OUT" | tee -a "$OUT/console.log"
exit $rc

#!/usr/bin/env bash
# The tiny FP8 fixture on the GPU machine (issue 22; tests/data/README.md), one command:
#  1. make_fp8_fixture.py writes tests/data/tiny-qwen35-fp8 from the bf16 fixture, with its
#     float64 HF reference (this machine's torch + transformers); the fixture comes back as
#     $OUT/tiny-qwen35-fp8.tar.gz (the device tool returns at most 8 files), its log as
#     $OUT/make_fp8_fixture.log;
#  2. with a refcheck bundle: refcheck on the new fixture on cpu (whole prompts), cuda (FP8
#     weights resident) and cuda-f32, whole and in chunks of 7 and 64, at each backend's default
#     tolerance and agreement, beside cuda on the bf16 fixture; a table last ($OUT/summary.txt).
# Staged (here, then carried) by:
#   TARGETS=refcheck DEST=/work/main/.devbuild/fp8-fixture scripts/bench_serve_bundle.sh
#   cp /work/shared/scripts/make_reference.py /work/main/.devbuild/fp8-fixture/
# Run from the repository root: bash .devbuild/fp8-fixture/fp8_fixture_gpu.sh
# Environment: BUNDLE (default: bundle.tar.xz beside this script; absent = step 1 only),
# MAKE_REFERENCE (default: make_reference.py beside this script), DEADLINE (seconds, 240).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/fp8_fixture_out}
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
MAKE_REFERENCE=${MAKE_REFERENCE:-$HERE/make_reference.py}
DEADLINE=${DEADLINE:-240}
SRC=$PWD/tests/data/tiny-qwen35
FX=/tmp/fp8fix/tiny-qwen35-fp8
mkdir -p "$OUT"
LOG=$OUT/make_fp8_fixture.log

[ -f "$SRC/reference.safetensors" ] || { echo "error: no bf16 fixture at $SRC (run from the repository root)"; exit 1; }
[ -f "$MAKE_REFERENCE" ] || { echo "error: no make_reference.py at $MAKE_REFERENCE (copy /work/shared/scripts/make_reference.py there)"; exit 1; }
rm -rf "$(dirname "$FX")"
mkdir -p "$(dirname "$FX")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # everything is local; never wait on a hub
rc=0
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 420 python3 "$HERE/make_fp8_fixture.py" --src "$SRC" --out "$FX" \
  --make-reference "$MAKE_REFERENCE" > "$LOG" 2>&1 || rc=$?
if [ $rc -ne 0 ]; then
  echo "error: make_fp8_fixture.py exited $rc; the end of $LOG:"
  tail -25 "$LOG"
  exit 1
fi
tar -C "$(dirname "$FX")" -czf "$OUT/tiny-qwen35-fp8.tar.gz" tiny-qwen35-fp8
t_fix=$((SECONDS - t0))
echo "make_fp8_fixture.py: $t_fix s"
grep -E '^(quantised|  |checked|WARNING|reference|wrote)' "$LOG" || true

if [ ! -f "$BUNDLE" ]; then
  echo "no refcheck bundle at $BUNDLE: fixture only"
  exit 0
fi
R=/tmp/fp8fix/results
set +e  # a failing refcheck is a result, not the end of the run
. "$HERE/serve_gpu_common.sh"  # B, left, note, $OUT/summary.txt; packs $R into $OUT/results.tar.gz
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
note "make_fp8_fixture.py: $t_fix s; $(python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print("torch", m["torch"], "transformers", m["transformers"])' "$FX/reference.json" 2>&1 | tail -1)"
note "$(grep -E '^(quantised|checked|WARNING|wrote)' "$LOG" | cut -c1-200)"
rows=()
check() {  # fixture backend chunk
  local fx=$1 be=$2 chunk=$3 log t
  log="$R/refcheck_$(basename "$fx")_${be}_${chunk}.log"
  t=$(( $(left) < 90 ? $(left) - 5 : 90 ))
  [ "$t" -gt 5 ] || { rows+=("| $(basename "$fx") | $be | $chunk | skipped (no time) | | |"); return; }
  timeout "$t" "$B/bin/refcheck" --model "$fx" --backend "$be" $([ "$chunk" = whole ] || echo --chunk "$chunk") > "$log" 2>&1
  local rc=$? last argmax
  last=$(grep -E '^refcheck: ' "$log" | tail -1)
  argmax=$(grep -oE 'teacher-forced argmax [0-9]+/[0-9]+$' "$log" | tail -1 | awk '{print $3}')
  rows+=("| $(basename "$fx") | $be | $chunk | ${last:-rc $rc: $(tail -1 "$log" | cut -c1-120)} | ${argmax:--} | $rc |")
}
check "$FX" cpu whole
for be in cuda cuda-f32; do
  for chunk in whole 7 64; do check "$FX" $be $chunk; done
done
check "$SRC" cuda whole
note ""
note "| fixture | backend | chunk | refcheck | teacher-forced argmax | rc |"
note "|---|---|---|---|---|---|"
for r in "${rows[@]}"; do note "$r"; done

#!/usr/bin/env bash
# The tiny YaRN fixture on the GPU machine (issue 48; tests/data/README.md), one command:
#  1. make_yarn_fixture.py writes tests/data/tiny-qwen35-yarn (hf_overrides.json and the float64
#     HF reference of tiny-qwen35 under it; no weights) with this machine's torch + transformers;
#     the fixture comes back as $OUT/tiny-qwen35-yarn.tar.gz, its log as $OUT/make_yarn_fixture.log;
#  2. with a refcheck bundle: refcheck of tiny-qwen35 under the override against the new
#     reference on cpu (whole, chunks of 7), cuda and cuda-f32 (whole, chunks of 7 and 64), at each
#     backend's default tolerance and agreement; a table last ($OUT/summary.txt).
# Staged (here, then carried) by:
#   TARGETS=refcheck DEST=/work/main/.devbuild/yarn-fixture scripts/bench_serve_bundle.sh
#   cp /work/shared/scripts/make_reference.py /work/main/.devbuild/yarn-fixture/
# Run from the repository root: bash .devbuild/yarn-fixture/yarn_fixture_gpu.sh
# Environment: BUNDLE (default: bundle.tar.xz beside this script; absent = step 1 only),
# MAKE_REFERENCE (default: make_reference.py beside this script), DEADLINE (seconds, 300).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/yarn_fixture_out}
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
MAKE_REFERENCE=${MAKE_REFERENCE:-$HERE/make_reference.py}
DEADLINE=${DEADLINE:-300}
SRC=$PWD/tests/data/tiny-qwen35
FX=/tmp/yarnfix/tiny-qwen35-yarn
GEN=$HERE/make_yarn_fixture.py
[ -f "$GEN" ] || GEN=$PWD/scripts/make_yarn_fixture.py
mkdir -p "$OUT"
LOG=$OUT/make_yarn_fixture.log

[ -f "$SRC/model.safetensors" ] || { echo "error: no tiny-qwen35 at $SRC (run from the repository root)"; exit 1; }
[ -f "$MAKE_REFERENCE" ] || { echo "error: no make_reference.py at $MAKE_REFERENCE (copy /work/shared/scripts/make_reference.py there)"; exit 1; }
rm -rf "$(dirname "$FX")"
mkdir -p "$(dirname "$FX")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # everything is local; never wait on a hub
rc=0
t0=$SECONDS
PYTHONUNBUFFERED=1 timeout 420 python3 "$GEN" --src "$SRC" --out "$FX" --make-reference "$MAKE_REFERENCE" > "$LOG" 2>&1 || rc=$?
if [ $rc -ne 0 ]; then
  echo "error: make_yarn_fixture.py exited $rc; the end of $LOG:"
  tail -25 "$LOG"
  exit 1
fi
tar -C "$(dirname "$FX")" -czf "$OUT/tiny-qwen35-yarn.tar.gz" tiny-qwen35-yarn
t_fix=$((SECONDS - t0))
echo "make_yarn_fixture.py: $t_fix s"
grep -E '^(HF rotary|checked|WARNING|wrote)' "$LOG" || true

if [ ! -f "$BUNDLE" ]; then
  echo "no refcheck bundle at $BUNDLE: fixture only"
  exit 0
fi
R=/tmp/yarnfix/results
set +e  # a failing refcheck is a result, not the end of the run
. "$HERE/serve_gpu_common.sh"  # B, left, note, $OUT/summary.txt; packs $R into $OUT/results.tar.gz
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
note "make_yarn_fixture.py: $t_fix s; $(grep -E '^(HF rotary|checked|WARNING)' "$LOG" | tr '\n' ';' | cut -c1-400)"
rows=()
check() {  # backend chunk
  local be=$1 chunk=$2 log t
  log="$R/refcheck_yarn_${be}_${chunk}.log"
  t=$(( $(left) < 90 ? $(left) - 5 : 90 ))
  [ "$t" -gt 5 ] || { rows+=("| $be | $chunk | skipped (no time) | | |"); return; }
  timeout "$t" "$B/bin/refcheck" --model "$SRC" --reference "$FX/reference.safetensors" \
    --hf-overrides-file "$FX/hf_overrides.json" --backend "$be" $([ "$chunk" = whole ] || echo --chunk "$chunk") > "$log" 2>&1
  local rc=$? last argmax
  last=$(grep -E '^refcheck: ' "$log" | tail -1)
  argmax=$(grep -oE 'teacher-forced argmax [0-9]+/[0-9]+$' "$log" | tail -1 | awk '{print $3}')
  rows+=("| $be | $chunk | ${last:-rc $rc: $(tail -1 "$log" | cut -c1-120)} | ${argmax:--} | $rc |")
}
check cpu whole
check cpu 7
for be in cuda cuda-f32; do
  for chunk in whole 7 64; do check $be $chunk; done
done
note ""
note "| backend | chunk | refcheck (tiny-qwen35 + hf_overrides.json vs tiny-qwen35-yarn) | teacher-forced argmax | rc |"
note "|---|---|---|---|---|"
for r in "${rows[@]}"; do note "$r"; done

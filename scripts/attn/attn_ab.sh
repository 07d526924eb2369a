#!/usr/bin/env bash
# In-call A/B of the paged decode kernel on the GPU machine: the decode-kernel GPU tests, then
# bench_paged_attention_base (a benchmark binary of an earlier commit, carried in the bundle of
# scripts/cuda_build_carry.sh from .devbuild/base/) and bench_paged_attention over the whole
# grid for bf16, q8_0 and q4_0, the PyTorch baseline, and a phase trace of B=8/4K. Logs under
# $OUT; the table of both binaries and torch is printed last.
#   [TYPES="q8_0 q4_0"] [VARIANT_ARGS=--no-bulk-copies] scripts/attn/attn_ab.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_ab}
mkdir -p "$OUT"
. scripts/gpu_bundle.sh
{ cat "$B/COMMIT"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader; } | tee "$OUT/gpu.txt"
: > "$OUT/tests.log"
for f in "[decode]~[long]~[bigpool]~[guard]" "[kv_write]" "[guard]" "[long]" "[bigpool]"; do
  timeout 150 "$B/bin/test_kernels_cuda_gpu" "$f" -r compact > "$OUT/t.log" 2>&1
  echo "tests $f rc=$? $(grep -E 'Passed|failed' "$OUT/t.log" | tail -1)"
  cat "$OUT/t.log" >> "$OUT/tests.log"
done
bins="bench_paged_attention"
[ -x "$B/bin/bench_paged_attention_base" ] && bins="bench_paged_attention_base $bins"
for t in ${TYPES:-bf16 q8_0 q4_0}; do
  for bin in $bins; do "$B/bin/$bin" --types $t | sed "s/^ours/$bin/"; done
  # VARIANT_ARGS="--no-token-rows ...": the new binary once more with a path forced (an A/B).
  if [ -n "${VARIANT_ARGS:-}" ]; then "$B/bin/bench_paged_attention" --types $t $VARIANT_ARGS | sed "s/^ours/variant/"; fi
done > "$OUT/ab.csv" 2>&1
timeout 200 python3 scripts/attn/attn_torch_baseline.py > "$OUT/torch.csv" 2>&1
"$B/bin/bench_paged_attention" --types bf16 --case 8,4096 --trace "$OUT/tr_8_4096.csv" > /dev/null
python3 scripts/attn/attn_trace_report.py "$OUT/tr_8_4096.csv"
# binary,type,case,B,ctx,us,bw fraction,chunk,blocks per SM,stages,KV heads per block,graph us,legacy-stream us
grep -v '^mem' "$OUT/ab.csv" | awk -F, '{print $1","$2","$3","$4","$5","$6","$9","$10","$13","$14","$15","$16","$17}'
grep -E 'copy|flash' "$OUT/torch.csv"

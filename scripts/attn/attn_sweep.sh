#!/usr/bin/env bash
# Decode-kernel tuning sweep on the GPU machine: bench_paged_attention (from the bundle of
# scripts/cuda_build_carry.sh) over grid points x forced chunk lengths, and the PyTorch
# baseline, in one command. Prints one CSV line per run (the
# benchmark's "ours" format) and the torch lines; logs under $OUT.
#   CASES="8,4096 1,32768" CHUNKS="0 256 512" TYPES=bf16 scripts/attn/attn_sweep.sh [--tests]
# --tests first runs the decode-kernel GPU tests ([decode] without the long cases).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_sweep}
mkdir -p "$OUT"
CASES=${CASES:-"8,4096 32,4096 1,32768 8,131072 32,32768 8,0"}
CHUNKS=${CHUNKS:-0}
TYPES=${TYPES:-bf16}
. scripts/gpu_bundle.sh
{ date -u; echo "bundle commit $(cat $B/COMMIT | tr '\n' ' ')";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/gpu.txt" 2>&1
if [ "${1:-}" = "--tests" ]; then
  timeout 240 "$B/bin/test_kernels_cuda_gpu" "[decode]~[long]~[bigpool]" -r compact > "$OUT/tests.log" 2>&1
  echo "tests rc=$? ($(tail -1 "$OUT/tests.log"))"
fi
for cs in $CASES; do
  for ch in $CHUNKS; do
    "$B/bin/bench_paged_attention" --types "$TYPES" --case "$cs" --chunk "$ch" 2>&1 | grep '^ours'
  done
done | tee "$OUT/sweep.csv"
timeout ${TORCH_TIMEOUT:-200} python3 scripts/attn/attn_torch_baseline.py ${TORCH_ARGS:-} > "$OUT/torch.csv" 2>&1
grep -E '^(copy|torch,flash)' "$OUT/torch.csv"

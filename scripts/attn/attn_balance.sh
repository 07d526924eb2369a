#!/usr/bin/env bash
# How evenly the decode kernel's work spreads over the SMs, on the GPU machine: one traced call
# per (type, case) of bench_paged_attention --trace, summarised by scripts/attn/attn_trace_report.py
# (block spans, each SM's last end, phase medians). Logs under $OUT.
#   [TYPES="bf16 q8_0 q4_0"] [CASES="8,32768 8,131072 32,32768 1,32768"] [VARIANT_ARGS="--no-token-rows"] scripts/attn/attn_balance.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_balance}
mkdir -p "$OUT"
. scripts/gpu_bundle.sh
for t in ${TYPES:-bf16 q8_0 q4_0}; do
  for c in ${CASES:-8,32768 8,131072 32,32768 1,32768}; do
    f="$OUT/tr_${t}_${c/,/_}.csv"
    "$B/bin/bench_paged_attention" --types "$t" --case "$c" --iters 10 --trace "$f" ${VARIANT_ARGS:-} |
      grep -v '^mem' | tail -1
    python3 scripts/attn/attn_trace_report.py "$f"
  done
done

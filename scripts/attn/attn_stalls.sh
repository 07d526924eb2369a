#!/usr/bin/env bash
# Where the tensor-core decode kernel's warps wait (Nsight Compute warp-state sampling,
# DRAM throughput, scheduler issue) and its phase stamps, for each type in TYPES at one
# grid point CASE (default 8,32768), plus the kernel and merge durations at batch 1.
# Run on the GPU machine with the bundle of scripts/cuda_build_carry.sh (.devbuild/cuda).
#   [TYPES="bf16 q8_0"] [CASE=8,131072] scripts/attn/attn_stalls.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_stalls}
mkdir -p "$OUT"
. scripts/gpu_bundle.sh
NCU=/usr/local/cuda/bin/ncu
case_=${CASE:-8,32768}
for t in ${TYPES:-bf16 q8_0 q4_0}; do
  $NCU --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SpeedOfLight \
    --section Occupancy --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    -k regex:decode_tc --launch-skip 3 --launch-count 1 \
    "$B/bin/bench_paged_attention" --types "$t" --case "$case_" --iters 5 > "$OUT/ncu_$t.txt" 2>&1
  echo "== $t $case_"
  grep -E "Stall|Warp Cycles Per|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|DRAM Throughput|Memory Throughput|Duration|L2 Hit|Achieved Occupancy" \
    "$OUT/ncu_$t.txt" | sed 's/  */ /g' | head -40
  # stall reasons: warps stalled per issued instruction, largest first
  grep -E "smsp__average_warps_issue_stalled_" "$OUT/ncu_$t.txt" | awk '{print $NF, $1}' | sort -gr | head -8 |
    sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | tr '\n' ';'; echo
  "$B/bin/bench_paged_attention" --types "$t" --case "$case_" --trace "$OUT/tr_$t.csv" > /dev/null
  python3 scripts/attn/attn_trace_report.py "$OUT/tr_$t.csv"
done
# Batch 1: the decode kernel and the merge, each on its own.
for c in ${B1_CASES-1,4096 1,32768}; do
  $NCU --metrics gpu__time_duration.sum --launch-skip 6 --launch-count 4 \
    "$B/bin/bench_paged_attention" --types bf16 --case "$c" --iters 5 > "$OUT/ncu_b1_$c.txt" 2>&1
  echo "== bf16 $c kernel durations"
  grep -E "decode_tc|merge_partials|gpu__time_duration" "$OUT/ncu_b1_$c.txt" | sed 's/  */ /g' | head -8
  "$B/bin/bench_paged_attention" --types bf16 --case "$c" --trace "$OUT/tr_b1_$c.csv" > /dev/null
  python3 scripts/attn/attn_trace_report.py "$OUT/tr_b1_$c.csv"
done

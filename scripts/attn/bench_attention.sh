#!/usr/bin/env bash
# The paged-attention run on the GPU machine, in one command: GPU tests (with compute-sanitizer
# on the small cases), the decode benchmark, the PyTorch baseline in the same session, and the
# report table (printed last). Logs go to $OUT (or /tmp/attn_out).
#
# Binaries come from .devbuild/attn (built on the workstation by scripts/attn/attn_build_carry.sh
# and carried), or are built here by scripts/attn/attn_device_build.sh when those do not run.
# --profile runs Nsight Compute on a few grid points (speed of light, scheduler and warp-stall
# sections) into ncu.txt.
#   scripts/attn/bench_attention.sh [--quick] [--no-tests] [--no-bench] [--profile]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
BIN=.devbuild/attn
QUICK=""; TESTS=1; BENCH=1; PROFILE=0
for a in "$@"; do
  case $a in
    --quick) QUICK=--quick ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --profile) PROFILE=1 ;;
  esac
done
{ date -u; echo "commit $(cat .devbuild/attn/COMMIT 2>/dev/null)";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv; } > "$OUT/gpu.txt" 2>&1

"$BIN/bench_paged_attention" --help >/dev/null 2>&1
if [ $? -ne 2 ]; then
  echo "carried binaries do not run here; building with nvcc" | tee -a "$OUT/gpu.txt"
  scripts/attn/attn_device_build.sh "$BIN" >> "$OUT/errs.log" 2>&1 || { echo "device build failed"; tail -30 "$OUT/errs.log"; exit 1; }
fi

if [ "$TESTS" = 1 ]; then
  T="$BIN/test_kernels_cuda_gpu"
  : > "$OUT/tests.log"
  for filter in "[kv_write]" "[guard]" "[decode]~[long]~[bigpool]~[guard]" "[long]" "[bigpool]"; do
    echo "== $filter" >> "$OUT/tests.log"
    timeout 300 "$T" "$filter" -r compact >> "$OUT/tests.log" 2>&1
    echo "tests $filter rc=$?" | tee -a "$OUT/tests.log"
  done
  grep -E "^decode |^ragged |^pool " "$OUT/tests.log" | sed 's/^/  /' | head -80
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      timeout 240 compute-sanitizer --tool $tool --print-limit 20 "$T" "bf16 output is the rounded fp32 result" \
        > /tmp/sanitizer.log 2>&1
      echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitizer.log | tail -1)" | tee -a "$OUT/tests.log"
      grep -B2 -A12 -m3 "Invalid\|Race\|Error" /tmp/sanitizer.log | head -60 >> "$OUT/tests.log"
    done
  fi
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$BIN/bench_paged_attention" > /tmp/attn.sass 2>/dev/null
  awk '/Function :/{name=$3} /HMMA/{h[name]++} /LDGSTS/{g[name]++} /LDSM/{l[name]++} /LDL|STL/{s[name]++}
       END{for (n in h) printf "%s HMMA %d LDGSTS %d LDSM %d local %d\n", n, h[n], g[n], l[n], s[n]}' \
      /tmp/attn.sass > "$OUT/sass.txt"
fi
if [ "$PROFILE" = 1 ] && command -v ncu >/dev/null; then
  : > "$OUT/ncu.txt"
  for spec in "q4_0 32,32768" "q8_0 32,32768" "bf16 32,4096" "bf16 1,32768" "bf16 1,4096"; do
    set -- $spec
    echo "== ncu $spec" >> "$OUT/ncu.txt"
    timeout 120 ncu --clock-control none -k regex:decode_tc --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
      "$BIN/bench_paged_attention" --types "$1" --case "$2" --iters 4 >> "$OUT/ncu.txt" 2>&1
    echo "ncu $spec rc=$?"
  done
  grep -E "^== ncu|Duration|DRAM Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy|Registers Per|Stall" "$OUT/ncu.txt" | head -80
fi
if [ "$BENCH" = 1 ]; then
  timeout 240 "$BIN/bench_paged_attention" $QUICK > "$OUT/ours.csv" 2>> "$OUT/errs.log"; echo "bench rc=$?"
  PYTHONUNBUFFERED=1 timeout 240 python3 scripts/attn/attn_torch_baseline.py $QUICK > "$OUT/torch.csv" 2>> "$OUT/errs.log"
  echo "torch rc=$?"
  tail -5 "$OUT/errs.log"
  python3 scripts/attn/attn_report.py "$OUT/ours.csv" "$OUT/torch.csv" | tee "$OUT/report.txt"
fi

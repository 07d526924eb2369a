#!/usr/bin/env bash
# The recorded-step tests alone on the GPU machine (issue 24), for a fix of the bystander /
# MTP divergence: test_cuda_model_gpu "[graphs]" (every mode's bystander state, replay vs
# padded eager bit for bit) and test_engine_tiny "[graphs]" and "[mtp]" on CUDA (graphs on).
# Bundle (here): TARGETS="test_cuda_model_gpu test_engine_tiny" \
#   DEST=/work/main/.devbuild/cuda-graphs2 scripts/bench_serve_bundle.sh
# then, carried: bash .devbuild/cuda-graphs2/cuda_graphs_focus_gpu.sh   (about 60-120 s)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-140}
OUT=${OUT:-/tmp/graphs_out}
R=/tmp/graphs_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT")"
export DELTASERVE_TEST_DATA_DIR=$PWD/tests/data
tests_line() { grep -E '^(All tests passed|test cases:)' "$1" | tr '\n' ' '; }
timeout 70 "$B/bin/test_cuda_model_gpu" "[graphs]" > "$R/test_graphs_model.log" 2>&1
note "test_cuda_model_gpu [graphs] rc=$?: $(tests_line "$R/test_graphs_model.log")"
grep -E "worst relative logit|differ, first at|FAILED" "$R/test_graphs_model.log" | sort -u | head -12 | tee -a "$summary"
for case in graphs mtp; do
  DELTASERVE_TEST_BACKEND=cuda timeout $(( $(left) > 50 ? 40 : $(left) - 5 )) "$B/bin/test_engine_tiny" "[$case]" > "$R/test_engine_$case.log" 2>&1
  note "test_engine_tiny [$case] on cuda rc=$?: $(tests_line "$R/test_engine_$case.log")"
  grep -E "requests token-identical" "$R/test_engine_$case.log" | sort -u | head -3 | tee -a "$summary"
done
# The speculative cases with recorded steps off: tells a fault of recording from one of the
# GPU's rounding in verify steps.
DELTASERVE_TEST_NO_STEP_GRAPHS=1 DELTASERVE_TEST_BACKEND=cuda timeout $(( $(left) > 50 ? 40 : $(left) - 5 )) \
  "$B/bin/test_engine_tiny" "[mtp]" > "$R/test_engine_mtp_eager.log" 2>&1
note "test_engine_tiny [mtp] on cuda, step graphs off, rc=$?: $(tests_line "$R/test_engine_mtp_eager.log")"
cp "$R"/*.log "$OUT/" 2>/dev/null; pack

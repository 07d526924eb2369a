#!/usr/bin/env bash
# The chunked DeltaNet on the tensor cores, on the GPU machine (docs/benchmarks.md, "Chunked
# DeltaNet"), one command:
#  1. the GPU tests: test_cuda_backend_ops_gpu (its delta-rule cases print their errors against
#     the CPU) and test_cuda_model_gpu (layers, logits, chunked vs per-token state in both
#     precisions, refcheck whole and chunked); with SANITIZE=1 also compute-sanitizer's
#     memcheck and racecheck on the new delta-rule case;
#  2. bench_deltanet: tensor cores and the fp32 path at 4K/16K/64K tokens for the 9B (16/32
#     heads) and 27B (16/48) with --check, and 8 sequences of 2,048;
#  3. the peer, flash-linear-attention's chunk_gated_delta_rule on the same shapes
#     (deltanet_peer.py; fla's source rides in the bundle folder as fla.tar.xz);
#  4. each tensor-core kernel's time at 16K tokens (ncu, when the machine has it);
#  5. bench_cuda_model --prefill 4096 --profile on a random 9B (with BASE, the baseline
#     bundle's too, for the op profile before and after).
# Bundle, on the workstation (stages this script, the peer and fla's source):
#   TARGETS="bench_deltanet bench_cuda_model test_cuda_backend_ops_gpu test_cuda_model_gpu" \
#     DEST=/work/main/.devbuild/deltanet scripts/bench_serve_bundle.sh
# then on the device, carrying .devbuild/deltanet:
#   [BASE=.devbuild/<old>/bundle.tar.xz] [KBASE=.devbuild/<dir>/bench_deltanet_base.xz] [SKIP_MODEL=1] \
#     bash .devbuild/deltanet/deltanet_gpu.sh
# KBASE (an xz of an older bench_deltanet, staged beside the bundle) adds that build's kernel
# times at the same points, alternating with this bundle's, and its per-kernel times.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-570}
OUT=${OUT:-/tmp/dn_out}
R=/tmp/dn_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
TOKENS=${TOKENS:-4096,16384,65536}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
TEST_TIMEOUT=200 gpu_tests test_cuda_backend_ops_gpu test_cuda_model_gpu
# The errors the delta-rule cases print (against the CPU; the tolerances are in the test).
grep -hE '^(gated_delta_rule|chunked vs per-token)' "$R/test_cuda_backend_ops_gpu.txt" "$R/test_cuda_model_gpu.txt" \
  2>/dev/null | uniq | head -80 >> "$summary"
if [ -n "${SANITIZE:-}" ] && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool "$B/bin/test_cuda_backend_ops_gpu" "*gated_delta_rule chunks*" \
      > "$R/sanitize_$tool.txt" 2>&1
    note "compute-sanitizer $tool rc=$?: $(grep -E 'ERROR SUMMARY|test cases' "$R/sanitize_$tool.txt" | tr '\n' ' ')"
  done
fi
K=$B/bin/bench_deltanet
KB=
if [ -n "${KBASE:-}" ] && [ -f "$KBASE" ]; then KB=$B/bin/bench_deltanet_base; xz -dc "$KBASE" > "$KB"; chmod +x "$KB"; fi
if [ -x "$K" ]; then
  { timeout 150 "$K" --tokens "$TOKENS" --v-heads 32,48 --iters 5 --check
    echo "8 sequences:"; timeout 60 "$K" --tokens 16384 --seqs 8 --v-heads 32,48 --iters 5 | tail -4
    if [ -n "$KB" ]; then
      for bin in "$KB" "$K" "$KB" "$K"; do
        echo "== $(basename "$bin"), tensor cores"
        timeout 60 "$bin" --tokens "$TOKENS" --v-heads 32,48 --iters 5 --math tc | grep -E '^[0-9]'
      done
    fi; } > "$R/kernel.txt" 2>&1
  note "kernel:"; cat "$R/kernel.txt" >> "$summary"
fi
if [ "$(left)" -gt 150 ]; then
  P=/tmp/dn_fla; rm -rf "$P"; mkdir -p "$P"
  xz -dc "$HERE/fla.tar.xz" | tar -C "$P" -xf - 2>/dev/null || note "no fla.tar.xz in $HERE"
  # Unbuffered, so a timeout (Triton compiles and tunes fla's kernels on a fresh machine for
  # over a minute) still leaves the shapes done.
  { PYTHONUNBUFFERED=1 PYTHONPATH=$P${PYTHONPATH:+:$PYTHONPATH} timeout 150 python3 "$HERE/deltanet_peer.py" --tokens "$TOKENS" --v-heads 32,48
    echo "8 sequences:"; PYTHONPATH=$P timeout 60 python3 "$HERE/deltanet_peer.py" --tokens 16384 --seqs 8 --v-heads 32,48 | tail -4
  } > "$R/peer.txt" 2>&1
  note "peer:"; grep -vE 'Warning|warn' "$R/peer.txt" | tail -16 >> "$summary"
fi
# Each of the three tensor-core kernels' own time at one shape (Nsight Compute's kernel
# duration; the bench's events time the three together).
for bin in $KB $K; do
  [ -x "$bin" ] && command -v ncu > /dev/null && [ "$(left)" -gt 120 ] || continue
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:deltanet_tc --csv \
    "$bin" --tokens 16384 --v-heads 32 --iters 1 --math tc > "$R/ncu_$(basename "$bin").txt" 2>&1
  note "per kernel, $(basename "$bin"), 16K tokens, 16/32 heads (ncu, ns; warm-up and timed run):"
  grep -E 'deltanet_tc_(prepare|scan|output)' "$R/ncu_$(basename "$bin").txt" | grep -oE 'deltanet_tc_[a-z]+_kernel|"[0-9.,]+"$' |
    paste - - | head -6 >> "$summary"
done
[ -n "${SKIP_MODEL:-}" ] && { echo "==== summary"; cat "$summary"; exit 0; }
CKPT=/tmp/qwen35-9b-random
if [ ! -f "$CKPT/config.json" ] && [ "$(left)" -gt 200 ]; then
  ( PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
    note "checkpoint failed: $(tail -2 "$R/ckpt.log")"
fi
run_prefill() {  # label bench
  [ -f "$CKPT/config.json" ] && [ "$(left)" -gt 60 ] || return
  timeout $(( $(left) - 20 )) "$2" --model "$CKPT" --batches 1 --contexts 1024 --prefill 4096 --steps 3 --layouts "" \
    --profile > "$R/$1_prefill.txt" 2>&1
  note "$1 prefill 4096 rc=$?: $(grep -E '^\| *prefill 1' "$R/$1_prefill.txt" | tr '\n' ' ' | tr -s ' ')"
  note "   delta rule op: $(grep -E 'gated_delta_rule' "$R/$1_prefill.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
}
run_prefill new "$B/bin/bench_cuda_model"
if [ -n "${BASE:-}" ] && [ -f "$BASE" ]; then
  BB=/tmp/dn_base; rm -rf "$BB"; mkdir -p "$BB"; xz -dc "$BASE" | tar -C "$BB" -xf -
  run_prefill base "$BB/bin/bench_cuda_model"
fi
echo "==== summary"; cat "$summary"

#!/usr/bin/env bash
# Fused prefill attention on the GPU machine (docs/benchmarks.md, "Fused prefill attention"),
# one command:
#  1. the GPU tests of the attention ops and of the model against the CPU engine;
#  2. bench_prefill_attention: the kernel alone at the 9B's attention shape (16/4 heads of
#     256) for whole prompts of 4K/32K/128K, for short chunks after a 30K cached prefix (split
#     key ranges), with a Q8_0 pool, and at the 27B's 24/4 heads;
#  3. PyTorch's causal SDPA (FlashAttention-2, cuDNN) at the same shape (prefill_attention_peer.py);
#  4. bench_cuda_model --prefill N --profile on a random 9B for each N in PREFILLS, with this
#     bundle and, for N in BASE_PREFILLS, with the baseline bundle BASE (before the change);
#     with BASE, also the baseline's bench_prefill_attention against this one's, in turns.
# SKIP_TESTS=1 leaves out step 1.
# Bundle: scripts/bench_serve_bundle.sh with TARGETS="bench_prefill_attention bench_cuda_model
# test_cuda_backend_ops_gpu test_cuda_model_gpu", carried (with the baseline's bundle).
#   [BASE=.devbuild/<old>/bundle.tar.xz] [PREFILLS=...] bash .devbuild/<dir>/prefill_attention_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-540}
OUT=${OUT:-/tmp/fa_out}
R=/tmp/fa_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
PREFILLS=${PREFILLS:-4096 32768 131072}
BASE_PREFILLS=${BASE_PREFILLS:-4096 32768}
PEER_LENGTHS=${PEER_LENGTHS:-4096 32768 131072}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
[ -n "${SKIP_TESTS:-}" ] || gpu_tests test_cuda_backend_ops_gpu test_cuda_model_gpu
K=$B/bin/bench_prefill_attention
# With BASE, the baseline bundle's kernel first, at the whole-prompt and split points (its
# binaries are unpacked beside this bundle's; the two alternate in one call).
BB=/tmp/fa_base
if [ -n "${BASE:-}" ] && [ -f "$BASE" ]; then
  rm -rf "$BB"; mkdir -p "$BB"; xz -dc "$BASE" | tar -C "$BB" -xf -
  if [ -x "$BB/bin/bench_prefill_attention" ] && [ -x "$K" ]; then
    for bin in "$BB/bin/bench_prefill_attention" "$K" "$BB/bin/bench_prefill_attention" "$K"; do
      echo "== $([ "$bin" = "$K" ] && echo new || echo base)"
      timeout 90 "$bin" --tokens 4096,32768 --iters 3 | tail -2
      timeout 60 "$bin" --tokens 256 --cached 30000 --iters 5 | tail -1
    done > "$R/kernel_ab.txt" 2>&1
    note "kernel A/B:"; cat "$R/kernel_ab.txt" >> "$summary"
  fi
fi
if [ -x "$K" ]; then
  { timeout 150 "$K" --tokens 4096,32768,131072 --iters 3
    timeout 60 "$K" --tokens 256,2048 --cached 30000 --iters 5 | tail -2
    echo "q8_0:"; timeout 60 "$K" --tokens 4096 --kv-dtype q8_0 --iters 3 | tail -1
    echo "24/4 heads:"; timeout 60 "$K" --tokens 4096,32768 --heads 24 --iters 3 | tail -2; } > "$R/kernel.txt" 2>&1
  note "kernel: $(tr '\n' ' ' < "$R/kernel.txt")"
fi
if [ "$(left)" -gt 120 ]; then
  timeout 120 python3 "$HERE/prefill_attention_peer.py" $PEER_LENGTHS > "$R/peer.txt" 2>&1
  note "peer: $(tr '\n' ' ' < "$R/peer.txt")"
fi
CKPT=/tmp/qwen35-9b-random
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
    { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
fi
run_prefill() {  # label bench n
  timeout $(( $(left) - 30 )) "$2" --model "$CKPT" --batches 1 --contexts 1024 --prefill "$3" --steps 3 --layouts "" \
    --profile > "$R/$1_$3.txt" 2>&1
  note "$1 prefill $3 rc=$?: $(grep -E '^\| *prefill 1' "$R/$1_$3.txt" | tr '\n' ' ' | tr -s ' ')"
  note "   attention op: $(grep -E 'paged_attention\(with prefill\)' "$R/$1_$3.txt" | head -1 | tr -s ' ')"
}
if [ -x "$BB/bin/bench_cuda_model" ]; then
  for n in $BASE_PREFILLS; do [ "$(left)" -gt 90 ] && run_prefill base "$BB/bin/bench_cuda_model" "$n"; done
fi
for n in $PREFILLS; do [ "$(left)" -gt 90 ] && run_prefill new "$B/bin/bench_cuda_model" "$n"; done
echo "==== summary"; cat "$summary"

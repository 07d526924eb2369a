#!/usr/bin/env bash
# The 27B's numbers for the open issues, on the GPU machine, in one command (one random
# checkpoint of SIZE, default 27b, made here: ~54 GB of the machine's 64 GB disk):
#  1. prefill of 4,096 and 32,768 tokens against the FLOP floor (bench_cuda_model --prefill N
#     --profile; issue 21);
#  2. batch 1 / 8 / 32 decode at context 1K, bf16 weights and FP8 weights quantised at load
#     (--quantization fp8, the layout and kernels of Qwen's FP8 checkpoints; issue 22), the
#     weight memory of each;
#     `weights` does both with one argument list (WEIGHT_ARGS), prefill included;
#  3. MTP drafting for real at K 3, acceptance 0.8, batch 1 and 8, against plain decoding
#     (bench_speculative --method mtp; issue 24).
# Bundle: TARGETS="bench_cuda_model bench_speculative" DEST=.devbuild/<dir> scripts/bench_serve_bundle.sh,
#   carried; then [SIZE=27b] [DEADLINE=540] [STEPS="prefill decode mtp"] [PREFILLS="4096 32768"]
#   [PREFILL_REPS=6] bash .devbuild/<dir>/big_model_gpu.sh (bench_cuda_model runs PREFILL_REPS
#   prompts and reports the median of those after the first, a warm-up)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-540}
OUT=${OUT:-/tmp/big_out}
R=/tmp/big_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
SIZE=${SIZE:-27b}
STEPS=${STEPS:-prefill decode mtp}
PREFILLS=${PREFILLS:-4096 32768}
PREFILL_REPS=${PREFILL_REPS:-6}
WEIGHT_ARGS=${WEIGHT_ARGS:---batches 1,8,16,32,64 --contexts 1024 --prefill 4096 --layout-batch 0 --steps 10}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
CKPT=/tmp/qwen35-$SIZE-random
t0=$SECONDS
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 300 python3 "$HERE/make_random_checkpoint.py" --size "$SIZE" --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) \
    > "$R/ckpt.log" 2>&1 || { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
fi
note "checkpoint in $((SECONDS - t0)) s: $(tail -1 "$R/ckpt.log")"
bench() {  # label, bench_cuda_model args...
  local label=$1; shift
  [ "$(left)" -gt 50 ] || { note "no time left for $label"; return; }
  timeout $(( $(left) - 20 )) "$B/bin/bench_cuda_model" --model "$CKPT" "$@" > "$R/$label.txt" 2>&1
  note "$label rc=$?: $(grep -E '^(gpu|weights)' "$R/$label.txt" | tr '\n' ' ')"
  grep -E '^\| (decode|prefill)' "$R/$label.txt" | tee -a "$summary"
}
for step in $STEPS; do
  case $step in
    prefill)
      for n in $PREFILLS; do
        bench prefill_$n --batches 1 --contexts 1024 --prefill $n --prefill-reps "$PREFILL_REPS" --steps 1 --layouts "" --profile
        grep -E 'paged_attention\(with prefill\)|gated_delta_rule\(with chunks\)|gate_up_swiglu|total' "$R/prefill_$n.txt" |
          head -4 | tr -s ' ' | tee -a "$summary"
      done ;;
    decode)
      bench decode_bf16 --batches 1,8,32 --contexts 1024 --prefill 0 --layout-batch 0 --steps 10
      bench decode_fp8 --batches 1,8,32 --contexts 1024 --prefill 0 --layout-batch 0 --steps 10 --quantization fp8 ;;
    weights)  # bf16 against FP8 quantised at load, prefill and decode in one list (issue 22)
      bench weights_bf16 $WEIGHT_ARGS
      bench weights_fp8 $WEIGHT_ARGS --quantization fp8 ;;
    mtp)
      [ "$(left)" -gt 60 ] || { note "no time left for mtp"; continue; }
      timeout $(( $(left) - 15 )) "$B/bin/bench_speculative" --model "$CKPT" --backend cuda --method mtp \
        --batches 1,8 --ks 3 --acceptance 0.8 --prompt-len 256 --output-len 128 --repeat 1 \
        --kv-cache-memory 16GiB > "$R/mtp.txt" 2>&1
      note "bench_speculative --method mtp rc=$?:"
      grep -E '^\|' "$R/mtp.txt" | tee -a "$summary"
      grep -E ' tok/s ' "$R/mtp.txt" | tee -a "$summary" ;;
  esac
done
cp "$R"/*.txt "$OUT/" 2>/dev/null
echo "==== summary"; cat "$summary"

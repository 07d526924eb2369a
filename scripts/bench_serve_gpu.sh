#!/usr/bin/env bash
# The serving benchmark on the GPU machine (docs/benchmarks.md, "Serving"), in one command:
#   1. unpack the bundle of scripts/bench_serve_bundle.sh (serve, bench_serve, bench_scheduler,
#      bench_cuda_model and the shared libraries the machine lacks);
#   2. per model size: generate the random-weight checkpoint (make_random_checkpoint.py) and
#      give it a tokenizer that spells every id (make_checkpoint_tokenizer.py); start
#      `serve --backend cuda`; a warm-up pass; the standard sweep of bench_serve runs
#      (random dataset, token-id prompts, --ignore-eos); stop the server; delete the checkpoint
#      (the disk holds one 27B checkpoint, not two);
#   3. while the first checkpoint is written: bench_scheduler (the engine's host cost per
#      step at 256 running sequences, on this machine's CPU);
#   4. with HOST_STEP=1, after the 9B sweep: bench_cuda_model at batch 256 / 1K context (the
#      forward alone), the other side of the host share of a step.
# Results: $OUT/summary.txt (tables, printed last) and $OUT/results.tar.gz (the result JSONs,
# bench_serve tables, server and benchmark logs).
#   [SIZES="9b 27b"] [SWEEP_9B="1:8 16:64 64:128 256:512"] [SWEEP_27B="1:4 16:32"] [HOST_STEP=1]
#   [WEIGHTS="bf16 fp8"] [BUDGETS="2048 8192"] [STATES="f32 bf16"] [REUSE_CKPT=1] [BUNDLE=.devbuild/bench-serve/bundle.tar.xz]
#   scripts/bench_serve_gpu.sh
# BUDGETS: the sweep once per step token budget (`serve --max-num-batched-tokens N`, tag _tN),
# in turns, for each weight format; unset, the server's default.
# WEIGHTS: the sweep once per weight format on the same checkpoint, in turns: bf16 as stored,
# fp8 with `--quantization fp8 --fp8-weights resident` (issue 22: e4m3 codes in device memory),
# fp8-bf16 with `--quantization fp8` alone (dequantised to bf16 at load). "serve ... up in N s"
# is then the quantising load.
# STATES: the sweep once per DeltaNet recurrent state type (`serve --mamba-ssm-cache-dtype`,
# tag _s<type>), in turns within each weight format and budget; unset, the server's default.
# A sweep point is CONCURRENCY:PROMPTS[:greedy]. Shapes: 9B 1024 in / 256 out, 27B 8192 in / 1024 out
# (the issue's standard sweep; 27B is SGLang's published Qwen3.5-27B H200 workload).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-560}  # seconds for the whole command (the device tool stops a call at 600)
OUT=${OUT:-/tmp/bench_serve_out}
R=/tmp/bench_serve_results
SIZES=${SIZES:-9b 27b}
BUNDLE=${BUNDLE:-.devbuild/bench-serve/bundle.tar.xz}
PORT=18080
. "$HERE/serve_gpu_common.sh"
{ date -u; echo "bundle commit $(tr '\n' ' ' < "$B/COMMIT")"; nproc; lscpu | grep -m1 'Model name';
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > "$R/machine.txt" 2>&1
tee -a "$summary" < "$R/machine.txt"

checkpoint() {  # size -> generates /tmp/qwen35-$1-random with its tokenizer (log in $R)
  local dir=/tmp/qwen35-$1-random
  # REUSE_CKPT=1: one an earlier call on this machine left (prefix_cache_gpu.sh keeps its own).
  if [ "${REUSE_CKPT:-0}" = 1 ] && [ -f "$dir/tokenizer.json" ]; then echo "reused $dir" > "$R/ckpt_$1.log"; return 0; fi
  PYTHONUNBUFFERED=1 python3 "$HERE/make_random_checkpoint.py" --size "$1" --out "$dir" > "$R/ckpt_$1.log" 2>&1 &&
    python3 "$HERE/make_checkpoint_tokenizer.py" --out "$dir" >> "$R/ckpt_$1.log" 2>&1
}

# The first checkpoint is written while bench_scheduler measures the host side.
first=${SIZES%% *}
t0=$SECONDS; checkpoint "$first" & CKPT_PID=$!
"$B/bin/bench_scheduler" --seqs 256 --vocab 16 --repeat 3 > "$R/bench_scheduler.txt" 2>&1
note "bench_scheduler --seqs 256 --vocab 16: $(grep -E '^(policy|engine)' "$R/bench_scheduler.txt" | tr '\n' ' ')"

for size in $SIZES; do
  if [ "$size" != "$first" ]; then t0=$SECONDS; checkpoint "$size"; rc=$?; else wait $CKPT_PID; rc=$?; fi
  note "checkpoint $size rc=$rc in $((SECONDS - t0)) s: $(tail -2 "$R/ckpt_$size.log" | tr '\n' ' ')"
  [ $rc = 0 ] || continue
  CKPT=/tmp/qwen35-$size-random
  if [ "$size" = 27b ]; then IN=8192; OUTLEN=1024; SWEEP=${SWEEP_27B:-1:4 16:32}
  else IN=1024; OUTLEN=256; SWEEP=${SWEEP_9B:-1:8 16:64 64:128 256:512}; fi
  for variant in $(for w in ${WEIGHTS:-bf16}; do for t in ${BUDGETS:-default}; do for st in ${STATES:-default}; do
                     echo "$w:$t:$st"; done; done; done); do
  IFS=: read -r weights budget state <<< "$variant"
  case $weights in
    fp8) wargs=(--quantization fp8 --fp8-weights resident) ;;
    fp8-bf16) wargs=(--quantization fp8) ;;
    *) wargs=() ;;
  esac
  tag=$size; [ -n "${WEIGHTS:-}" ] && tag=${size}_$weights
  [ "$budget" != default ] && { tag=${tag}_t$budget; wargs+=(--max-num-batched-tokens "$budget"); }
  [ "$state" != default ] && { tag=${tag}_s$state; wargs+=(--mamba-ssm-cache-dtype "$state"); }
  [ "$(left)" -gt 90 ] || { note "no time left for $tag"; continue; }
  t0=$SECONDS
  "$B/bin/serve" --model "$CKPT" --backend cuda --port $PORT --gpu-memory-utilization 0.9 --max-num-seqs 256 \
    "${wargs[@]}" ${SERVE_ARGS:-} > "$R/serve_$tag.log" 2>&1 &
  SERVE_PID=$!
  until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
    kill -0 $SERVE_PID 2>/dev/null || break
    [ "$(left)" -gt 60 ] || break
    sleep 1
  done
  note "serve $tag up in $((SECONDS - t0)) s: $(grep -E 'weights|K/V cache|state slots|fit at once' "$R/serve_$tag.log" | head -4 | tr '\n' ' ')"
  # Every run: random token-id prompts (ids of real Qwen3 BPE tokens), replies of exactly max_tokens.
  bench=("$B/bin/bench_serve" --base-url "http://127.0.0.1:$PORT" --dataset random --random-vocab-size 151643
         --ignore-eos --no-progress)
  # Warm-up: the first steps of a fresh server pay one-time costs (cuBLAS, workspaces); 32
  # prompts of 1024 tokens fill whole 2048-token steps.
  "${bench[@]}" --num-prompts 32 --max-concurrency 32 --random-input-len 1024 --random-output-len 16 \
    > "$R/${tag}_warmup.txt" 2>&1
  note "warm-up $tag rc=$?"
  for point in $SWEEP; do
    IFS=: read -r c n mode <<< "$point"
    # mode "greedy": --temperature 0 (the device sampler's argmax path) instead of the
    # server's default sampling (temperature 1 over the whole vocabulary).
    name=${tag}_c$c${mode:+_$mode}; extra=(); [ "$mode" = greedy ] && extra=(--temperature 0)
    [ "$(left)" -gt 40 ] || { note "no time left for $name"; continue; }
    timeout $(( $(left) - 20 )) "${bench[@]}" --random-input-len $IN --random-output-len $OUTLEN \
      --max-concurrency "$c" --num-prompts "$n" --seed "$c" "${extra[@]}" --label "$tag c=$c${mode:+ $mode}" \
      --result-json "$R/$name.json" > "$R/$name.txt" 2>&1
    note "$name n=$n rc=$? ($(left) s left)"
  done
  # The server's own counters (preemptions, tokens) after the sweep; not into its log, which
  # it still writes.
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^vllm:(num_preemptions|prompt_tokens|generation_tokens)_total' \
    > "$R/metrics_$tag.txt"
  note "$tag server counters: $(tr '\n' ' ' < "$R/metrics_$tag.txt")"
  kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null
  done
  if [ "$size" = 9b ] && [ "${HOST_STEP:-0}" = 1 ] && [ "$(left)" -gt 90 ]; then
    timeout $(( $(left) - 20 )) "$B/bin/bench_cuda_model" --model "$CKPT" --batches 256 --contexts 1024 \
      --prefill 0 --layouts "" > "$R/bench_cuda_model_b256.txt" 2>&1
    note "bench_cuda_model b256 ctx1K rc=$?: $(grep -E '^decode' "$R/bench_cuda_model_b256.txt" | tr '\n' ' ')"
  fi
  rm -rf "$CKPT"
  python3 "$HERE/bench_serve_report.py" $(ls -v "$R/${size}"*_c*.json) | tee -a "$summary"
done
echo "==== summary"; cat "$summary"

#!/usr/bin/env bash
# The CUDA backend's run on the GPU machine, in one command (logs under $OUT, summary last):
#   1. unpack .devbuild/cuda/bundle.tar.xz (scripts/cuda_build_carry.sh) and find cuBLAS;
#   2. generate the random-weight 9B checkpoint in the background (make_random_checkpoint.py);
#   3. GPU tests: CUDA ops vs CPU, the whole model vs the CPU engine, the decode-kernel tests;
#      refcheck --backend cuda / cuda-f32 on the tiny fixture (whole prompt, chunks 7 and 64);
#      the engine acceptance tests with DELTASERVE_TEST_BACKEND=cuda-f32 and cuda;
#   4. with --serve-smoke: serve --backend cuda (plus SERVE_ARGS) on the tiny model and
#      scripts/smoke.sh against it;
#   5. bench_cuda_model on the 9B checkpoint (SIZE=27b for the 27B geometry); KV_BENCH="q8_0 ..."
#      runs it again per K/V cache type, BENCH2_ARGS a second run (an A/B: a path forced by a flag, or BENCH2_BIN).
#   [SIZE=9b|27b] scripts/cuda_device_run.sh [--no-tests] [--no-bench] [--serve-smoke] [--bench-args "..."]
set -uo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
DEADLINE=${DEADLINE:-570}  # seconds for the whole run (the device tool stops a call at 600)
TEST_DEADLINE=${TEST_DEADLINE:-230}  # the tests stop here so the benchmark keeps its time
# A step's timeout: its own limit, cut to what is left of the test phase (0 = skip it).
limit() { local left=$((TEST_DEADLINE - (SECONDS - START))); [ $left -lt $1 ] && echo $left || echo $1; }
OUT=${OUT:-/tmp/cuda_out}
mkdir -p "$OUT"
TESTS=1; BENCH=1; BENCH_ARGS=""; SERVE=0
while [ $# -gt 0 ]; do
  case $1 in
    --serve-smoke) SERVE=1 ;;
    --no-tests) TESTS=0 ;;
    --no-bench) BENCH=0 ;;
    --bench-args) BENCH_ARGS=$2; shift ;;
  esac
  shift
done
B=/tmp/dsbundle
rm -rf "$B"; mkdir -p "$B"
xz -dc .devbuild/cuda/bundle.tar.xz | tar -C "$B" -xf - || { echo "cannot unpack the bundle"; exit 1; }
CUBLAS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -e "$d/libcublas.so.13" ] && { CUBLAS=$d; break; }
done
LIBS="$B/lib:$CUBLAS"
run() { env LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
{ date -u; echo "bundle commit $(cat $B/COMMIT | tr '\n' ' ')"; echo "cublas from $CUBLAS";
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
summary="$OUT/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }

SIZE=${SIZE:-9b}  # the model geometry of the benchmark checkpoint (9b, 27b, 4b)
CKPT=/tmp/qwen35-$SIZE-random
if [ "$BENCH" = 1 ]; then
  PYTHONUNBUFFERED=1 timeout 400 python3 scripts/make_random_checkpoint.py --size $SIZE --out $CKPT > "$OUT/ckpt.log" 2>&1 &
  CKPT_PID=$!
fi

if [ "$TESTS" = 1 ]; then
  T="$OUT/tests.log"; : > "$T"
  for spec in "test_cuda_backend_ops_gpu" "test_cuda_model_gpu" "test_kernels_cuda_gpu [decode]~[long]~[bigpool]"; do
    set -- $spec
    echo "== $spec" >> "$T"
    t=$(limit 150); [ $t -le 5 ] && { note "skipped $spec"; continue; }; run timeout $t "$B/bin/$1" ${2:+"$2"} -r compact >> "$T" 2>&1
    note "test $spec rc=$? $(grep -E '^(Passed|Failed)|test cases' "$T" | tail -1)"
  done
  R="$OUT/refcheck.log"; : > "$R"
  for be in cuda cuda-f32; do
    for chunk in "" "--chunk 7" "--chunk 64"; do
      echo "== refcheck $be $chunk" >> "$R"
      t=$(limit 60); [ $t -le 5 ] && { note "skipped refcheck"; continue; }; run timeout $t "$B/bin/refcheck" --model tests/data/tiny-qwen35 --backend $be $chunk >> "$R" 2>&1
      note "refcheck $be ${chunk:-whole} rc=$? $(tail -1 "$R")"
    done
  done
  # The YaRN fixture (tiny-qwen35 under its hf_overrides.json), when the checkout has it.
  Y=tests/data/tiny-qwen35-yarn
  if [ -f "$Y/reference.safetensors" ]; then
    for be in cuda cuda-f32; do
      for chunk in "" "--chunk 7"; do
        echo "== refcheck yarn $be $chunk" >> "$R"
        t=$(limit 60); [ $t -le 5 ] && { note "skipped refcheck yarn"; continue; }; run timeout $t "$B/bin/refcheck" --model tests/data/tiny-qwen35 --reference "$Y/reference.safetensors" --hf-overrides-file "$Y/hf_overrides.json" --backend $be $chunk >> "$R" 2>&1
        note "refcheck yarn $be ${chunk:-whole} rc=$? $(tail -1 "$R")"
      done
    done
  fi
  # Quantised / f16 K/V caches (KV_TYPES, default "f16 q8_0 q4_0") at the production defaults.
  for kv in ${KV_TYPES-f16 q8_0 q4_0}; do
    for chunk in "" "--chunk 64"; do
      echo "== refcheck cuda --kv-cache-dtype $kv $chunk" >> "$R"
      t=$(limit 60); [ $t -le 5 ] && { note "skipped refcheck $kv"; continue; }; run timeout $t "$B/bin/refcheck" --model tests/data/tiny-qwen35 --backend cuda --kv-cache-dtype $kv $chunk >> "$R" 2>&1
      note "refcheck cuda kv $kv ${chunk:-whole} rc=$? $(tail -2 "$R" | tr '\n' ' ')"
    done
  done
  E="$OUT/engine.log"; : > "$E"
  for be in cuda-f32 cuda; do
    for case in batch chunked preemption free max_ctx seeded random; do
      echo "== engine $be [$case]" >> "$E"
      t=$(limit 120); [ $t -le 5 ] && { note "skipped engine $be $case"; continue; }; DELTASERVE_TEST_BACKEND=$be run timeout $t "$B/bin/test_engine_tiny" "[$case]" -r compact >> "$E" 2>&1
      note "engine $be [$case] rc=$? $(grep -E '^(Passed|Failed)|test cases' "$E" | tail -1)"
    done
  done
fi

if [ "$SERVE" = 1 ]; then
  # serve --backend cuda on the tiny model (device memory budget, device sampler), then the
  # curl smoke checks of scripts/smoke.sh against it.
  run "$B/bin/serve" --model tests/data/tiny-qwen35 --backend cuda --port 18080 --gpu-memory-utilization 0.2 \
    ${SERVE_ARGS:-} > "$OUT/serve.log" 2>&1 &
  SERVE_PID=$!
  for i in $(seq 60); do curl -s -m 2 http://127.0.0.1:18080/health | grep -q ok && break; sleep 1; done
  BASE_URL=http://127.0.0.1:18080 timeout 120 scripts/smoke.sh > "$OUT/smoke.log" 2>&1
  note "serve --backend cuda smoke rc=$? $(tail -1 "$OUT/smoke.log")"
  grep -E "backend|device memory|K/V cache|state slots" "$OUT/serve.log" | head -6 | tee -a "$summary"
  kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null
fi

if [ "$BENCH" = 1 ]; then
  wait $CKPT_PID; note "checkpoint rc=$? $(tail -1 "$OUT/ckpt.log")"
  left=$((DEADLINE - (SECONDS - START)))
  note "bench budget ${left}s"
  run timeout $left "$B/bin/bench_cuda_model" --model $CKPT $BENCH_ARGS > "$OUT/bench.log" 2>&1
  note "bench rc=$?"
  # Optional second benchmark run, e.g. an A/B of a forced path:
  #   BENCH2_ARGS='--no-gemv --batches 1,8 --contexts 1024 --prefill 0 --layouts ""'
  # (BENCH2_BIN=bench_cuda_model_base runs the baseline binary of the bundle instead.)
  # KV_BENCH="q8_0 q4_0": the benchmark again with those K/V cache types (KV_BENCH_ARGS).
  for kv in ${KV_BENCH:-}; do
    left=$((DEADLINE - (SECONDS - START)))
    [ $left -gt 30 ] || { note "no time for the $kv benchmark"; continue; }
    run timeout $left "$B/bin/bench_cuda_model" --model $CKPT --kv-cache-dtype $kv ${KV_BENCH_ARGS:-} > "$OUT/bench_$kv.log" 2>&1
    note "bench kv $kv rc=$?: $(grep -E '^decode|^cache' "$OUT/bench_$kv.log" | tr '\n' ';')"
  done
  if [ -n "${BENCH2_ARGS:-}${BENCH2_BIN:-}" ]; then
    left=$((DEADLINE - (SECONDS - START)))
    if [ $left -gt 30 ]; then
      eval "env LD_LIBRARY_PATH=$LIBS timeout $left $B/bin/${BENCH2_BIN:-bench_cuda_model} --model $CKPT ${BENCH2_ARGS:-}" \
        > "$OUT/bench2.log" 2>&1 || true
      note "bench2 (${BENCH2_BIN:-bench_cuda_model} ${BENCH2_ARGS:-}): $(grep -E '^decode|^prefill' "$OUT/bench2.log" | tr '\n' ';')"
    fi
  fi
  grep -E "^gpu|^decode|^prefill|^loaded|error" "$OUT/bench.log" | head -40
  sed -n '/^| measurement/,$p' "$OUT/bench.log" | tee -a "$summary"
fi
echo "==== summary"; cat "$summary"

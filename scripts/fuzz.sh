#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (build-fuzz/) and runs each for a
# bounded time under ASan + UBSan, seeded with its corpus in tests/fuzz/corpus. New inputs go
# to a scratch folder; add the interesting ones to the corpus by hand (libFuzzer's -merge=1).
#   scripts/fuzz.sh                 FUZZ_SECONDS=30 per target (what scripts/test.sh runs)
#   FUZZ_SECONDS=600 scripts/fuzz.sh http_request
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=""
for c in clang++-15 clang++-14 clang++; do
  if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz: no clang++ found (apt-get install clang libclang-rt-14-dev); skipped"
  exit 0
fi
secs=${FUZZ_SECONDS:-30}
targets=${*:-http_request request_json grammar_compile image_decode video_decode disk_entry lora_adapter}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELTASERVE_FUZZ=ON \
      -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build build-fuzz -j "${JOBS:-$(nproc)}"
for t in $targets; do
  scratch=$(mktemp -d)
  echo "== fuzz_$t for ${secs}s"
  log=build-fuzz/fuzz_$t.log
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    build-fuzz/fuzz_$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/crash-$t-" "$scratch" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    tail -80 "$log"
    echo "fuzz_$t FAILED: the input is in build-fuzz/crash-$t-*"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$log" || tail -3 "$log"
  rm -rf "$scratch"
done

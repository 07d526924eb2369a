#!/usr/bin/env bash
# ThreadSanitizer pass (what scripts/test.sh runs after ASan + UBSan): builds build-tsan/ with
# -fsanitize=thread and runs the tests where threads meet -- the engine thread against its
# submitters and cancellers (the fake model), the host and disk tiers' copy threads, the grammar
# compile workers, and the HTTP server's transport, request threads, disconnect watcher and media
# fetches on the tiny model. Any report fails the test (TSan's exit code 66). The suppressions
# (tests/sanitizers/tsan.supp) name only uninstrumented libraries.
#   scripts/tsan.sh                          the default set below
#   TSAN_TESTS='test_server_http_flood' scripts/tsan.sh      a ctest -R pattern of your own
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
# The HTTP cases that spend minutes on tiny-model numerics (structured, long, params) and the
# serve-as-a-process test add no thread the others do not exercise; left to the Release pass.
tests=${TSAN_TESTS:-'^(test_engine_fake|test_speculative|test_scheduler_policy|test_host_tier|test_disk_tier|test_server_pipeline|test_server_http_(fixture|endpoints|errors|flood|disconnect|tools|hardening|messages|responses|limits|vision|video|lora))$'}
# -O1 -g1 as the ASan pass; target_clones are off in this build (CMakeLists.txt, DELTASERVE_TSAN).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
      -DDELTASERVE_TSAN=ON -DDELTASERVE_CUDA=OFF >/dev/null
cmake --build build-tsan -j "$jobs" --target test_engine_fake test_speculative test_scheduler_policy \
      test_host_tier test_disk_tier test_server_pipeline test_server_http
# OpenBLAS's own threads are uninstrumented: one thread, so the CPU backend's pool is all TSan sees.
(cd build-tsan && OPENBLAS_NUM_THREADS=1 \
   TSAN_OPTIONS="suppressions=$PWD/../tests/sanitizers/tsan.supp second_deadlock_stack=1 history_size=4" \
   ctest --output-on-failure -j "$jobs" -R "$tests")

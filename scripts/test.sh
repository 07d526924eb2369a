#!/usr/bin/env bash
# Newcomer command 2 (and what CI runs): install dependencies, build, run every test that
# needs no GPU -- first the Release build, then again under AddressSanitizer + UBSan, then the
# threaded ones under ThreadSanitizer.
# The CUDA sources are compiled (for sm_90a) whenever nvcc is present, so a broken kernel
# fails here even though its tests only run on a GPU machine.
#   SKIP_SANITIZE=1 scripts/test.sh   skips the ASan + UBSan pass; SKIP_TSAN=1 the TSan pass.
# Then the fuzz targets of tests/fuzz run under libFuzzer for FUZZ_SECONDS each (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage says when it starts (minutes since this script began): CI time is a budget.
stage() { echo "== $* (at $((SECONDS / 60)) min)"; }
scripts/setup.sh test
# ccache (in the user's home) makes a repeated run on the same machine rebuild only what
# changed; CMake takes the launchers from the environment when it first configures a folder.
# The precompiled headers stay cacheable with this sloppiness; BASEDIR lets clones at other
# paths share the cache.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
jobs=${JOBS:-$(nproc)}
# The official openai and @anthropic-ai/sdk npm clients, for test_openai_npm and
# test_anthropic_npm (versions pinned by package-lock.json).
(cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)

stage "Release build"
scripts/build.sh
(cd build && ctest --output-on-failure -LE gpu -j "$jobs")

# The same CUDA sources through hipcc (kernels/common/gpu_runtime.h), compile only, when the
# Debian ROCm compiler is installed (apt-get install hipcc rocm-device-libs).
if command -v hipcc >/dev/null 2>&1; then
  stage "HIP compile check"
  kernels/hip/compile_check.sh
fi

if [ "${SKIP_SANITIZE:-0}" != "1" ]; then
  stage "ASan + UBSan build"
  # -O1 -g1: what the sanitizers need for speed and stack traces, at half the compile time of -O2 -g.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
        -DDELTASERVE_SANITIZE=ON -DDELTASERVE_CUDA=OFF
  cmake --build build-asan -j "$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -LE gpu -j "$jobs")
fi
# The threaded tests again under ThreadSanitizer (scripts/tsan.sh says which).
if [ "${SKIP_TSAN:-0}" != "1" ]; then
  stage "TSan build and tests"
  scripts/tsan.sh
fi
# The request parsers under libFuzzer (clang, ASan + UBSan), FUZZ_SECONDS per target.
stage "fuzzing the request parsers"
FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
stage "all tests passed"

#!/usr/bin/env bash
# Installs the Debian packages deltaserve builds against. Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git curl ccache
      nlohmann-json3-dev libcpp-httplib-dev libspdlog-dev libfmt-dev libcli11-dev catch2
      libpcre2-dev libutf8proc-dev libopenblas-dev
      libvalijson-dev json-schema-test-suite)  # the structured-output tests' validator and schemas
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm run the npm client tests (tests/npm); any install that provides them will do.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# For scripts/test.sh only (TEST_TOOLS=1): hipcc + the ROCm device libraries let it compile the
# paged-attention kernels for AMD (compile only), clang-15 with its libFuzzer runtime runs the
# fuzz targets (scripts/fuzz.sh), and HAProxy fronts two replicas in the scale-out test. They are large (LLVM, ROCm), so the run
# command does not install them; a machine where they do not install still builds and tests.
if [ "${TEST_TOOLS:-0}" = "1" ]; then
  tools=()
  command -v hipcc >/dev/null 2>&1 || tools+=(hipcc rocm-device-libs)
  command -v clang++-15 >/dev/null 2>&1 || tools+=(clang-15)
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || tools+=(haproxy)
  if [ ${#tools[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing ${tools[*]} (optional: the HIP compile check and the fuzz targets)"
    [ ${#missing[@]} -gt 0 ] || $sudo apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${tools[@]}" ||
      echo "setup: ${tools[*]} did not install; the HIP compile check or the fuzzing will be skipped"
  fi
fi

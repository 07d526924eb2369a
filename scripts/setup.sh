#!/usr/bin/env bash
# Installs the Debian packages deltaserve builds against. Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git curl
      nlohmann-json3-dev libcpp-httplib-dev libspdlog-dev libfmt-dev libcli11-dev catch2
      libpcre2-dev libutf8proc-dev libopenblas-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm run the openai-client test (tests/npm); any install that provides them will do.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# Optional, for scripts/test.sh only (WITH_HIP=1): hipcc + the ROCm device libraries let it
# compile the paged-attention kernels for AMD (compile only). They are large (LLVM, ROCm), so
# the run command does not install them; a machine where they do not install still builds and
# tests.
if [ "${WITH_HIP:-0}" = "1" ] && ! command -v hipcc >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing hipcc rocm-device-libs (optional, for the HIP compile check)"
  [ ${#missing[@]} -gt 0 ] || $sudo apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq hipcc rocm-device-libs ||
    echo "setup: hipcc did not install; the HIP compile check will be skipped"
fi

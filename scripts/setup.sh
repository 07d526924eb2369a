#!/usr/bin/env bash
# Installs the Debian packages a stage needs, with apt-get (via sudo when not root). Safe to run
# again: only missing packages are installed.
#   scripts/setup.sh [run]   building and running `serve` (scripts/run.sh, scripts/scale_out.sh):
#                            the compiler, CMake/Ninja and the libraries serve links
#   scripts/setup.sh test    that, plus what the tests need (scripts/test.sh): Catch2, the HTTP
#                            client and the JSON-Schema validator of the tests, Node.js + npm for
#                            the SDK and README tests, Python 3 for the report check, ccache
#                            (test.sh's repeated builds); then,
#                            optionally, hipcc (the HIP compile check), clang-15 (the fuzzer) and
#                            HAProxy (the scale-out test)
set -euo pipefail
stage=${1:-run}
case $stage in run | test) ;; *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;; esac
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
updated=0
# The run stage takes no recommended packages (serve needs none); the test stage takes apt's
# defaults, as CI always has.
recommends=(); [ "$stage" = run ] && recommends=(--no-install-recommends)
apt_install() {  # packages...; returns apt-get's status
  [ $updated = 1 ] || { $sudo apt-get update -qq; updated=1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${recommends[@]}" "$@"
}
missing_of() {  # packages... -> those not installed, one per line
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

pkgs=(build-essential cmake ninja-build pkg-config git curl
      nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libopenblas-dev
      libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev  # images in (model/vision)
      libavformat-dev libavcodec-dev libswscale-dev libavutil-dev  # video in (model/vision)
      libcpp-httplib-dev libssl-dev)  # image URLs over http(s), SHA-256 image hashes (server/)
if [ "$stage" = test ]; then
  pkgs+=(catch2 python3 ccache
         libvalijson-dev json-schema-test-suite)  # the structured-output tests' validator and schemas
fi
mapfile -t missing < <(missing_of "${pkgs[@]}")
# node + npm run the npm client and README tests (tests/npm, tests/readme); any install that
# provides them will do.
if [ "$stage" = test ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup ($stage): installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

# The test stage's optional tools: hipcc + the ROCm device libraries compile the paged-attention
# kernels for AMD (compile only), clang-15 with its libFuzzer runtime runs the fuzz targets
# (scripts/fuzz.sh), HAProxy fronts two replicas in the scale-out test. They are large (LLVM,
# ROCm); a machine where they do not install still builds and tests.
if [ "$stage" = test ]; then
  tools=()
  command -v hipcc >/dev/null 2>&1 || tools+=(hipcc rocm-device-libs)
  command -v clang++-15 >/dev/null 2>&1 || tools+=(clang-15)
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || tools+=(haproxy)
  if [ ${#tools[@]} -gt 0 ]; then
    echo "setup: installing ${tools[*]} (optional: the HIP compile check, the fuzz targets, the scale-out test)"
    apt_install "${tools[@]}" ||
      echo "setup: ${tools[*]} did not install; the HIP compile check, the fuzzing or the scale-out test will be skipped"
  fi
fi

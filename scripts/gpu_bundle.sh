# Sourced by the scripts that run on the GPU machine: unpacks the bundle of
# scripts/cuda_build_carry.sh (.devbuild/cuda/bundle.tar.xz, carried with the working tree)
# into B=/tmp/dsbundle unless that copy is already the carried one, and puts its shared
# libraries on LD_LIBRARY_PATH. Expects to run from the repository root.
B=/tmp/dsbundle
if [ ! -x "$B/bin/bench_paged_attention" ] || [ .devbuild/cuda/bundle.tar.xz -nt "$B/COMMIT" ]; then
  rm -rf "$B"; mkdir -p "$B"
  xz -dc .devbuild/cuda/bundle.tar.xz | tar -C "$B" -xf - || { echo "cannot unpack the bundle"; exit 1; }
  touch "$B/COMMIT"
fi
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

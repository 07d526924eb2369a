# Sourced by the serving scripts that run on the GPU machine (bench_serve_gpu.sh,
# prefix_cache_gpu.sh, structured_serve_gpu.sh), staged beside them by bench_serve_bundle.sh. Expects OUT (where the
# results go), R (a scratch folder for the raw results), BUNDLE (the bundle to unpack) and
# DEADLINE (seconds for the whole command). Gives: B (the unpacked bundle, its libraries and the
# machine's cuBLAS on LD_LIBRARY_PATH), left (seconds left), note (a line for the summary),
# gpu_tests (runs the bundle's test binaries), and the raw results packed into
# $OUT/results.tar.gz at exit.
START=$SECONDS
rm -rf "$R"; mkdir -p "$OUT" "$R"
left() { echo $((DEADLINE - (SECONDS - START))); }
summary="$OUT/summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
pack() { tar -C "$R" -czf "$OUT/results.tar.gz" . 2>/dev/null; }
trap pack EXIT

B=/tmp/serve_gpu_bundle
rm -rf "$B"; mkdir -p "$B"
xz -dc "$BUNDLE" | tar -C "$B" -xf - || { echo "cannot unpack $BUNDLE"; exit 1; }
# cuBLAS comes with the machine's CUDA (or its Python wheels), not with the bundle.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  if [ -e "$d/libcublas.so.13" ]; then export LD_LIBRARY_PATH="$B/lib:$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; break; fi
done

# gpu_tests NAME...: each test binary of the bundle that exists, on the checkout's fixtures
# (tests/data), its output in $R/NAME.txt and one summary line; TEST_TIMEOUT seconds each.
gpu_tests() {
  export DELTASERVE_TEST_DATA_DIR=$PWD/tests/data
  local t
  for t in "$@"; do
    [ -x "$B/bin/$t" ] || continue
    timeout "${TEST_TIMEOUT:-240}" "$B/bin/$t" > "$R/$t.txt" 2>&1
    note "$t rc=$?: $(grep -E 'test cases|passed|failed' "$R/$t.txt" | tail -2 | tr '\n' ' ')"
  done
}

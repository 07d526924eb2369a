#!/usr/bin/env bash
# Where in the tensor-core decode kernel's SASS the warps stall (Nsight Compute warp-state
# sampling by instruction), for each type in TYPES at one grid point CASE (default 8,131072):
# the 30 hottest instructions and the samples by opcode. Run on the GPU machine with
# .devbuild/cuda carried (scripts/gpu_bundle.sh unpacks it).
#   [TYPES="q8_0 q4_0"] [CASE=8,32768] scripts/attn/attn_stall_sites.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_stall_sites}
mkdir -p "$OUT"
. scripts/gpu_bundle.sh
for t in ${TYPES:-q8_0 q4_0}; do
  /usr/local/cuda/bin/ncu --section SourceCounters -k regex:decode_tc --launch-skip 3 --launch-count 1 --page source \
    --print-source sass --csv "$B/bin/bench_paged_attention" --types "$t" --case "${CASE:-8,131072}" --iters 5 \
    > "$OUT/src_$t.csv" 2> "$OUT/src_$t.err"
  python3 - "$OUT/src_$t.csv" "$t" <<'PY'
import collections, csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hi = next((i for i, r in enumerate(rows) if any('Warp Stall Sampling (All' in c for c in r)), None)
if hi is None:
    sys.exit(print(sys.argv[2], 'no source table'))
ci = next(i for i, c in enumerate(rows[hi]) if 'Warp Stall Sampling (All' in c)
data = []
for r in rows[hi + 1:]:
    try:
        data.append((float(r[ci].replace(',', '')), r[1].strip(), r[0]))
    except (ValueError, IndexError):
        pass
total = sum(d[0] for d in data)
data.sort(reverse=True)
print(f"== {sys.argv[2]}: {len(data)} SASS lines, {total:.0f} samples; hottest (share, address, instruction)")
for v, s, a in data[:30]:
    print(f"{100 * v / total:5.1f}% {a} {s}")
ops = collections.Counter()
for v, s, a in data:
    ops[(s.split() or ['?'])[0]] += v
print('by opcode:', ', '.join(f"{k} {100 * v / total:.1f}%" for k, v in ops.most_common(15)))
PY
done

#!/usr/bin/env bash
# Executed-instruction mix of the tensor-core decode kernel (Nsight Compute), per 16-token
# tile per warp, for B=8 x 32K and each type in TYPES: where a kernel's issue slots go.
# Run on the GPU machine with .devbuild/cuda carried (scripts/gpu_bundle.sh unpacks it).
#   TYPES="q8_0 q4_0" scripts/attn/attn_inst_mix.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/attn_mix}
mkdir -p "$OUT"
. scripts/gpu_bundle.sh
for t in ${TYPES:-bf16 q8_0 q4_0}; do
  /usr/local/cuda/bin/ncu --metrics sass__inst_executed_per_opcode,smsp__inst_executed.sum,smsp__issue_active.avg.per_cycle_active \
    --print-metric-instances details -k regex:decode_tc --launch-skip 3 --launch-count 1 \
    "$B/bin/bench_paged_attention" --types "$t" --case 8,32768 --iters 5 > "$OUT/ncu_$t.txt" 2>&1
  python3 - "$OUT/ncu_$t.txt" "$t" <<'PY'
import re, sys
txt = open(sys.argv[1]).read()
i = txt.find('sass__inst_executed_per_opcode')
if i < 0:
    sys.exit(print(sys.argv[2], 'no ncu result'))
seg = re.sub(r'\s+', ' ', txt[i:txt.find('smsp__', i + 10)])
ops = {k: int(v.replace(',', '')) for k, v in re.findall(r'([A-Z0-9_.]+): ([\d,]+)', seg)}
tiles = 8 * 32768 // 16 * 4  # warp-tiles of B=8 x 32K with 4 KV heads
issue = re.search(r'issue_active.avg.per_cycle_active\s+([\d.]+)', txt)
print(f"{sys.argv[2]}: {sum(ops.values()) / tiles:.0f} instructions per tile-warp, issue active {issue.group(1) if issue else '?'}")
print('  ' + ', '.join(f'{k} {v / tiles:.0f}' for k, v in sorted(ops.items(), key=lambda x: -x[1]) if v / tiles >= 4))
PY
done

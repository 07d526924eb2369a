#!/usr/bin/env bash
# The GPU study harness on the CPU build (CTest harness_selftest): bench/bundle.py packs the
# study harness_selftest's binaries from this build, and the same binaries again as the
# baseline; bench/run_study.py runs it (a program A/B, a test binary, serve + bench_serve A/B
# with /metrics deltas and scripts/smoke.sh as a client, a Python tool, a shell step); then
# every step must have run with exit status 0, the A/B table must be in the summary, and the
# program's result file must have the shared shape.
#   tests/docs/harness_selftest.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
root=$1
build=$2
work=$(mktemp -d -t ds-harness.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/bundle.py" harness_selftest --from-build "$build" --baseline-from "$build" \
  --dest "$work/bundle" --xz-level 0 > "$work/bundle.log"
python3 "$root/bench/run_study.py" harness_selftest --bundle "$work/bundle" --out "$work/out" --scratch "$work/scratch"
python3 - "$work/out" <<'PY'
import json, sys
out = sys.argv[1]
m = json.load(open(f"{out}/study.json"))
bad = [f"step {s['name']}: {s.get('status')}" for s in m["steps"] if s.get("status") != "ran"]
bad += [f"step {s['name']}: {f.get('log')} rc={f['rc']}" for s in m["steps"] for f in s["files"] if f.get("rc", 0) != 0]
variants = {f.get("variant") for s in m["steps"] for f in s["files"]}
if not {"base", "new"} <= variants:
    bad.append(f"A/B variants ran: {variants}")
summary = open(f"{out}/summary.md").read()
for needle in ("| step | metric | base | new | new / base |", "harness shell step ok", "| run | done | failed |"):
    if needle not in summary:
        bad.append(f"summary lacks {needle!r}")
if bad:
    sys.exit("harness self-test:\n" + "\n".join(bad) + "\n\n" + summary)
print(f"harness self-test: {len(m['steps'])} steps ran")
PY
tar -xzf "$work/out/results.tar.gz" -C "$work"
python3 "$root/bench/report.py" check-result "$work/harness_selftest/speculative.new1.json" --program bench_speculative --rows 6

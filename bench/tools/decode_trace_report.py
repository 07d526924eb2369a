#!/usr/bin/env python3
"""Summarises the per-block phase stamps of bench_paged_attention --trace FILE.

For each trace: the call's event time, the span of the decode kernel's blocks (first start to
last end, %globaltimer), when blocks started and ended (percentiles, from the first start),
block durations, and the medians of each block's phases: start-up (start to first tile in
shared memory), streaming (first tile to last tile), and the final merge and write.
  python3 bench/tools/decode_trace_report.py TRACE.csv [...]
"""
import statistics
import sys


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def report(path):
    head = ""
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                head = line[1:].strip()
            elif line[0].isdigit():
                v = [int(x) for x in line.split(",")]
                rows.append(tuple(v[1:8]) + (tuple(v[8:14]) if len(v) >= 14 else (0,) * 6) + (v[14] if len(v) >= 15 else 0,))
    if not rows:
        print(f"{path}: no blocks")
        return
    starts = [r[1] / 1e3 for r in rows]
    ends = [r[2] / 1e3 for r in rows]
    durs = [(r[2] - r[1]) / 1e3 for r in rows]
    # cycles -> us from the blocks' own clock/globaltimer ratio (long blocks only)
    ghz = statistics.median(r[5] / (r[2] - r[1]) for r in rows if r[2] - r[1] > 2000) if any(
        r[2] - r[1] > 2000 for r in rows) else 1.98
    startup = [r[3] / ghz / 1e3 for r in rows]
    stream = [(r[4] - r[3]) / ghz / 1e3 for r in rows]
    tail = [(r[5] - r[4]) / ghz / 1e3 for r in rows]
    span = max(ends) - min(starts)
    sms = len({r[0] for r in rows})
    busy = sum(durs) / (sms * span) if span > 0 else 0
    print(f"{head}")
    print(f"  blocks {len(rows)} on {sms} SMs, kernel span {span:.1f} us, SM busy {busy:.0%}, clock {ghz:.2f} GHz")
    print("  start  us: p0 %.1f p50 %.1f p90 %.1f max %.1f" % (min(starts), pct(starts, 50), pct(starts, 90), max(starts)))
    print("  end    us: p0 %.1f p10 %.1f p50 %.1f p90 %.1f max %.1f" % (min(ends), pct(ends, 10), pct(ends, 50),
                                                                      pct(ends, 90), max(ends)))
    print("  block  us: p0 %.1f p50 %.1f p90 %.1f max %.1f" % (min(durs), pct(durs, 50), pct(durs, 90), max(durs)))
    # Balance: when each SM's last block ended (from the first start); between the mean and the
    # last, some SMs sit idle (for Q8_0, handing them more work did not end the kernel sooner:
    # docs/bench-log, 2026-12-01).
    t0 = min(starts)
    sm_end = {}
    for r in rows:
        sm_end[r[0]] = max(sm_end.get(r[0], 0), r[2] / 1e3 - t0)
    e = list(sm_end.values())
    print("  SM last end us: p0 %.1f p10 %.1f p50 %.1f mean %.1f max %.1f (slowest 10%% of SMs: %s)" % (
        min(e), pct(e, 10), pct(e, 50), statistics.mean(e), max(e),
        ",".join(str(s) for s, _ in sorted(sm_end.items(), key=lambda kv: -kv[1])[:max(1, len(e) // 10)])))
    print("  phases us (median): start-up %.2f, streaming %.2f, merge+write %.2f" % (
        statistics.median(startup), statistics.median(stream), statistics.median(tail)))
    if any(r[7] for r in rows):
        med = lambda k: statistics.median(r[k] for r in rows) / ghz / 1e3
        print("  start-up us (median, from start): item+length %.2f, first block ids %.2f, first stages issued %.2f, "
              "q landed %.2f, q %.2f, first tile %.2f, second tile %.2f" % (
                  med(7), med(8), med(11), med(13), med(9), statistics.median(startup), med(12)))
        print("  end us (median, from last tile): sums reduced %.2f, written %.2f" % (
            statistics.median((r[10] - r[4]) / ghz / 1e3 for r in rows), statistics.median(tail)))
    toks = [r[6] for r in rows]
    if max(toks) > 0:
        rates = [r[6] / ((r[4] - r[3]) / ghz / 1e3) for r in rows if r[4] > r[3] and r[6] > 0]
        if rates:
            print("  tokens/us while streaming: p10 %.1f p50 %.1f p90 %.1f" % (pct(rates, 10), pct(rates, 50), pct(rates, 90)))


for p in sys.argv[1:]:
    report(p)

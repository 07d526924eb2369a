#!/usr/bin/env python3
"""Prints a markdown table of bench_serve result files (--result-json), one row per file.

    python3 bench/tools/serve_table.py OUT/9b_c1.json OUT/9b_c16.json ...
"""
import json
import sys

COLS = [
    ("run", None), ("conc.", "max_concurrency"), ("done", "completed"), ("failed", "failed"),
    ("in tok", "total_input_tokens"), ("out tok", "total_output_tokens"), ("s", "duration"),
    ("req/s", "request_throughput"), ("out tok/s", "output_throughput"),
    ("TTFT mean", "mean_ttft_ms"), ("TTFT p50", "median_ttft_ms"), ("TTFT p99", "p99_ttft_ms"),
    ("TPOT mean", "mean_tpot_ms"), ("TPOT p50", "median_tpot_ms"), ("TPOT p99", "p99_tpot_ms"),
    ("ITL p50", "median_itl_ms"), ("ITL p99", "p99_itl_ms"), ("E2E mean", "mean_e2el_ms"),
]


def cell(v):
    if isinstance(v, float):
        return "%.1f" % v if abs(v) < 10000 else "{:,.0f}".format(v)
    if isinstance(v, int):
        return "{:,}".format(v)
    return "-" if v is None else str(v)


def main():
    print("| " + " | ".join(c for c, _ in COLS) + " |")
    print("|" + "---|" * len(COLS))
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print("| %s | (no result: %s) |" % (path, e))
            continue
        row = [r.get("label") or path] + [cell(r.get(k)) for _, k in COLS[1:]]
        print("| " + " | ".join(row) + " |")
        for e in r.get("error_counts", []):
            print("|  | failed %d x %s |" % (e["count"], e["error"][:200]))


if __name__ == "__main__":
    main()

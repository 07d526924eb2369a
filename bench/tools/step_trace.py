#!/usr/bin/env python3
"""Reads back a serving run from the engine's per-step debug lines (`serve --log-level debug`).

    python3 bench/tools/step_trace.py SERVE_LOG [--from-id N] [--steps A:B]

Prints, per request from id N on (default: the last 32), the step and time of its first
chunk, the prefix hit (the first chunk's start), the tokens it prefilled, its chunks, and the
step and time of the chunk that sampled its first token; with --steps, the steps A..B-1 one
line each (time, ms, tokens, decodes, admitted, waiting, the prefill chunks). Steps are the
engine's numbers; times are seconds after the log's first step line (the time it is logged,
at the step's end). Used for docs/bench-log, "Turn 8 traced".
"""
import argparse
import re
from datetime import datetime

STEP = re.compile(r"^\[(\S+ \S+)\].*step (\d+): ([\d.]+) ms, (\d+) tokens, (\d+) decodes \((\d+) verify\), "
                  r"(\d+) admitted, (\d+) preempted, (\d+) waiting; prefill [^:]*:(.*)$")
CHUNK = re.compile(r"(\d+):(\d+)\+(\d+)(s\d+)?(\*)?")


def read_steps(path):
    steps = []
    for line in open(path, errors="replace"):
        m = STEP.search(line)
        if not m:
            continue
        chunks = [(int(c[1]), int(c[2]), int(c[3]), c[4] or "", bool(c[5]))
                  for c in (CHUNK.match(x) for x in m.group(10).split()) if c]
        steps.append(dict(n=int(m.group(2)), t=datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp(), ms=float(m.group(3)),
                          tokens=int(m.group(4)), decodes=int(m.group(5)), admitted=int(m.group(7)),
                          waiting=int(m.group(9)), chunks=chunks))
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--from-id", type=int)
    ap.add_argument("--steps", help="A:B, the steps to print")
    a = ap.parse_args()
    steps = read_steps(a.log)
    if not steps:
        raise SystemExit(f"no step lines in {a.log} (was the server run with --log-level debug?)")
    t0 = steps[0]["t"]
    reqs = {}
    for i, s in enumerate(steps):
        for rid, start, length, _, samples in s["chunks"]:
            r = reqs.setdefault(rid, dict(first=i, hit=start, tokens=0, chunks=0, last=None))
            r["tokens"] += length
            r["chunks"] += 1
            if samples:
                r["last"] = i
    first_id = a.from_id if a.from_id is not None else max(reqs) - 31
    print(f"{len(steps)} steps")
    print("id first_step t_first hit prefilled chunks first_token_step t_first_token")
    for rid in sorted(reqs):
        if rid < first_id:
            continue
        r = reqs[rid]
        last = r["last"]
        t_last = f"{steps[last]['t'] - t0:.3f}" if last is not None else "-"
        print(rid, steps[r["first"]]["n"], f"{steps[r['first']]['t'] - t0:.3f}", r["hit"], r["tokens"], r["chunks"],
              steps[last]["n"] if last is not None else "-", t_last)
    if a.steps:
        lo, hi = (int(x) for x in a.steps.split(":"))
        print("step t ms tokens decodes admitted waiting prefill")
        for s in steps:
            if not lo <= s["n"] < hi:
                continue
            chunks = " ".join(f"{c[0]}:{c[1]}+{c[2]}{c[3]}{'*' if c[4] else ''}" for c in s["chunks"])
            print(s["n"], f"{s['t'] - t0:.3f}", s["ms"], s["tokens"], s["decodes"], s["admitted"], s["waiting"], chunks)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Joins bench_paged_attention's CSV with attention_torch.py's and prints the comparison
table for the dated log (docs/bench-log), with the issue's targets checked at each grid point.

  python3 bench/peers/attention_report.py ours.csv torch.csv
"""
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            rows.append(line.strip().split(","))
    return rows


def main():
    ours, torch = load(sys.argv[1]), load(sys.argv[2])
    copy_bw = next((float(r[1]) for r in ours if r[0] == "copy_bw"), float("nan"))
    t, tg = {}, {}  # (backend, case, batch, ctx) -> us per call (events; graph replay)
    for r in torch:
        if r[0] == "torch" and not r[5].startswith("ERR"):
            t[(r[1], r[2], int(r[3]), int(r[4]))] = float(r[5])
            if len(r) > 6:
                tg[(r[1], r[2], int(r[3]), int(r[4]))] = float(r[6])
    o = {}  # (type, case, batch, ctx) -> (us, kv_bytes, frac, chunk, items, graph us)
    for r in ours:
        if r[0] == "ours":
            o[(r[1], r[2], int(r[3]), int(r[4]))] = (float(r[5]), int(r[6]), float(r[8]), int(r[9]), int(r[10]),
                                                     float(r[15]) if len(r) > 15 else float("nan"))
    print(f"copy bandwidth (read+write) {copy_bw:.0f} GB/s")
    hdr = (f"{'case':8} {'B':>3} {'ctx':>7} {'bf16 us':>9} {'flash us':>9} {'ratio':>6} {'cudnn us':>9} "
           f"{'bw frac':>7} {'chunk':>6} {'q8 us':>8} {'q8 x':>5} {'q4 us':>8} {'q4 x':>5} "
           f"{'graph bf16':>10} {'graph flash':>11} {'ratio':>6} {'graph q8':>8} {'graph q4':>8}")
    print(hdr)
    fails = []
    for key in sorted((k for k in o if k[0] == "bf16"), key=lambda k: (k[1] != "uniform", k[2], k[3])):
        _, case, b, ctx = key
        us, kvb, frac, chunk, _, gus = o[key]
        gfl = tg.get(("flash", case, b, ctx), float("nan"))
        gq8 = o.get(("q8_0", case, b, ctx), (float("nan"),) * 6)[5]
        gq4 = o.get(("q4_0", case, b, ctx), (float("nan"),) * 6)[5]
        fl = t.get(("flash", case, b, ctx))
        cu = t.get(("cudnn", case, b, ctx))
        ratio = fl / us if fl else float("nan")
        q8 = o.get(("q8_0", case, b, ctx), (float("nan"),))[0]
        q4 = o.get(("q4_0", case, b, ctx), (float("nan"),))[0]
        print(f"{case:8} {b:3} {ctx:7} {us:9.1f} {fl or float('nan'):9.1f} {ratio:6.2f} {cu or float('nan'):9.1f} "
              f"{frac:7.2f} {chunk:6} {q8:8.1f} {us / q8:5.2f} {q4:8.1f} {us / q4:5.2f} "
              f"{gus:10.1f} {gfl:11.1f} {gfl / gus:6.2f} {gq8:8.1f} {gq4:8.1f}")
        label = f"{case} B={b} ctx={ctx}"
        if fl and ratio < 1.0:
            fails.append(f"{label}: {ratio:.2f}x torch flash (target >= 1.0x)")
        if fl and case == "uniform" and b == 1 and ctx <= 32768 and ratio < 2.0:
            fails.append(f"{label}: {ratio:.2f}x torch flash (target >= 2x at batch 1 up to 32K)")
        if kvb > 256e6 and frac < 0.85:
            fails.append(f"{label}: {frac:.2f} of copy bandwidth (target >= 0.85 above 256 MB)")
        if ctx >= 32768 and us / q8 < 1.7:
            fails.append(f"{label}: q8_0 {us / q8:.2f}x bf16 (target >= 1.7x)")
        if ctx >= 32768 and us / q4 < 2.5:
            fails.append(f"{label}: q4_0 {us / q4:.2f}x bf16 (target >= 2.5x)")
    for r in ours:
        if r[0] == "mem":
            print(f"ragged K/V held, {r[1]}: paged {int(r[3]) / 2**20:.0f} MiB, padded contiguous "
                  f"{int(r[4]) / 2**20:.0f} MiB ({int(r[4]) / int(r[3]):.2f}x)")
    print("targets:", "all met" if not fails else f"{len(fails)} missed")
    for f in fails:
        print("  MISSED", f)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU's bf16 GEMM rate held over seconds, window by window (PyTorch on the GPU machine).

bench_cuda_model's FLOP floor divides by a GEMM rate measured in a short burst. A prefill that
keeps the tensor cores busy for longer may run at lower clocks (power or thermal limits); this
prints the rate of back-to-back M x N x K bf16 GEMMs per window, so the burst and the held rate
can be compared in one call (run nvidia-smi -lms beside it for the clocks).

  python3 bench/tools/sustained_gemm.py [--seconds 20] [--window 0.25] [--size 8192]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--window", type=float, default=0.25)
    ap.add_argument("--size", type=int, default=8192)
    args = ap.parse_args()
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    flop = 2.0 * n * n * n
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    # GEMMs per window, from one timed burst.
    t0 = time.perf_counter()
    for _ in range(10):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 10
    k = max(1, int(args.window / per))
    print(f"size {n}, {k} GEMMs a window, burst {flop / per / 1e12:.0f} TFLOP/s")
    start = time.perf_counter()
    rates = []
    while time.perf_counter() - start < args.seconds:
        t0 = time.perf_counter()
        for _ in range(k):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        rates.append(k * flop / dt / 1e12)
        print(f"t {time.time():.2f} window {len(rates)} {rates[-1]:.0f} TFLOP/s", flush=True)
    s = sorted(rates)
    print(f"summary: first {rates[0]:.0f}, median {s[len(s) // 2]:.0f}, last {rates[-1]:.0f}, min {s[0]:.0f} TFLOP/s")


if __name__ == "__main__":
    main()

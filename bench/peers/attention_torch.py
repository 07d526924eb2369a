#!/usr/bin/env python3
"""PyTorch baseline for bench_paged_attention: decode attention (one query token) with
scaled_dot_product_attention(enable_gqa=True) on contiguous bf16 K/V, flash and cuDNN backends,
at the same shapes (24 query heads, 4 KV heads, head_dim 256).

Timing matches the C++ benchmark: CUDA events around each call, median of the runs, and when
one batch's K/V is below 256 MB several copies are rotated so no call finds its K/V in L2.
The ragged case (128K + 7 x 8K) is timed as a padded contiguous batch of 8 x 128K, which is what
a contiguous cache holds for it.

The same calls are also captured in a CUDA graph with event record nodes around each call and
replayed (median per call): the device time without Python's and the launches' host cost, which
per-call events include whenever the GPU outruns the host (batch 1). The timed calls run on a
non-blocking stream (as the C++ benchmark's and the engine's); the last column times them on
the legacy default stream, PyTorch's default.

Output lines: copy_bw_torch,<GB/s> ; torch,<backend>,<case>,<batch>,<ctx>,<us>,<graph us>,<legacy-stream us>
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, D = 24, 4, 256


def median_us(fn, iters):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn(i)
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return t[len(t) // 2] * 1000.0


def graph_us(fn, n):
    """Median per-call device time of fn(0..n-1) captured in one CUDA graph with event record
    nodes around each call (no host in the loop)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            starts[i].record()
            fn(i)
            ends[i].record()
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    del g
    return t[len(t) // 2] * 1000.0


def main():
    quick = "--quick" in sys.argv
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    us = median_us(lambda i: y.copy_(x), 20)
    print(f"copy_bw_torch,{2 * x.numel() / (us * 1e-6) / 1e9:.0f}", flush=True)
    del x, y
    cases = [("uniform", b, l) for b in (1, 8, 32) for l in (4096, 32768, 131072)]
    if quick:
        cases = [c for c in cases if not ((c[1] == 32 or c[2] == 131072) and not (c[1] == 1 and c[2] == 131072))]
    cases.append(("ragged", 8, 131072))
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, b, l in cases:
        kv_bytes = 2 * b * HKV * l * D * 2
        copies = max(1, min(64, (256 << 20) // kv_bytes + 1))
        sets = []
        for _ in range(copies):
            q = torch.rand(b, HQ, 1, D, device="cuda", dtype=torch.bfloat16, generator=gen) * 4 - 2
            k = torch.rand(b, HKV, l, D, device="cuda", dtype=torch.bfloat16, generator=gen) * 4 - 2
            v = torch.rand(b, HKV, l, D, device="cuda", dtype=torch.bfloat16, generator=gen) * 4 - 2
            sets.append((q, k, v))
        for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel([backend]):
                    def run(i):
                        q, k, v = sets[i % copies]
                        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    n = max(30, 2 * copies)
                    side = torch.cuda.Stream()  # non-blocking, as the C++ benchmark's
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for i in range(max(3, copies)):
                            run(i)
                        torch.cuda.synchronize()
                        us = median_us(run, n)
                    gus = graph_us(run, n)
                    torch.cuda.synchronize()
                    for i in range(3):
                        run(i)
                    legacy = median_us(run, n)
                print(f"torch,{backend_name},{name},{b},{l},{us:.2f},{gus:.2f},{legacy:.2f}", flush=True)
            except Exception as ex:  # a backend may refuse a shape; record it and go on
                print(f"torch,{backend_name},{name},{b},{l},ERR {str(ex)[:60].replace(',', ';')}", flush=True)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

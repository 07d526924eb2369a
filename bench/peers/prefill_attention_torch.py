# Peer for prefill attention (docs/bench-log, "Fused prefill attention"): PyTorch's causal
# scaled_dot_product_attention (its FlashAttention-2 and cuDNN backends) at the 9B's
# full-attention shape (16 query heads, 4 KV heads, head_dim 256), bf16, one sequence of N
# tokens attending to itself, per layer, against the FLOP floor of the causal product
# (4 * N^2 / 2 * D * Hq FLOPs at the measured bf16 GEMM rate, printed by bench_cuda_model).
import sys, torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
Hq, Hkv, D = 16, 4, 256
lengths = [int(x) for x in sys.argv[1:]] or [4096, 32768, 131072]
def bench(fn, iters):
    fn(); torch.cuda.synchronize()
    s = [torch.cuda.Event(True) for _ in range(iters)]; e = [torch.cuda.Event(True) for _ in range(iters)]
    for i in range(iters): s[i].record(); fn(); e[i].record()
    torch.cuda.synchronize(); t = sorted(s[i].elapsed_time(e[i]) for i in range(iters)); return t[len(t) // 2]
print("backend,tokens,ms_per_layer,TFLOPs")
for n in lengths:
    q = torch.randn(1, Hq, n, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, Hkv, n, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, Hkv, n, D, device="cuda", dtype=torch.bfloat16)
    flops = 4.0 * n * n / 2 * D * Hq
    for name, be in (("torch-flash", SDPBackend.FLASH_ATTENTION), ("torch-cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel([be]):
                ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                           3 if n > 65536 else 10)
            print(f"{name},{n},{ms:.3f},{flops / ms / 1e9:.0f}")
        except Exception as ex:
            print(f"{name},{n},ERR {str(ex)[:100]}")
    del q, k, v

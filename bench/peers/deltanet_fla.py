# Peer for the chunked DeltaNet (docs/bench-log, "Chunked DeltaNet"): flash-linear-
# attention's chunk_gated_delta_rule (Triton) on one layer at the shapes bench_deltanet times:
# 16 key heads, HV value heads of 128, one sequence of T tokens (or S of T / S), bf16 inputs,
# median of triton's do_bench (as the shared scripts/gdn_anchor.py times it). Two calls:
#   fla-full:   the work bench_deltanet's kernels do: q and k with 16 heads (GVA), L2 norms, the
#               gate (-exp(A_log) softplus(a + dt_bias)) and beta = sigmoid(b) inside the
#               kernels, an initial state, the final state out;
#   fla-anchor: gdn_anchor.py's call: q, k expanded to HV heads, k pre-normalised, g given,
#               no initial state (the number measured-anchors.md records).
# fla must be importable (the bundle carries its source: the deltanet study sets PYTHONPATH).
#   python3 bench/peers/deltanet_fla.py [--tokens 4096,16384,65536] [--v-heads 32,48] [--seqs 1]
import argparse, torch, triton
import torch.nn.functional as F
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", default="4096,16384,65536")
ap.add_argument("--v-heads", default="32,48")
ap.add_argument("--seqs", type=int, default=1)
args = ap.parse_args()
Hk, D = 16, 128
def bench(fn): return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
torch.set_grad_enabled(False)
print("peer,tokens,seqs,k_heads,v_heads,ms,Mtok_per_s")
for hv in [int(x) for x in args.v_heads.split(",")]:
    for n in [int(x) for x in args.tokens.split(",")]:
        B, T = args.seqs, n // args.seqs
        dev, bf = "cuda", torch.bfloat16
        q = torch.randn(B, T, Hk, D, device=dev, dtype=bf)
        k = torch.randn(B, T, Hk, D, device=dev, dtype=bf)
        v = torch.randn(B, T, hv, D, device=dev, dtype=bf)
        a = torch.randn(B, T, hv, device=dev, dtype=torch.float32)
        b = torch.randn(B, T, hv, device=dev, dtype=bf)
        beta = torch.sigmoid(b.float()).to(bf)
        A_log = torch.log(1 + 15 * torch.arange(hv, device=dev, dtype=torch.float32) / hv)
        dt_bias = -2 + 0.05 * torch.arange(hv, device=dev, dtype=torch.float32)
        h0 = 0.05 * torch.randn(B, hv, D, D, device=dev, dtype=torch.float32)
        runs = {
            "fla-full": lambda: chunk_gated_delta_rule(q, k, v, g=a, beta=b, initial_state=h0, output_final_state=True,
                                                       use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                                       use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias),
        }
        qe = q.repeat_interleave(hv // Hk, dim=2)
        ke = F.normalize(k.float(), dim=-1).to(bf).repeat_interleave(hv // Hk, dim=2)
        g = -torch.rand(B, T, hv, device=dev, dtype=torch.float32) * 0.1
        runs["fla-anchor"] = lambda: chunk_gated_delta_rule(qe, ke, v, g=g, beta=beta, output_final_state=True)
        for name, fn in runs.items():
            try:
                ms = bench(fn)
                print(f"{name},{n},{B},{Hk},{hv},{ms:.3f},{n / ms / 1e3:.2f}", flush=True)
            except Exception as ex:
                print(f"{name},{n},{B},{Hk},{hv},ERR {str(ex)[:160]}", flush=True)
        del q, k, v, a, b, beta, h0, qe, ke, g, runs
        torch.cuda.empty_cache()

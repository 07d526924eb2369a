#!/usr/bin/env python3
"""The table of the studies long_context_9b_256k / long_context_9b_1m: long prompts through serve
against their floors.

    long_context_report.py --checkpoint DIR --ceilings bench_cuda_model.txt --serve-log serve.log \\
        [--smi smi.csv] [--json out.json] prompt_N.json...

For each bench_serve result (one request of N prompt tokens and M output tokens):
  * TTFT against the FLOP floor of the prefill: 2 x (weights used per token) x N, plus the causal
    attention of every full-attention layer, 4 x heads x head_dim x N (N + 1) / 2 (QK^T and PV),
    over the measured bf16 GEMM rate (bench_cuda_model's "bf16 GEMM ... TFLOP/s"); the weights are
    bench_cuda_model's count (every projection, the DeltaNet's included, not the embedding; lm_head
    once, for the last token). The DeltaNet recurrence and the norms are left out: a floor.
  * decode tok/s (1 / mean TPOT) at context N + M/2 against the bytes floor of one step: the weights
    as streamed (bench_cuda_model's "GB streamed per decode step"), the context's K/V (layers x 2 x
    kv_heads x head_dim x 2 bytes, bf16), the DeltaNet state read and written (f32), the logits,
    over the measured copy bandwidth.
  * the K/V pool serve sized (its start-up log) and the peak GPU memory nvidia-smi saw.
Prints a markdown table; --json writes the rows.
"""
import argparse
import json
import re
import sys


def text_config(ckpt):
    with open(f"{ckpt}/config.json") as f:
        c = json.load(f)
    return c.get("text_config", c)


def weights_per_token(t):
    """bench_cuda_model's weight_params, the embedding left out and lm_head apart."""
    H, D = t["hidden_size"], t["head_dim"]
    nq, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    layers = t["num_hidden_layers"]
    types = t.get("layer_types") or ["full_attention" if (i + 1) % t["full_attention_interval"] == 0
                                     else "linear_attention" for i in range(layers)]
    full = sum(1 for x in types if x == "full_attention")
    hk, hv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    dk, dv = t["linear_key_head_dim"], t["linear_value_head_dim"]
    attn = 2.0 * nq * D * H + 2.0 * nkv * D * H + nq * D * H
    conv_dim = 2 * hk * dk + hv * dv
    deltanet = conv_dim * H + hv * dv * H + 2.0 * hv * H + H * hv * dv
    mlp = 3.0 * t["intermediate_size"] * H
    body = full * attn + (layers - full) * deltanet + layers * mlp
    return body, t["vocab_size"] * H, full, layers - full


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--ceilings", required=True)
    ap.add_argument("--serve-log", required=True)
    ap.add_argument("--smi")
    ap.add_argument("--json")
    ap.add_argument("results", nargs="*")
    a = ap.parse_args()

    t = text_config(a.checkpoint)
    ceil = open(a.ceilings).read()
    m = re.search(r"copy (\d+) GB/s.*bf16 GEMM (\d+) TFLOP/s", ceil)
    if not m:
        sys.exit("no ceilings in " + a.ceilings)
    copy_bps, flops = float(m.group(1)) * 1e9, float(m.group(2)) * 1e12
    m = re.search(r"([\d.]+) GB streamed per decode step", ceil)
    weight_bytes = float(m.group(1)) * 1e9 if m else None

    body, lm_head, full, deltanet = weights_per_token(t)
    nq, D, nkv = t["num_attention_heads"], t["head_dim"], t["num_key_value_heads"]
    kv_token = full * 2 * nkv * D * 2  # bf16 K and V
    state = deltanet * t["linear_num_value_heads"] * t["linear_key_head_dim"] * t["linear_value_head_dim"] * 4
    log = open(a.serve_log).read()
    kv_line = next((l for l in log.splitlines() if "K/V cache:" in l), "")
    kv_mib = re.search(r"([\d.]+) MiB", kv_line)
    peak = None
    if a.smi:
        used = [int(x) for x in re.findall(r", (\d+) MiB,", open(a.smi).read())]
        peak = max(used) if used else None

    rows = []
    for path in a.results:
        r = json.load(open(path))
        n = int(r.get("total_input_tokens") or r["input_lens"][0])
        out = int(r.get("total_output_tokens") or r["output_lens"][0])
        ttft = r["mean_ttft_ms"] / 1e3
        tpot = r["mean_tpot_ms"] / 1e3
        attn = 4.0 * nq * D * n * (n + 1) / 2 * full
        prefill_floor = (2.0 * body * n + 2.0 * lm_head + attn) / flops
        ctx = n + out / 2
        step_bytes = (weight_bytes or 2.0 * (body + lm_head)) + ctx * kv_token + 2 * state + t["vocab_size"] * 4
        decode_floor = step_bytes / copy_bps
        rows.append({
            "prompt_tokens": n, "output_tokens": out,
            "ttft_s": ttft, "ttft_floor_s": prefill_floor, "ttft_of_floor": prefill_floor / ttft,
            "attention_share_of_floor": attn / flops / prefill_floor,
            "prefill_tokens_per_s": n / ttft,
            "decode_tokens_per_s": 1 / tpot if tpot > 0 else None,
            "decode_floor_tokens_per_s": 1 / decode_floor,
            "decode_of_floor": decode_floor / tpot if tpot > 0 else None,
            "decode_step_floor_gb": step_bytes / 1e9,
        })
    print(f"\nceilings: copy {copy_bps / 1e9:.0f} GB/s, bf16 {flops / 1e12:.0f} TFLOP/s; K/V {kv_token} B/token "
          f"(bf16); weights streamed per step {weight_bytes / 1e9 if weight_bytes else float('nan'):.2f} GB; "
          f"K/V pool {kv_mib.group(1) + ' MiB' if kv_mib else '?'}; peak GPU memory {peak} MiB")
    print("\n| prompt | TTFT | FLOP floor (attention share) | of floor | prefill tok/s | decode tok/s | bytes floor tok/s"
          " | of floor |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows:
        dec = f"{x['decode_tokens_per_s']:.1f}" if x["decode_tokens_per_s"] else "-"
        decf = f"{100 * x['decode_of_floor']:.0f}%" if x["decode_of_floor"] else "-"
        print(f"| {x['prompt_tokens']:,} | {x['ttft_s']:.1f} s | {x['ttft_floor_s']:.1f} s "
              f"({100 * x['attention_share_of_floor']:.0f}%) | {100 * x['ttft_of_floor']:.0f}% | "
              f"{x['prefill_tokens_per_s']:,.0f} | {dec} | {x['decode_floor_tokens_per_s']:.1f} | {decf} |")
    if a.json:
        json.dump({"rows": rows, "copy_bytes_per_s": copy_bps, "bf16_flops": flops, "kv_bytes_per_token": kv_token,
                   "kv_pool_mib": float(kv_mib.group(1)) if kv_mib else None, "peak_gpu_mib": peak,
                   "serve_kv_line": kv_line.strip()}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes random PEFT LoRA adapters for a Qwen3.5 checkpoint's geometry (benchmarks only).

    python3 bench/tools/make_random_lora.py --checkpoint CKPT --out DIR --count 32 --rank 16

DIR/lora0 ... DIR/lora{N-1}, each as PEFT saves an adapter of Qwen3_5ForConditionalGeneration:
adapter_config.json (r, lora_alpha = 2 r, target_modules) and adapter_model.safetensors with
base_model.model.model.language_model.layers.N.<module>.lora_A.weight [r, in] and lora_B.weight
[out, r] in bf16 on every target the layer has: self_attn.q/k/v/o_proj on full-attention
layers, linear_attn.in_proj_qkv/z/b/a and out_proj on DeltaNet layers, mlp.gate/up/down_proj
everywhere (--split-qkv: linear_attn.in_proj_q/k/v in place of in_proj_qkv). The values are
random (A N(0, 1/in), B N(0, 0.01^2)), which means nothing but costs what a real adapter costs.
Writes the safetensors itself; draws with numpy, or (slowly, for small models such as the bundled
tests/data/tiny-qwen35) with Python's random when numpy is missing. Prints one line per adapter.
"""
import argparse
import json
import os
import struct
import time

try:
    import numpy as np
except ImportError:  # small models only: pure Python below
    np = None
import array
import math
import random


def geometry(cfg, split_qkv):
    t = cfg.get("text_config", cfg)
    H, I = t["hidden_size"], t["intermediate_size"]
    nq, nkv, d = t["num_attention_heads"], t["num_key_value_heads"], t.get("head_dim", H // t["num_attention_heads"])
    hk, hv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    dk, dv = t["linear_key_head_dim"], t["linear_value_head_dim"]
    kinds = t.get("layer_types") or [
        "full_attention" if (i + 1) % t.get("full_attention_interval", 4) == 0 else "linear_attention"
        for i in range(t["num_hidden_layers"])]
    full = [("self_attn.q_proj", H, 2 * nq * d), ("self_attn.k_proj", H, nkv * d), ("self_attn.v_proj", H, nkv * d),
            ("self_attn.o_proj", nq * d, H)]
    qkv = ([("linear_attn.in_proj_q", H, hk * dk), ("linear_attn.in_proj_k", H, hk * dk),
            ("linear_attn.in_proj_v", H, hv * dv)] if split_qkv
           else [("linear_attn.in_proj_qkv", H, 2 * hk * dk + hv * dv)])
    delta = qkv + [("linear_attn.in_proj_z", H, hv * dv), ("linear_attn.in_proj_b", H, hv),
                   ("linear_attn.in_proj_a", H, hv), ("linear_attn.out_proj", hv * dv, H)]
    mlp = [("mlp.gate_proj", H, I), ("mlp.up_proj", H, I), ("mlp.down_proj", I, H)]
    return [(i, (full if k == "full_attention" else delta) + mlp) for i, k in enumerate(kinds)]


def bf16(a):
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


class PyMatrix:
    """bf16 bits of a normal draw, as numpy's path gives them (tobytes, nbytes)."""

    def __init__(self, rng, n, std):
        bits = array.array("H")
        for _ in range(n):
            f = array.array("f", [rng.gauss(0.0, std)]).tobytes()
            u = int.from_bytes(f, "little")
            bits.append(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
        if bits.itemsize != 2:
            raise SystemExit("make_random_lora: no 16-bit array type")
        self.data = bits.tobytes()  # little-endian hosts only, as safetensors is
        self.nbytes = len(self.data)

    def tobytes(self):
        return self.data


def draw(rng, shape, std):
    if np is not None:
        return bf16(rng.standard_normal(shape, np.float32) * std)
    return PyMatrix(rng, shape[0] * shape[1], std)


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, (_, data) in tensors.items():
            f.write(data.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory (its config.json)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split-qkv", action="store_true")
    args = ap.parse_args()
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    layers = geometry(cfg, args.split_qkv)
    targets = sorted({m.split(".")[-1] for _, mods in layers for m, _, _ in mods})
    r = args.rank
    for n in range(args.count):
        t0 = time.time()
        rng = np.random.default_rng(args.seed + n) if np is not None else random.Random(args.seed + n)
        out = os.path.join(args.out, f"lora{n}")
        os.makedirs(out, exist_ok=True)
        tensors = {}
        for i, mods in layers:
            for m, fan_in, fan_out in mods:
                p = f"base_model.model.model.language_model.layers.{i}.{m}"
                tensors[p + ".lora_A.weight"] = ((r, fan_in), draw(rng, (r, fan_in), 1.0 / math.sqrt(fan_in)))
                tensors[p + ".lora_B.weight"] = ((fan_out, r), draw(rng, (fan_out, r), 0.01))
        write_safetensors(os.path.join(out, "adapter_model.safetensors"), tensors)
        with open(os.path.join(out, "adapter_config.json"), "w") as f:
            json.dump({"peft_type": "LORA", "r": r, "lora_alpha": 2 * r, "use_rslora": False, "bias": "none",
                       "lora_dropout": 0.0, "task_type": "CAUSAL_LM", "target_modules": targets,
                       "base_model_name_or_path": args.checkpoint}, f, indent=2)
        size = os.path.getsize(os.path.join(out, "adapter_model.safetensors"))
        print(f"make_random_lora: {out}: rank {r}, {len(tensors)} tensors, {size / 2**20:.1f} MiB in {time.time() - t0:.1f} s",
              flush=True)


if __name__ == "__main__":
    main()

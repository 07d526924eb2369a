#!/usr/bin/env python3
"""Writes a random-weight Qwen3.5 checkpoint with a released model's real geometry.

    python3 bench/tools/make_random_checkpoint.py --size 9b --out CHECKPOINT_DIR

The layout is the released one (Qwen3_5ForConditionalGeneration: config.json with
text_config, model.language_model.* tensors in bf16 safetensors shards with an index, A_log
and the gated-norm weight in f32 as Qwen3.5 stores them, generation_config.json); the values
are random (matrices N(0, 0.02), zero-centred norms small, A_log = log U(1, 16), dt_bias
near 1), so it exercises every kernel at full size but means nothing. The released
checkpoints' multi-token-prediction module is there too (mtp_num_hidden_layers 1; mtp.fc over
[embedding; hidden], one full-attention layer mtp.layers.0.*, the norms), drawn after every
other tensor, so a seed gives the same main weights as before it was added. For benchmarks only:
never commit its output. Needs torch and safetensors (the GPU machine has both); tensors
are drawn on the GPU when one is present.

--fp8 writes the layout of Qwen's -FP8 releases instead: the linear weights they quantise
(q/k/v/o_proj, gate/up/down_proj, the DeltaNet's in_proj_qkv, in_proj_z, out_proj) as
float8_e4m3fn with a `weight_scale_inv` of one f32 scale per 128x128 block (partial blocks
at the edges), and quantization_config in config.json. The quantisation is serve's
--quantization fp8 (model/qwen35/fp8.h: scale amax/448, f32 division, round to nearest
even, saturating), so with the same --seed the FP8 checkpoint loads to the same weights as
the bf16 one under --quantization fp8. Needs torch >= 2.1 (float8_e4m3fn) and fp8_layout.py
beside this script.

--gptq / --awq write a 4-bit checkpoint instead (int4_layout.py beside this script, which says
the layouts): the same linear weights as --fp8 (not the MTP module, which the published GPTQ
builds keep in bf16), rounded to nearest in groups of --group-size inputs (128) with f16
scales; GPTQ symmetric with v1's qzeros and g_idx = k / group_size (no act order), AWQ with
zero points in its interleaved order; quantization_config in config.json. The other tensors
are the bf16 draw's, so a seed gives the bf16 checkpoint's other weights.

--vision adds the released vision tower (model.visual.*, bf16 also with --fp8, --gptq or
--awq, as the quantised releases keep it; drawn after every other tensor, so the language
model's weights stay those of the same seed without it), its vision_config and image token
ids in config.json, and preprocessor_config.json; give the checkpoint the vision-language
chat template (make_checkpoint_tokenizer.py --template-dir tests/data/tiny-qwen35-vl).
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

# What Qwen's FP8 releases quantise, and their quantization_config (fp8_layout.py beside this
# script: one definition for it and make_fp8_fixture.py).
from fp8_layout import E4M3_MAX, FP8_BLOCK, FP8_QUANTIZATION_CONFIG, is_fp8_target
from int4_layout import AWQ_ORDER, awq_config, gptq_config, is_int4_target

SIZES = {
    # model spec 1.2: H, I, layers, Nq, Nkv, Hk, Hv, tie
    "9b": dict(hidden=4096, inter=12288, layers=32, nq=16, nkv=4, hk=16, hv=32, tie=False),
    "27b": dict(hidden=5120, inter=17408, layers=64, nq=24, nkv=4, hk=16, hv=48, tie=False),
    "4b": dict(hidden=2560, inter=9216, layers=32, nq=16, nkv=4, hk=16, hv=32, tie=True),
}
VOCAB, HEAD_DIM, DK, KC = 248320, 256, 128, 4
# The vision towers (docs/vision.md): 9B and 27B share one geometry but for the merger's output.
VISION = {
    "9b": dict(depth=27, hidden=1152, heads=16, inter=4304),
    "27b": dict(depth=27, hidden=1152, heads=16, inter=4304),
    "4b": dict(depth=24, hidden=1024, heads=16, inter=4096),
}
# Qwen3.5's ids of the vision tokens (the added tokens from 248,044 on, in Qwen3's order).
VISION_TOKENS = dict(vision_start_token_id=248053, vision_end_token_id=248054, image_token_id=248056,
                     video_token_id=248057)
PREPROCESSOR = {
    "size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast",
}
# The video processor's file as Qwen3-VL publishes it (Qwen3.5 takes video the same way): the
# pixel budget counts every frame (4096 .. 768 x 32 x 32 x 32 pixels); fps 2, 4 .. 768 frames
# are the class defaults.
VIDEO_PREPROCESSOR = {
    "size": {"shortest_edge": 4096, "longest_edge": 25165824}, "patch_size": 16, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "video_processor_type": "Qwen3VLVideoProcessor",
}


def vision_config(size, g):
    v = VISION[size]
    return {"model_type": "qwen3_5_vision", "depth": v["depth"], "hidden_size": v["hidden"],
            "num_heads": v["heads"], "intermediate_size": v["inter"], "out_hidden_size": g["hidden"],
            "hidden_act": "gelu_pytorch_tanh", "in_channels": 3, "patch_size": 16, "temporal_patch_size": 2,
            "spatial_merge_size": 2, "num_position_embeddings": 2304, "initializer_range": 0.02}


def vision_tensors(size, g, dev, gen):
    v = VISION[size]
    C, I, M = v["hidden"], v["inter"], 4 * v["hidden"]

    def mat(*shape, std=0.02):
        return (torch.randn(*shape, device=dev, generator=gen, dtype=torch.float32) * std).to(torch.bfloat16)

    def layer_norm(q, n):
        yield q + ".weight", (1.0 + mat(n, std=0.1).float()).to(torch.bfloat16)
        yield q + ".bias", mat(n)

    p = "model.visual."
    yield p + "patch_embed.proj.weight", mat(C, 3, 2, 16, 16)
    yield p + "patch_embed.proj.bias", mat(C)
    yield p + "pos_embed.weight", mat(2304, C)
    for i in range(v["depth"]):
        q = f"{p}blocks.{i}."
        yield from layer_norm(q + "norm1", C)
        yield from layer_norm(q + "norm2", C)
        yield q + "attn.qkv.weight", mat(3 * C, C)
        yield q + "attn.qkv.bias", mat(3 * C)
        yield q + "attn.proj.weight", mat(C, C)
        yield q + "attn.proj.bias", mat(C)
        yield q + "mlp.linear_fc1.weight", mat(I, C)
        yield q + "mlp.linear_fc1.bias", mat(I)
        yield q + "mlp.linear_fc2.weight", mat(C, I)
        yield q + "mlp.linear_fc2.bias", mat(C)
    yield from layer_norm(p + "merger.norm", C)
    yield p + "merger.linear_fc1.weight", mat(M, M)
    yield p + "merger.linear_fc1.bias", mat(M)
    yield p + "merger.linear_fc2.weight", mat(g["hidden"], M)
    yield p + "merger.linear_fc2.bias", mat(g["hidden"])


def config(g):
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(g["layers"])]
    text = {
        "model_type": "qwen3_5_text", "vocab_size": VOCAB, "hidden_size": g["hidden"],
        "intermediate_size": g["inter"], "num_hidden_layers": g["layers"], "num_attention_heads": g["nq"],
        "num_key_value_heads": g["nkv"], "head_dim": HEAD_DIM, "hidden_act": "silu", "rms_norm_eps": 1e-6,
        "layer_types": layer_types, "full_attention_interval": 4, "linear_conv_kernel_dim": KC,
        "linear_key_head_dim": DK, "linear_value_head_dim": DK, "linear_num_key_heads": g["hk"],
        "linear_num_value_heads": g["hv"], "max_position_embeddings": 262144, "attention_bias": False,
        "attention_dropout": 0.0, "tie_word_embeddings": g["tie"], "partial_rotary_factor": 0.25,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "eos_token_id": 248044, "dtype": "bfloat16", "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
    }
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "tie_word_embeddings": g["tie"], "text_config": text}


def fp8_blocks(w):
    """(codes as float8_e4m3fn [rows, cols], scale_inv f32 [ceil(rows/128), ceil(cols/128)])."""
    rows, cols = w.shape
    br, bc = -(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)
    x = torch.zeros(br * FP8_BLOCK, bc * FP8_BLOCK, dtype=torch.float32, device=w.device)
    x[:rows, :cols] = w.float()
    blocks = x.view(br, FP8_BLOCK, bc, FP8_BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.view(br * FP8_BLOCK, bc * FP8_BLOCK)[:rows, :cols].contiguous(), scale.contiguous()


def _pack_words(nibbles):
    """int32 words of [..., 8] nibbles (nibble i at bits 4i), as torch stores I32."""
    shifts = torch.arange(0, 32, 4, device=nibbles.device, dtype=torch.int64)
    words = (nibbles.to(torch.int64) << shifts).sum(dim=-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def int4_groups(w, group_size, method):
    """{suffix: tensor} of a 4-bit [N, K] weight (int4_layout.py's rules, with torch): GPTQ
    symmetric (scale 2 amax / 15, zero 8) or AWQ asymmetric (scale (max - min) / 15, zero
    -round(min / scale)), f16 scales, codes round(w / scale) + zero in 0..15."""
    N, K = w.shape
    G = group_size
    x = w.float().view(N, K // G, G)
    if method == "gptq":
        amax = x.abs().amax(dim=2)
        scale = torch.where(amax > 0, 2 * amax / 15, torch.ones_like(amax)).half()
        zero = torch.full_like(amax, 8.0)
    else:
        lo, hi = x.amin(dim=2), x.amax(dim=2)
        scale = ((hi - lo).clamp(min=1e-5) / 15).half()
        zero = (-torch.round(lo / scale.float())).clamp(0, 15)
    codes = (torch.round(x / scale.float()[..., None]) + zero[..., None]).clamp(0, 15).to(torch.int32).view(N, K)
    zero = zero.to(torch.int32)  # [N, K/G]
    if method == "gptq":
        return {"qweight": _pack_words(codes.t().reshape(K // 8, 8, N).transpose(1, 2)),  # [K/8, N]
                "qzeros": _pack_words((zero - 1).t().reshape(K // G, N // 8, 8)),  # v1: zero - 1
                "scales": scale.t().contiguous(),
                "g_idx": torch.arange(K, device=w.device, dtype=torch.int32) // G}
    order = torch.tensor(AWQ_ORDER, device=w.device)
    return {"qweight": _pack_words(codes.t().reshape(K, N // 8, 8)[..., order]),  # [K, N/8]
            "qzeros": _pack_words(zero.t().reshape(K // G, N // 8, 8)[..., order]),
            "scales": scale.t().contiguous()}


def tensors(g, dev, gen):
    H, I = g["hidden"], g["inter"]
    key_dim, value_dim = g["hk"] * DK, g["hv"] * DK
    conv_dim = 2 * key_dim + value_dim

    def mat(*shape, std=0.02):
        return (torch.randn(*shape, device=dev, generator=gen, dtype=torch.float32) * std).to(torch.bfloat16)

    def norm(n, scale=0.1):
        return mat(n, std=scale)

    def attention(q):
        yield q + "self_attn.q_proj.weight", mat(2 * g["nq"] * HEAD_DIM, H)
        yield q + "self_attn.k_proj.weight", mat(g["nkv"] * HEAD_DIM, H)
        yield q + "self_attn.v_proj.weight", mat(g["nkv"] * HEAD_DIM, H)
        yield q + "self_attn.o_proj.weight", mat(H, g["nq"] * HEAD_DIM)
        yield q + "self_attn.q_norm.weight", norm(HEAD_DIM)
        yield q + "self_attn.k_norm.weight", norm(HEAD_DIM)

    def norms_and_mlp(q):
        yield q + "input_layernorm.weight", norm(H)
        yield q + "post_attention_layernorm.weight", norm(H)
        yield q + "mlp.gate_proj.weight", mat(I, H)
        yield q + "mlp.up_proj.weight", mat(I, H)
        yield q + "mlp.down_proj.weight", mat(H, I)

    p = "model.language_model."
    yield p + "embed_tokens.weight", mat(VOCAB, H)
    for i in range(g["layers"]):
        q = f"{p}layers.{i}."
        yield from norms_and_mlp(q)
        if (i + 1) % 4 == 0:
            yield from attention(q)
        else:
            a = q + "linear_attn."
            yield a + "in_proj_qkv.weight", mat(conv_dim, H)
            yield a + "in_proj_z.weight", mat(value_dim, H)
            yield a + "in_proj_a.weight", mat(g["hv"], H)
            yield a + "in_proj_b.weight", mat(g["hv"], H)
            yield a + "conv1d.weight", mat(conv_dim, 1, KC, std=0.3)
            yield a + "dt_bias", (1.0 + 0.1 * torch.randn(g["hv"], device=dev, generator=gen)).to(torch.bfloat16)
            yield a + "A_log", torch.log(1.0 + 15.0 * torch.rand(g["hv"], device=dev, generator=gen)).float()
            yield a + "norm.weight", (1.0 + 0.1 * torch.randn(DK, device=dev, generator=gen)).float()
            yield a + "out_proj.weight", mat(H, value_dim)
    yield p + "norm.weight", norm(H)
    if not g["tie"]:
        yield "lm_head.weight", mat(VOCAB, H)
    # The MTP module (model/qwen35/mtp.h); it shares embed_tokens and lm_head.
    yield "mtp.pre_fc_norm_embedding.weight", norm(H)
    yield "mtp.pre_fc_norm_hidden.weight", norm(H)
    yield "mtp.fc.weight", mat(H, 2 * H)
    yield from norms_and_mlp("mtp.layers.0.")
    yield from attention("mtp.layers.0.")
    yield "mtp.norm.weight", norm(H)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="9b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shard-gb", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    layout = ap.add_mutually_exclusive_group()
    layout.add_argument("--fp8", action="store_true", help="the layout of Qwen's -FP8 releases (block-wise e4m3)")
    layout.add_argument("--gptq", action="store_true", help="4-bit GPTQ (Qwen's -GPTQ-Int4 layout: sym, v1)")
    layout.add_argument("--awq", action="store_true", help="4-bit AWQ (AutoAWQ's gemm layout)")
    ap.add_argument("--group-size", type=int, default=128, help="inputs per scale of --gptq / --awq")
    ap.add_argument("--vision", action="store_true", help="with the released vision tower (model.visual.*)")
    args = ap.parse_args()
    int4 = "gptq" if args.gptq else "awq" if args.awq else None
    g = SIZES[args.size]
    os.makedirs(args.out, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    shard, shard_bytes, index, n_shards, total = {}, 0, {}, 0, 0
    names = []

    def flush():
        nonlocal shard, shard_bytes, n_shards
        if not shard:
            return
        n_shards += 1
        name = f"model-{n_shards:05d}.safetensors"
        save_file(shard, os.path.join(args.out, name), metadata={"format": "pt"})
        for k in shard:
            index[k] = name
        shard, shard_bytes = {}, 0

    def stored(name, t):
        if args.fp8 and is_fp8_target(name):
            codes, scale = fp8_blocks(t)
            yield name, codes
            yield name + "_scale_inv", scale
        elif int4 and is_int4_target(name):
            for suffix, q in int4_groups(t, args.group_size, int4).items():
                yield name[: -len(".weight")] + "." + suffix, q
        else:
            yield name, t

    def everything():
        yield from tensors(g, dev, gen)
        if args.vision:
            yield from vision_tensors(args.size, g, dev, gen)

    for drawn_name, drawn in everything():
        for name, t in stored(drawn_name, drawn):
            t = t.cpu().contiguous()
            nbytes = t.numel() * t.element_size()
            if shard and shard_bytes + nbytes > args.shard_gb * 1e9:
                flush()
            shard[name] = t
            shard_bytes += nbytes
            total += nbytes
            names.append(name)
    flush()
    # Shard names carry the final count, as released checkpoints do.
    final = {}
    for i in range(1, n_shards + 1):
        src = os.path.join(args.out, f"model-{i:05d}.safetensors")
        dst = os.path.join(args.out, f"model-{i:05d}-of-{n_shards:05d}.safetensors")
        os.replace(src, dst)
        final[f"model-{i:05d}.safetensors"] = os.path.basename(dst)
    weight_map = {k: final[v] for k, v in index.items()}
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        cfg = config(g)
        if args.fp8:
            cfg["quantization_config"] = FP8_QUANTIZATION_CONFIG
        elif int4:
            cfg["quantization_config"] = (gptq_config if int4 == "gptq" else awq_config)(args.group_size)
        if args.vision:
            cfg["vision_config"] = vision_config(args.size, g)
            cfg.update(VISION_TOKENS)
        json.dump(cfg, f, indent=1)
    if args.vision:
        with open(os.path.join(args.out, "preprocessor_config.json"), "w") as f:
            json.dump(PREPROCESSOR, f, indent=1)
        with open(os.path.join(args.out, "video_preprocessor_config.json"), "w") as f:
            json.dump(VIDEO_PREPROCESSOR, f, indent=1)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [248046, 248044], "pad_token_id": 248044}, f, indent=1)
    print(f"wrote {len(names)} tensors, {total / 1e9:.1f} GB in {n_shards} shards to {args.out}")


if __name__ == "__main__":
    main()

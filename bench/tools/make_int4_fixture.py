#!/usr/bin/env python3
"""Writes a tiny 4-bit fixture (tests/data/tiny-qwen35-gptq or -awq) from the bf16 one, with its HF reference.

    python3 bench/tools/make_int4_fixture.py --method gptq --out OUT_DIR/tiny-qwen35-gptq \\
        --make-reference SHARED/scripts/make_reference.py

1. The checkpoint (plain Python, no torch): the bf16 fixture's weights (not narrowed: its
   inputs, 128 to 2048, are whole groups), with the linear weights Qwen's quantised releases
   quantise (q/k/v/o_proj, gate/up/down_proj, the DeltaNet's in_proj_qkv, in_proj_z and
   out_proj) written in the 4-bit layout of the method (int4_layout.py): GPTQ with group size
   32 and act order (g_idx a seeded random assignment of 32 inputs per group, one per input:
   the weights that read the same input share it, as GPTQ's order by that input's Hessian gives
   them, so q/k/v, gate/up and in_proj_qkv/z stack 4-bit),
   symmetric, v1's qzeros; AWQ with group size 64, zero points. Everything else (embedding,
   lm_head, norms, conv1d, A_log, dt_bias, in_proj_a/b, model.visual.*) stays bf16, and
   config.json gets the method's quantization_config. Tokenizer, chat template and generation
   config are copied. A twin checkpoint holds the dequantised weights (scale * (code - zero),
   exact in f32: what the CPU backend loads) in F32 beside the same other tensors, without
   quantization_config.
2. The reference (torch + transformers, the GPU machine's image): HF transformers loads the twin
   in float64 with eager attention, and make_reference.py's references() records the bf16
   fixture's prompts' prefill logits, greedy continuations and their logits, and prompt 2's
   hidden states, in the bf16 fixture's format. Cross-checks on the way, reported as WARNING
   lines and in reference.json rather than fatal: the written tensors unpacked by torch bit
   operations written here from the layouts' definitions (GPTQ: zero = stored + 1, the group of
   input k from g_idx; AWQ: the interleaved order) equal the twin bit for bit; the weights HF
   loaded are the twin's.

--checkpoint-only stops after step 1 (for a machine without torch). Deterministic: the same
inputs give the same bytes (the reference up to float64 summation order).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import zlib

import make_fp8_fixture as fx
from reference_module import Checks, load_make_reference
from int4_layout import act_order, awq_config, gptq_config, is_int4_target, pack, quantize
from fp8_layout import bf16_to_f32


# The weights that read one input (act order's g_idx comes from that input's statistics).
SHARED_INPUT = {"k_proj": "q_proj", "v_proj": "q_proj", "up_proj": "gate_proj", "in_proj_z": "in_proj_qkv"}


def input_of(name):
    """The name that stands for the input weight `name` reads (its first reader's)."""
    parts = name.split(".")
    parts[-2] = SHARED_INPUT.get(parts[-2], parts[-2])
    return ".".join(parts)


SETTINGS = {"gptq": {"group_size": 32, "desc_act": True}, "awq": {"group_size": 64, "desc_act": False}}
TEXT = "model.language_model."


def fail(msg):
    sys.exit(f"make_int4_fixture: error: {msg}")


def make_checkpoint(src, out, twin, method):
    """Step 1. Returns what the checks of step 2 need and prints a summary."""
    st = SETTINGS[method]
    G = st["group_size"]
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors, meta = fx.read_safetensors(os.path.join(src, "model.safetensors"))
    fixture, dequant = {}, {}
    stats = {"quantised": 0, "groups": 0, "weights": 0, "max_rel_l2": 0.0, "max_rel_l2_tensor": ""}
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        if not is_int4_target(name):
            fixture[name] = (dtype, shape, raw)
            continue
        if dtype != "BF16" or len(shape) != 2:
            fail(f"{name}: a 4-bit target must be a 2-D BF16 weight, got {dtype} {shape}")
        rows, cols = shape
        if cols % G or rows % 8:
            fail(f"{name}: {shape} is not a whole number of groups of {G} inputs and of 8 outputs")
        values = bf16_to_f32(raw)
        g_idx = act_order(cols, G, zlib.crc32(input_of(name).encode())) if st["desc_act"] else None
        codes, scales, zeros, deq = quantize(values, rows, cols, method, G, g_idx)
        fixture.update(pack(name[: -len(".weight")], codes, scales, zeros, rows, cols, method, G, g_idx))
        dequant[name] = ("F32", shape, deq.tobytes())
        stats["quantised"] += 1
        stats["groups"] += rows * cols // G
        stats["weights"] += rows * cols
        num = sum((d - w) ** 2 for d, w in zip(deq, values))
        den = sum(w * w for w in values)
        rel = (num / den) ** 0.5 if den > 0 else 0.0
        if rel > stats["max_rel_l2"]:
            stats["max_rel_l2"], stats["max_rel_l2_tensor"] = rel, name

    twin_cfg = json.loads(json.dumps(cfg))
    cfg["quantization_config"] = gptq_config(G, st["desc_act"]) if method == "gptq" else awq_config(G)
    twin_tensors = {k: v for k, v in fixture.items() if not k.endswith((".qweight", ".qzeros", ".scales", ".g_idx"))}
    twin_tensors.update(dequant)
    for d, c, t in ((out, cfg, fixture), (twin, twin_cfg, twin_tensors)):
        os.makedirs(d, exist_ok=True)
        fx.write_safetensors(os.path.join(d, "model.safetensors"), t, meta)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
            f.write("\n")
    for name in fx.COPIED:
        p = os.path.join(src, name)
        if os.path.exists(p):
            shutil.copyfile(p, os.path.join(out, name))
    print(f"quantised {stats['quantised']} weights to 4-bit {method} ({stats['weights']} codes in {stats['groups']} "
          f"groups of {G}{', act order' if st['desc_act'] else ''})")
    print(f"  dequantised vs bf16: max relative L2 per weight {stats['max_rel_l2']:.4f} ({stats['max_rel_l2_tensor']})")
    print(f"  unquantised tensors kept: {len(twin_tensors) - len(dequant)}")
    return {"text_config": cfg["text_config"], "stats": stats, "dequant": dequant, "settings": st,
            "quantization_config": cfg["quantization_config"]}


def unpack_with_torch(written, name, method):
    """The dequantised [N, K] f32 weight of module name[:-7] from the written tensors, by torch
    bit operations (the layouts as vLLM's gptq / awq_triton read them)."""
    import torch
    m = name[: -len(".weight")]
    qweight, qzeros, scales = written[m + ".qweight"], written[m + ".qzeros"], written[m + ".scales"].float()
    groups, N = scales.shape
    if method == "gptq":
        shifts = torch.arange(0, 32, 4, dtype=torch.int32)
        codes = ((qweight.unsqueeze(1) >> shifts.view(1, 8, 1)) & 15).reshape(-1, N)  # [K, N]
        zeros = ((qzeros.unsqueeze(2) >> shifts.view(1, 1, 8)) & 15).reshape(groups, N) + 1
        g = written[m + ".g_idx"].long()
        return (scales[g] * (codes - zeros[g]).float()).t().contiguous()
    shifts = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7], dtype=torch.int32) * 4
    codes = ((qweight.unsqueeze(2) >> shifts.view(1, 1, 8)) & 15).reshape(qweight.shape[0], N)  # [K, N]
    zeros = ((qzeros.unsqueeze(2) >> shifts.view(1, 1, 8)) & 15).reshape(groups, N)
    g = torch.arange(codes.shape[0]) // (codes.shape[0] // groups)
    return (scales[g] * (codes - zeros[g]).float()).t().contiguous()


# The bf16 fixture's prompts kept (1, 5, 17, 63 and 65 tokens: one token, the hidden-states
# prompt at index 2, both sides of a 64-token chunk). The 200- and 511-token ones are left out:
# their logits were 3 of each reference's 4.7 MB, and the working tree travels to the GPU
# machine under a 64 MB limit with the bundle.
KEPT_PROMPTS = (0, 1, 2, 3, 5)


def make_reference(src, out, twin, made, make_reference_py, method):
    """Step 2."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    mr = load_make_reference(make_reference_py)
    check = Checks()
    problems = check.problems

    twin_w = load_file(os.path.join(twin, "model.safetensors"))

    def torch_unpacks_to_twin():
        written = load_file(os.path.join(out, "model.safetensors"))
        return [f"{name}: torch's unpacking differs from the twin" for name in made["dequant"]
                if not torch.equal(unpack_with_torch(written, name, method), twin_w[name])]

    check(f"the written {method} tensors unpacked by torch equal the twin", torch_unpacks_to_twin)

    ref_src = load_file(os.path.join(src, "reference.safetensors"))
    prompts = [ref_src[f"p{i}.prompt"].tolist() for i in KEPT_PROMPTS]
    steps = ref_src["p0.greedy_tokens"].numel()
    V = made["text_config"]["vocab_size"]
    model = transformers.Qwen3_5ForConditionalGeneration.from_pretrained(
        twin, dtype=torch.float64, attn_implementation="eager").eval()

    def hf_holds_the_twin():
        sd = model.state_dict()
        return ([f"{k}: not a parameter of HF's model" for k in twin_w if k not in sd] +
                [f"{k}: other values" for k, t in twin_w.items() if k in sd and not torch.equal(sd[k].double(), t.double())])

    check(f"HF holds the twin's {len(twin_w)} tensors", hf_holds_the_twin)
    print(f"reference: {len(prompts)} prompts of {[len(p) for p in prompts]} tokens, {steps} greedy steps each", flush=True)

    name = f"tiny-qwen35-{method}"
    tensors, manifest = mr.references(model, V, prompts, steps, name)
    st = made["stats"]
    manifest.update({
        "model": name, "layout": "multimodal", "transformers": transformers.__version__, "torch": torch.__version__,
        "dtype_of_reference": f"computed in float64 on CPU from the dequantised {method} weights (scale * (code - zero), "
                              "exact in f32) and the bf16 others, stored as float32",
        "attn_implementation": "eager", "text_config": made["text_config"],
        "int4": {"source": f"tests/data/tiny-qwen35 quantised by bench/tools/make_int4_fixture.py --method {method} "
                           "(round to nearest per group, f16 scales)",
                 "quantization_config": made["quantization_config"], "quantised_weights": st["quantised"],
                 "groups": st["groups"], "max_relative_l2_vs_bf16": st["max_rel_l2"]},
        "prompts_from": "tests/data/tiny-qwen35/reference.safetensors, prompts "
                        + ", ".join(map(str, KEPT_PROMPTS)),
        "check_problems": problems,
    })
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", choices=sorted(SETTINGS), required=True)
    ap.add_argument("--src", default=os.path.join(here, "..", "..", "tests", "data", "tiny-qwen35"))
    ap.add_argument("--out", required=True, help="the fixture directory to write (must not exist or be empty)")
    ap.add_argument("--twin", help="where to keep the dequantised twin (default: a temporary directory, removed)")
    ap.add_argument("--make-reference", default=os.environ.get("MAKE_REFERENCE",
                                                               os.path.join(here, "make_reference.py")),
                    help="path of make_reference.py (the fixtures' generator; default MAKE_REFERENCE or beside this script)")
    ap.add_argument("--checkpoint-only", action="store_true", help="step 1 only (no torch needed)")
    args = ap.parse_args()
    if os.path.isdir(args.out) and os.listdir(args.out):
        fail(f"{args.out} exists and is not empty")
    twin = args.twin or tempfile.mkdtemp(prefix=f"tiny-qwen35-{args.method}-twin-")
    try:
        made = make_checkpoint(args.src, args.out, twin, args.method)
        if not args.checkpoint_only:
            make_reference(args.src, args.out, twin, made, args.make_reference, args.method)
    finally:
        if not args.twin:
            shutil.rmtree(twin, ignore_errors=True)
    sizes = {f: os.path.getsize(os.path.join(args.out, f)) for f in sorted(os.listdir(args.out))}
    print(f"wrote {args.out}: {sum(sizes.values())} bytes: {sizes}")


if __name__ == "__main__":
    main()

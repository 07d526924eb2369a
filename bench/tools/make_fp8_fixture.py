#!/usr/bin/env python3
"""Writes the tiny FP8 fixture (tests/data/tiny-qwen35-fp8) from the bf16 one, with its HF reference.

    python3 bench/tools/make_fp8_fixture.py --src tests/data/tiny-qwen35 --out OUT_DIR/tiny-qwen35-fp8 \\
        --make-reference SHARED/scripts/make_reference.py

1. The checkpoint (plain Python, no torch): the bf16 fixture's weights narrowed to hidden
   size 96 and intermediate size 320 (the leading rows / columns of each tensor), so that the
   quantised matrices have partial 128x128 blocks -- gate/up_proj [320, 96] and down_proj
   [96, 320] in both dimensions, the others along one -- then written in the layout of Qwen's
   -FP8 releases (fp8_layout.py): each linear weight an FP8 target quantises as F8_E4M3 codes
   with a `<name>_scale_inv` F32 [ceil(rows/128), ceil(cols/128)], everything else (embedding,
   lm_head, norms, conv1d, A_log, dt_bias, in_proj_a/b, model.visual.*) in bf16 as it was, and
   quantization_config in config.json. The tokenizer, chat template and generation config are
   copied. A twin checkpoint holds the dequantised weights (code x block scale, in f32: what
   the CPU backend loads) in F32 beside the same unquantised tensors, without
   quantization_config.
2. The reference (torch + transformers, the GPU machine's image): HF transformers loads the twin
   in float64 with eager attention, and make_reference.py's references() records, for the bf16
   fixture's prompts (read from its reference.safetensors), the prefill logits, the greedy
   continuation and its logits, and prompt 2's hidden states: reference.safetensors and
   reference.json in the bf16 fixture's format, so refcheck reads them unchanged. Cross-checks
   on the way, reported as WARNING lines and in reference.json rather than fatal: torch's
   float8_e4m3fn decoding of the written codes x scales equals the twin bit for bit;
   make_random_checkpoint.py's torch quantiser gives the same codes and scales; the weights HF
   loaded are the twin's.

--checkpoint-only stops after step 1 (for a machine without torch). Deterministic: the same
inputs give the same bytes (the reference up to float64 summation order).
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys
import tempfile

from fp8_layout import FP8_QUANTIZATION_CONFIG, bf16_to_f32, block_shape, is_fp8_target, quantize
from reference_module import Checks, load_make_reference

HIDDEN, INTERMEDIATE = 96, 320
COPIED = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
TEXT = "model.language_model."
# The meaning of each dimension of the text tower's tensors (H hidden, I intermediate, None
# kept): keyed by the name after "layers.<n>." for a layer's tensors, by the full name else.
LAYER_DIMS = {
    "input_layernorm.weight": ("H",), "post_attention_layernorm.weight": ("H",),
    "mlp.gate_proj.weight": ("I", "H"), "mlp.up_proj.weight": ("I", "H"), "mlp.down_proj.weight": ("H", "I"),
    "self_attn.q_proj.weight": (None, "H"), "self_attn.k_proj.weight": (None, "H"),
    "self_attn.v_proj.weight": (None, "H"), "self_attn.o_proj.weight": ("H", None),
    "self_attn.q_norm.weight": (None,), "self_attn.k_norm.weight": (None,),
    "linear_attn.in_proj_qkv.weight": (None, "H"), "linear_attn.in_proj_z.weight": (None, "H"),
    "linear_attn.in_proj_a.weight": (None, "H"), "linear_attn.in_proj_b.weight": (None, "H"),
    "linear_attn.out_proj.weight": ("H", None), "linear_attn.conv1d.weight": (None, None, None),
    "linear_attn.A_log": (None,), "linear_attn.dt_bias": (None,), "linear_attn.norm.weight": (None,),
}
TOP_DIMS = {
    TEXT + "embed_tokens.weight": (None, "H"), TEXT + "norm.weight": ("H",), "lm_head.weight": (None, "H"),
    # The vision tower (which a text-only engine skips) stays as it was, but for the merger's
    # output, which feeds the text tower's hidden size.
    "model.visual.merger.linear_fc2.weight": ("H", None), "model.visual.merger.linear_fc2.bias": ("H",),
}
ITEMSIZE = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I32": 4}


def fail(msg):
    sys.exit(f"make_fp8_fixture: error: {msg}")


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} and the metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], list(t["shape"]), data[b:e])
    return out, meta


def write_safetensors(path, tensors, meta):
    """Tensors by descending element size, then name, so that every one is aligned to it."""
    order = sorted(tensors, key=lambda k: (-ITEMSIZE[tensors[k][0]], k))
    header, at = {"__metadata__": meta}, 0
    for name in order:
        dtype, shape, raw = tensors[name]
        assert len(raw) == ITEMSIZE[dtype] * math.prod(shape), name
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in order:
            f.write(tensors[name][2])


def dims_of(name, ndim):
    if name in TOP_DIMS:
        return TOP_DIMS[name]
    if name.startswith("model.visual."):
        return (None,) * ndim
    if name.startswith(TEXT + "layers."):
        rest = name.split(".", 4)[4]  # after model.language_model.layers.<n>.
        if rest in LAYER_DIMS:
            return LAYER_DIMS[rest]
    fail(f"{name}: a tensor this script does not know (extend LAYER_DIMS / TOP_DIMS)")


def narrow(name, dtype, shape, raw, old, new):
    """The leading block of a tensor, each H / I dimension cut from old[...] to new[...]."""
    dims = dims_of(name, len(shape))
    if len(dims) != len(shape):
        fail(f"{name}: shape {shape}, expected {len(dims)} dimensions")
    want = []
    for d, role in zip(shape, dims):
        if role is None:
            want.append(d)
            continue
        if d != old[role]:
            fail(f"{name}: dimension {d} is not the source's {role} = {old[role]}")
        want.append(new[role])
    if want == shape:
        return shape, raw
    size = ITEMSIZE[dtype]
    if len(shape) == 1:
        return want, raw[: want[0] * size]
    if len(shape) != 2:
        fail(f"{name}: narrowing {len(shape)}-D tensors is not supported")
    row = shape[1] * size
    return want, b"".join(raw[i * row: i * row + want[1] * size] for i in range(want[0]))


def make_checkpoint(src, out, twin):
    """Step 1. Returns what the checks of step 2 need and prints a summary."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    tc = cfg["text_config"]
    old = {"H": tc["hidden_size"], "I": tc["intermediate_size"]}
    new = {"H": HIDDEN, "I": INTERMEDIATE}
    if old["H"] <= HIDDEN or old["I"] <= INTERMEDIATE:
        fail(f"the source's hidden {old['H']} / intermediate {old['I']} must exceed {HIDDEN} / {INTERMEDIATE}")
    tensors, meta = read_safetensors(os.path.join(src, "model.safetensors"))
    fixture, dequant, bf16_weights = {}, {}, {}
    stats = {"quantised": 0, "blocks": 0, "partial_blocks": 0, "partial_rows": [], "partial_cols": [],
             "partial_both": [], "max_rel_l2": 0.0, "max_rel_l2_tensor": "", "max_abs_over_scale": 0.0}
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        shape, raw = narrow(name, dtype, shape, raw, old, new)
        if not is_fp8_target(name):
            fixture[name] = (dtype, shape, raw)
            continue
        if dtype != "BF16" or len(shape) != 2:
            fail(f"{name}: an FP8 target must be a 2-D BF16 weight, got {dtype} {shape}")
        rows, cols = shape
        values = bf16_to_f32(raw)
        codes, scales, deq = quantize(values, rows, cols)
        srows, scols = block_shape(rows, cols)
        fixture[name] = ("F8_E4M3", shape, codes)
        fixture[name + "_scale_inv"] = ("F32", [srows, scols], scales.tobytes())
        dequant[name] = ("F32", shape, deq.tobytes())
        bf16_weights[name] = (shape, raw, codes, scales)
        st = stats
        st["quantised"] += 1
        st["blocks"] += srows * scols
        pr, pc = rows % 128 != 0, cols % 128 != 0
        st["partial_blocks"] += srows * scols - (rows // 128) * (cols // 128)
        if pr and pc:
            st["partial_both"].append(name)
        elif pr:
            st["partial_rows"].append(name)
        elif pc:
            st["partial_cols"].append(name)
        num = sum((d - w) ** 2 for d, w in zip(deq, values))
        den = sum(w * w for w in values)
        rel = math.sqrt(num / den) if den > 0 else 0.0
        if rel > st["max_rel_l2"]:
            st["max_rel_l2"], st["max_rel_l2_tensor"] = rel, name
        for k in range(rows * cols):  # |error| against its block's scale: <= 16 for e4m3's 3 mantissa bits
            i, j = divmod(k, cols)
            st["max_abs_over_scale"] = max(st["max_abs_over_scale"],
                                           abs(deq[k] - values[k]) / scales[(i // 128) * scols + j // 128])
    if not stats["partial_both"]:
        fail("no quantised matrix has partial blocks in both dimensions")

    tc.update(hidden_size=HIDDEN, intermediate_size=INTERMEDIATE)
    if "vision_config" in cfg:
        cfg["vision_config"]["out_hidden_size"] = HIDDEN
    twin_cfg = json.loads(json.dumps(cfg))
    qc = json.loads(json.dumps(FP8_QUANTIZATION_CONFIG))
    # The vision tower stays bf16, as the releases leave (parts of) theirs.
    qc["modules_to_not_convert"].append("model.visual")
    cfg["quantization_config"] = qc
    for d, c, t in ((out, cfg, fixture), (twin, twin_cfg, {**fixture, **dequant})):
        os.makedirs(d, exist_ok=True)
        if d == twin:
            t = {k: v for k, v in t.items() if not k.endswith("_scale_inv")}
        write_safetensors(os.path.join(d, "model.safetensors"), t, meta)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
            f.write("\n")
    for name in COPIED:
        p = os.path.join(src, name)
        if os.path.exists(p):
            shutil.copyfile(p, os.path.join(out, name))

    print(f"quantised {stats['quantised']} weights to F8_E4M3 ({stats['blocks']} blocks of 128x128, "
          f"{stats['partial_blocks']} of them partial)")
    print(f"  partial blocks in both dimensions: {len(stats['partial_both'])} weights, e.g. {stats['partial_both'][0]}")
    print(f"  along rows only: {len(stats['partial_rows'])}, along columns only: {len(stats['partial_cols'])}")
    print(f"  dequantised vs bf16: max relative L2 per weight {stats['max_rel_l2']:.4f} ({stats['max_rel_l2_tensor']}), "
          f"max |error| / block scale {stats['max_abs_over_scale']:.3f} (at most 16 for e4m3)")
    print(f"  unquantised tensors kept: {len(fixture) - 2 * stats['quantised']}")
    return {"text_config": tc, "stats": stats, "bf16_weights": bf16_weights, "dequant": dequant}


def make_reference(src, out, twin, made, make_reference_py):
    """Step 2."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    mr = load_make_reference(make_reference_py)
    # Cross-checks, reported rather than fatal: the engine's loader (checked against the same
    # dequantisation by refcheck at 1e-4) is the authority, and the twin is what it computes.
    check = Checks()
    problems = check.problems

    twin_w = load_file(os.path.join(twin, "model.safetensors"))

    def torch_decodes_to_twin():
        written, bad = load_file(os.path.join(out, "model.safetensors")), []
        for name in made["dequant"]:
            codes, scale = written[name], written[name + "_scale_inv"]
            if codes.dtype != torch.float8_e4m3fn or scale.dtype != torch.float32:
                bad.append(f"{name}: read as {codes.dtype} / {scale.dtype}")
                continue
            rows, cols = codes.shape
            s = scale.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
            if not torch.equal(codes.float() * s, twin_w[name]):
                bad.append(f"{name}: code x scale differs from the twin")
        return bad

    def torch_quantiser_agrees():
        import make_random_checkpoint  # the torch quantiser of its --fp8 (beside this script)
        bad = []
        for name, (shape, raw, codes, scales) in made["bf16_weights"].items():
            w = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).view(*shape)
            q, s = make_random_checkpoint.fp8_blocks(w)  # on the CPU, as w is
            if q.view(torch.uint8).flatten().tolist() != list(codes):
                bad.append(f"{name}: other codes")
            if s.flatten().tolist() != scales.tolist():
                bad.append(f"{name}: other scales")
        return bad

    check("torch's float8_e4m3fn decoding of the written weights x scales equals the twin", torch_decodes_to_twin)
    check("make_random_checkpoint.fp8_blocks gives the same codes and scales", torch_quantiser_agrees)

    ref_src = load_file(os.path.join(src, "reference.safetensors"))
    prompts, i = [], 0
    while f"p{i}.prompt" in ref_src:
        prompts.append(ref_src[f"p{i}.prompt"].tolist())
        i += 1
    steps = ref_src["p0.greedy_tokens"].numel()
    V = made["text_config"]["vocab_size"]
    model = transformers.Qwen3_5ForConditionalGeneration.from_pretrained(
        twin, dtype=torch.float64, attn_implementation="eager").eval()

    def hf_holds_the_twin():  # nothing re-initialised or transformed on load
        sd = model.state_dict()
        return ([f"{k}: not a parameter of HF's model" for k in twin_w if k not in sd] +
                [f"{k}: other values" for k, t in twin_w.items() if k in sd and not torch.equal(sd[k].double(), t.double())])

    check(f"HF holds the twin's {len(twin_w)} tensors", hf_holds_the_twin)
    print(f"reference: {len(prompts)} prompts of {[len(p) for p in prompts]} tokens, {steps} greedy steps each", flush=True)

    tensors, manifest = mr.references(model, V, prompts, steps, "tiny-qwen35-fp8")
    st = made["stats"]
    manifest.update({
        "model": "tiny-qwen35-fp8", "layout": "multimodal", "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype_of_reference": "computed in float64 on CPU from the dequantised FP8 weights (code x block scale, "
                              "in f32) and the bf16 others, stored as float32",
        "attn_implementation": "eager", "text_config": made["text_config"],
        "fp8": {"source": "tests/data/tiny-qwen35 narrowed to hidden_size 96 and intermediate_size 320, "
                          "quantised by bench/tools/make_fp8_fixture.py (serve's --quantization fp8 rules)",
                "quantised_weights": st["quantised"], "blocks": st["blocks"], "partial_blocks": st["partial_blocks"],
                "partial_in_both_dimensions": st["partial_both"],
                "max_relative_l2_vs_bf16": st["max_rel_l2"]},
        "prompts_from": "tests/data/tiny-qwen35/reference.safetensors",
        "check_problems": problems,
    })
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "tests", "data", "tiny-qwen35"))
    ap.add_argument("--out", required=True, help="the fixture directory to write (must not exist or be empty)")
    ap.add_argument("--twin", help="where to keep the dequantised twin (default: a temporary directory, removed)")
    ap.add_argument("--make-reference", default=os.environ.get("MAKE_REFERENCE",
                                                               os.path.join(here, "make_reference.py")),
                    help="path of make_reference.py (the fixtures' generator; default MAKE_REFERENCE or beside this script)")
    ap.add_argument("--checkpoint-only", action="store_true", help="step 1 only (no torch needed)")
    args = ap.parse_args()
    if os.path.isdir(args.out) and os.listdir(args.out):
        fail(f"{args.out} exists and is not empty")
    twin = args.twin or tempfile.mkdtemp(prefix="tiny-qwen35-fp8-twin-")
    try:
        made = make_checkpoint(args.src, args.out, twin)
        if not args.checkpoint_only:
            make_reference(args.src, args.out, twin, made, args.make_reference)
    finally:
        if not args.twin:
            shutil.rmtree(twin, ignore_errors=True)
    sizes = {f: os.path.getsize(os.path.join(args.out, f)) for f in sorted(os.listdir(args.out))}
    print(f"wrote {args.out}: {sum(sizes.values())} bytes: {sizes}")


if __name__ == "__main__":
    main()

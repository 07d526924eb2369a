#!/usr/bin/env python3
"""Writes the tiny YaRN fixture (tests/data/tiny-qwen35-yarn): tiny-qwen35's checkpoint under a YaRN
config override, with its float64 HF reference at positions past the original maximum.

    python3 bench/tools/make_yarn_fixture.py --src tests/data/tiny-qwen35 --out OUT_DIR \\
        --make-reference PATH/make_reference.py

On the GPU machine this is the study `yarn_fixture` (bench/README.md), which carries
make_reference.py (the project's shared fixture generator) as an extra.

The fixture holds no weights: it is
  hf_overrides.json     the override (serve's / refcheck's --hf-overrides): text_config.rope_parameters
                        rope_type yarn, factor 4 over original_max_position_embeddings 64 (the
                        released models' rope_theta, partial rotary 0.25 and interleaved M-RoPE
                        sections, default betas, no attention_factor: HF derives 0.1 ln 4 + 1),
                        and text_config.max_position_embeddings 256;
  reference.safetensors the tiny-qwen35 format (p{i}.prompt, prefill_logits, greedy_tokens,
                        greedy_logits; p2.hidden_states) for 8 prompts of 1 to 239 random tokens
                        and 16 greedy steps: most positions lie past 64, up to 254;
  reference.json        the manifest: versions, the override, HF's rotary inv_freq and attention
                        scaling as loaded, and the cross-checks below.
HF transformers loads tiny-qwen35's config.json with the override deep-merged (RFC 7386, as the
engine merges it: model/qwen35/config.h) beside its model.safetensors, in float64 with eager
attention; make_reference.py's references() records the logits. Cross-checks, reported as WARNING
lines and in reference.json rather than fatal: HF's rotary embedding is of type yarn, its
inv_freq equals an independent float64 evaluation of the YaRN formulas to f32 rounding, its
attention scaling is 0.1 ln(factor) + 1, and the override changed the logits (against the same
model without it) at positions past the original maximum.

Deterministic: the same inputs give the same prompts and (up to float64 summation order) the same
reference. Runs on the GPU machine's image (torch + transformers 5); CPU only.
"""
import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile

from reference_module import load_make_reference

OVERRIDES = {
    "text_config": {
        "rope_parameters": {
            "rope_type": "yarn", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10], "mrope_interleaved": True,
            "factor": 4.0, "original_max_position_embeddings": 64,
        },
        "max_position_embeddings": 256,
    }
}
PROMPT_LENS = [1, 9, 33, 65, 97, 140, 190, 239]
STEPS = 16
SEED = 4242


def fail(msg):
    sys.exit(f"make_yarn_fixture: error: {msg}")


def merge_patch(target, patch):
    """RFC 7386 (what nlohmann's merge_patch does in the engine)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def yarn_inv_freq_f64(theta, dim, factor, original, beta_fast=32.0, beta_slow=1.0):
    """HF's _compute_yarn_parameters written out again in float64 (truncate on)."""
    def corr(rot):
        return dim * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(theta))
    low = max(math.floor(corr(beta_fast)), 0)
    high = min(math.ceil(corr(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        pos = theta ** (2 * i / dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        keep = 1 - ramp
        out.append((1 / (factor * pos)) * (1 - keep) + (1 / pos) * keep)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "..", "tests", "data", "tiny-qwen35"))
    ap.add_argument("--out", required=True, help="the fixture directory to write (must not exist or be empty)")
    ap.add_argument("--make-reference", default=os.environ.get("MAKE_REFERENCE", os.path.join(here, "make_reference.py")))
    args = ap.parse_args()
    if os.path.isdir(args.out) and os.listdir(args.out):
        fail(f"{args.out} exists and is not empty")
    os.makedirs(args.out, exist_ok=True)

    import torch
    import transformers
    from safetensors.torch import save_file

    mr = load_make_reference(args.make_reference)
    problems = []

    def warn(what):
        problems.append(what)
        print(f"WARNING: {what}", flush=True)

    with open(os.path.join(args.src, "config.json")) as f:
        base_config = json.load(f)
    merged = merge_patch(base_config, OVERRIDES)
    tmp = tempfile.mkdtemp(prefix="tiny-qwen35-yarn-ckpt-")
    try:
        for name in os.listdir(args.src):
            if name != "config.json" and not name.startswith("reference"):
                os.symlink(os.path.abspath(os.path.join(args.src, name)), os.path.join(tmp, name))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(merged, f, indent=2)
        cls = transformers.Qwen3_5ForConditionalGeneration
        model = cls.from_pretrained(tmp, dtype=torch.float64, attn_implementation="eager").eval()
        plain = cls.from_pretrained(args.src, dtype=torch.float64, attn_implementation="eager").eval()
    finally:
        shutil.rmtree(tmp)

    tcfg = merged["text_config"]
    rope = tcfg["rope_parameters"]
    rotary = getattr(mr.text_model(model), "rotary_emb", None)
    if rotary is None:
        fail("HF's text model has no rotary_emb to inspect (another transformers layout?)")
    inv_freq = [float(x) for x in rotary.inv_freq.flatten().tolist()]
    scaling = float(rotary.attention_scaling)
    print(f"HF rotary: rope_type {getattr(rotary, 'rope_type', '?')}, attention_scaling {scaling!r}, "
          f"{len(inv_freq)} frequencies", flush=True)
    if getattr(rotary, "rope_type", None) != "yarn":
        warn(f"HF's rotary embedding is of type {getattr(rotary, 'rope_type', None)!r}, not yarn")
    dim = int(tcfg["head_dim"] * rope["partial_rotary_factor"])
    mine = yarn_inv_freq_f64(rope["rope_theta"], dim, rope["factor"], rope["original_max_position_embeddings"])
    worst = max(abs(a - b) / b for a, b in zip(inv_freq, mine)) if len(mine) == len(inv_freq) else float("inf")
    print(f"checked: inv_freq vs float64 YaRN formulas: max rel diff {worst:.3g}", flush=True)
    if not worst < 1e-6:
        warn(f"HF's inv_freq differs from the float64 YaRN formulas by {worst:.3g} (relative)")
    expected_scaling = 0.1 * math.log(rope["factor"]) + 1.0
    if abs(scaling - expected_scaling) > 1e-12:
        warn(f"HF's attention scaling {scaling!r} is not 0.1 ln(factor) + 1 = {expected_scaling!r}")

    V = tcfg["vocab_size"]
    rng = random.Random(SEED)
    prompts = [[rng.randrange(0, V) for _ in range(n)] for n in PROMPT_LENS]
    # The override must matter past the original maximum (else the fixture checks nothing).
    with torch.no_grad():
        x = torch.tensor([prompts[-1]])
        a, b = model(input_ids=x).logits[0], plain(input_ids=x).logits[0]
    far = ((a[64:] - b[64:]).norm() / b[64:].norm()).item()
    print(f"checked: yarn vs default RoPE logits past position 64: rel diff {far:.3g}", flush=True)
    if not far > 1e-3:
        warn(f"the YaRN override changes the logits past position 64 by only {far:.3g}")
    del plain

    tensors, manifest = mr.references(model, V, prompts, STEPS, "tiny-qwen35-yarn")
    manifest.update({
        "model": "tiny-qwen35-yarn", "layout": "multimodal", "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype_of_reference": "computed in float64 on CPU from tiny-qwen35's bf16 checkpoint with hf_overrides.json "
                              "merged into its config.json, stored as float32",
        "attn_implementation": "eager", "text_config": tcfg, "hf_overrides": OVERRIDES,
        "checkpoint": "tests/data/tiny-qwen35 (weights, tokenizer, template); this directory holds no weights",
        "hf_rotary": {"inv_freq": inv_freq, "attention_scaling": scaling},
        "yarn_vs_default_rel_diff_past_64": far,
        "check_problems": problems,
    })
    save_file(tensors, os.path.join(args.out, "reference.safetensors"))
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "hf_overrides.json"), "w") as f:
        json.dump(OVERRIDES, f, indent=1)
        f.write("\n")
    print("wrote", {n: os.path.getsize(os.path.join(args.out, n)) for n in sorted(os.listdir(args.out))}, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/data/tiny-qwen35-vl: a tiny random Qwen3.5 vision-language checkpoint and its
float64 reference from HF transformers (issue 47).

    python3 bench/tools/make_vl_fixture.py --out DIR/tiny-qwen35-vl     (the study `vl_fixture` runs it)

Runs where torch, transformers 5.x and PIL are (the GPU machine; no internet is needed: the
tokenizer is tests/data/tiny-qwen35's, whose vocabulary already holds <|vision_start|> 1019,
<|vision_end|> 1020, <|image_pad|> 1022 and <|video_pad|> 1023). Deterministic: the same
versions give the same bytes (the reference up to float64 summation order).

1. Images (PIL, from a seeded numpy generator): the case images and a few decode-only ones,
   written as PNG / JPEG / WebP / GIF into images/, with PIL's decoding of each (what HF's
   processor starts from) in reference.safetensors as img.<file>.rgb (U8 [H, W, 3]).
2. The checkpoint: Qwen3_5ForConditionalGeneration, text tower 4 layers (3 DeltaNet + 1
   full attention) at tiny-qwen35's head shapes, vision tower of 2 blocks, hidden 144,
   2 heads of 72 (the 9B/27B tower's head size), intermediate 288, an 8 x 8 learned position
   grid, patch 16, temporal patch 2, merge 2. Every weight random and rounded to bf16, the
   vision tower's at the scale of a trained one (matrices N(0, 1/fan_in), LayerNorm weights
   near 1) so that a wrong encoder moves the logits well past any tolerance. The image
   processor's preprocessor_config.json (min/max pixels small enough for tiny prompts, CLIP's
   per-channel mean and std so that a channel mix-up shows) and a chat template in the style of
   Qwen3.5's that renders an image part as <|vision_start|><|image_pad|><|vision_end|>.
3. The reference, HF transformers in float64 on the CPU with eager attention, for each case
   (messages in OpenAI form in reference.json): the rendered prompt, the processor's
   input_ids (pads expanded), pixel_values (one of its two equal temporal copies, as
   c<i>.patches [N, 3 P P]) and image_grid_thw, the vision tower's output
   (pre-merger hidden states and the merged image embeddings), get_rope_index's 3-axis
   positions and rope delta, the logits at every prompt position and 16 greedy tokens with the
   logits before each (decode through the cache). Cross-checks (fatal): the processor's grids
   equal smart_resize's; the image embeddings equal the get_image_features split; the
   step-by-step decode equals one full forward over prompt + tokens (< 1e-6). Report-only:
   the PIL backend's pixel_values against the default backend's, and this script's numpy
   transcription of torch's uint8 antialiased bicubic resize against the processor's.
"""
import argparse
import inspect
import json
import math
import os
import shutil
import sys

import numpy as np
import torch

import transformers
from PIL import Image
from safetensors.torch import save_file
from transformers import AutoImageProcessor, Qwen3_5Config, Qwen3_5ForConditionalGeneration

torch.set_num_threads(min(16, os.cpu_count() or 1))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "tests", "data", "tiny-qwen35")
TEMPLATE_SRC = os.path.join(ROOT, "tests", "data", "chat-templates", "qwen35_style.jinja")
COPIED = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
IMAGE_PAD, VIDEO_PAD, VISION_START, VISION_END = 1022, 1023, 1019, 1020
GREEDY_STEPS = 16
SEED = 4747

TEXT = dict(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
            layer_types=["linear_attention"] * 3 + ["full_attention"], num_attention_heads=8,
            num_key_value_heads=2, head_dim=256, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
            hidden_act="silu", max_position_embeddings=4096, tie_word_embeddings=False, eos_token_id=1006,
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                             "mrope_section": [11, 11, 10], "mrope_interleaved": True})
VISION = dict(depth=2, hidden_size=144, intermediate_size=288, num_heads=2, out_hidden_size=128, patch_size=16,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=64, in_channels=3,
              hidden_act="gelu_pytorch_tanh")
# min_pixels 64 x 64, max_pixels 128 x 128: prompts of a few dozen image tokens. CLIP's
# mean/std (the releases use 0.5 for all three) so that each channel is normalised differently.
PREPROCESSOR = {
    "size": {"shortest_edge": 4096, "longest_edge": 16384},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast",
}
VIDEO_PREPROCESSOR = dict(PREPROCESSOR, video_processor_type="Qwen3VLVideoProcessor")
del VIDEO_PREPROCESSOR["image_processor_type"]

# The image and video parts of the fixture's chat template: qwen35_style.jinja's render_content
# with the vision branch of Qwen3.5's own template (an image or video part is one placeholder
# the processor expands: to the image's token count, or to the video's timestamped frames).
TEMPLATE_OLD = "            {%- if part.type == 'text' -%}{{- part.text | trim -}}{%- endif -%}\n"
TEMPLATE_NEW = ("            {%- if part.type == 'text' -%}{{- part.text | trim -}}\n"
                "            {%- elif part.type == 'image' or part.type == 'image_url' -%}"
                "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}\n"
                "            {%- elif part.type == 'video' or part.type == 'video_url' -%}"
                "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}\n"
                "            {%- endif -%}\n")


def fail(msg):
    sys.exit(f"make_vl_fixture: error: {msg}")


# ---- 1. images --------------------------------------------------------------------------------

def picture(width, height, seed):
    """Smooth gradients, a few discs and noise: detail at every scale, so resizing matters."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.stack([255 * x / max(width - 1, 1), 255 * y / max(height - 1, 1),
                    127.5 + 127.5 * np.sin((x + 2 * y) / 5.0)], axis=-1)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(3, max(4, min(width, height) / 3))
        color = rng.uniform(0, 255, 3)
        img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = color
    img += rng.normal(0, 12, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def make_images(d):
    """{file: how it was made}. Case images first, then decode-only ones."""
    os.makedirs(d, exist_ok=True)
    made = {}

    def save(name, im, **kw):
        im.save(os.path.join(d, name), **kw)
        made[name] = f"{im.mode} {im.size[0]}x{im.size[1]} {kw}"

    save("square96.png", Image.fromarray(picture(96, 96, 1)))
    rgba = np.concatenate([picture(150, 70, 2), np.linspace(0, 255, 150 * 70).reshape(70, 150, 1).astype(np.uint8)], -1)
    save("wide150x70_rgba.png", Image.fromarray(rgba, "RGBA"))
    save("tall200x300.webp", Image.fromarray(picture(200, 300, 3)), lossless=True)
    frames = [Image.fromarray(picture(40, 24, 4 + i)).quantize(colors=64, dither=Image.Dither.NONE) for i in range(2)]
    frames[0].save(os.path.join(d, "small40x24.gif"), save_all=True, append_images=frames[1:], duration=100, loop=0)
    made["small40x24.gif"] = "P 40x24, 2 frames (the first is the image)"
    save("photo120x90.jpg", Image.fromarray(picture(120, 90, 6)), quality=92, subsampling=0)
    # Decode-only: chroma-subsampled JPEG, lossy WebP, grayscale and palette PNGs.
    save("photo64x48_420.jpg", Image.fromarray(picture(64, 48, 7)), quality=85)
    save("lossy64x48.webp", Image.fromarray(picture(64, 48, 8)), quality=80)
    save("gray50x40.png", Image.fromarray(picture(50, 40, 9)[:, :, 0], "L"))
    pal = Image.fromarray(picture(33, 20, 10)).quantize(colors=16, dither=Image.Dither.NONE)
    save("palette33x20.png", pal, transparency=3)
    return made


# ---- 2. checkpoint ------------------------------------------------------------------------------

def randomize(model, seed):
    """Text tower as tests/data/tiny-qwen35 was drawn (make_reference.py's rules); the vision
    tower at a trained model's scale. Every value rounded to bf16."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "visual" in name:
                if name.endswith("bias"):
                    p.normal_(0, 0.1, generator=g)
                elif "norm" in name:  # LayerNorm weights (plain, not zero-centred)
                    p.normal_(1.0, 0.2, generator=g)
                elif "pos_embed" in name:
                    p.normal_(0, 0.5, generator=g)
                else:  # patch_embed (Conv3d [out, 3, 2, 16, 16]), qkv, proj, fc1, fc2
                    fan_in = p[0].numel()
                    p.normal_(0, 1.0 / math.sqrt(fan_in), generator=g)
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.empty_like(p).uniform_(1, 16, generator=g)))
            elif name.endswith("dt_bias"):
                dt = torch.exp(torch.empty_like(p).uniform_(math.log(1e-3), math.log(1e-1), generator=g))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif "norm" in name:
                p.normal_(0, 0.2, generator=g)
            elif "conv1d" in name:
                p.normal_(0, 0.3, generator=g)
            elif "embed_tokens" in name:
                p.normal_(0, 1.0, generator=g)
            elif p.dim() == 2:
                p.normal_(0, 1.0 / math.sqrt(p.shape[1]), generator=g)
            else:
                p.normal_(0, 0.1, generator=g)
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def make_checkpoint(d):
    torch.manual_seed(SEED)
    cfg = Qwen3_5Config(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=False,
                        image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START,
                        vision_end_token_id=VISION_END)
    model = Qwen3_5ForConditionalGeneration(cfg)
    randomize(model, SEED)
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    for name in COPIED:
        shutil.copyfile(os.path.join(SRC, name), os.path.join(d, name))
    template = open(TEMPLATE_SRC).read()
    if TEMPLATE_OLD not in template:
        fail(f"{TEMPLATE_SRC}: the text-part line this script extends is not there")
    with open(os.path.join(d, "chat_template.jinja"), "w") as f:
        f.write(template.replace(TEMPLATE_OLD, TEMPLATE_NEW))
    for name, body in (("preprocessor_config.json", PREPROCESSOR), ("video_preprocessor_config.json", VIDEO_PREPROCESSOR)):
        with open(os.path.join(d, name), "w") as f:
            json.dump(body, f, indent=2)
            f.write("\n")


# ---- 3. reference -------------------------------------------------------------------------------

def image_part(name):
    return {"type": "image_url", "image_url": {"url": f"images/{name}"}}


def text_part(text):
    return {"type": "text", "text": text}


# (name, OpenAI messages, mm_processor_kwargs)
CASES = [
    ("square", [{"role": "user", "content": [image_part("square96.png"), text_part("What is in this image?")]}], {}),
    ("resized", [{"role": "user", "content": [text_part("Read the banner:"), image_part("wide150x70_rgba.png")]}], {}),
    ("two_images", [{"role": "system", "content": "You compare pictures."},
                    {"role": "user", "content": [text_part("First:"), image_part("tall200x300.webp"),
                                                 text_part("Second:"), image_part("small40x24.gif"),
                                                 text_part("Which is brighter?")]}], {}),
    ("mid_conversation", [{"role": "user", "content": "Hi there."},
                          {"role": "assistant", "content": "Hello! How can I help?"},
                          {"role": "user", "content": [text_part("Look at this:"), image_part("photo120x90.jpg"),
                                                       text_part("Describe it.")]},
                          {"role": "assistant", "content": "It is a test pattern with coloured discs."},
                          {"role": "user", "content": "Thanks. Which colour dominates?"}], {}),
    ("pixels_kwargs", [{"role": "user", "content": [image_part("tall200x300.webp"), text_part("And now smaller?")]}],
     {"min_pixels": 1024, "max_pixels": 6144}),
]


def smart_resize(height, width, factor, min_pixels, max_pixels):
    """HF's smart_resize (transformers' qwen2_vl image processor), written out to check the
    processor's grids against it."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio above 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def torch_u8_resize(img, out_h, out_w):
    """A numpy transcription of torch's uint8 antialiased bicubic resize on the CPU (what
    torchvision's resize runs for a uint8 tensor): per axis double weights (Keys a = -0.5,
    support 2 * max(1, in/out)), normalised, rounded to int16 at the axis's precision; width
    first, then height, each pass rounded and clamped to uint8. Report-only cross-check."""
    def axis(in_size, out_size):
        scale = in_size / out_size
        support = 2.0 * scale if scale >= 1.0 else 2.0
        kmax = int(math.ceil(support)) * 2 + 1
        inv = 1.0 / scale if scale >= 1.0 else 1.0

        def cubic(x):
            x = abs(x)
            a = -0.5
            if x < 1.0:
                return ((a + 2) * x - (a + 3)) * x * x + 1
            if x < 2.0:
                return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
            return 0.0
        rows, wmax = [], 0.0
        for i in range(out_size):
            center = scale * (i + 0.5)
            xmin = max(int(center - support + 0.5), 0)
            xsize = min(max(min(int(center + support + 0.5), in_size) - xmin, 0), kmax)
            w = [cubic((j + xmin - center + 0.5) * inv) for j in range(xsize)]
            tot = sum(w)
            if tot != 0.0:
                w = [v / tot for v in w]
                wmax = max([wmax] + w)
            rows.append((xmin, w))
        prec = 0
        while prec < 22 and int(0.5 + wmax * (1 << (prec + 1))) < (1 << 15):
            prec += 1
        out = []
        for xmin, w in rows:
            q = [int(-0.5 + v * (1 << prec)) if v * (1 << prec) < 0 else int(0.5 + v * (1 << prec)) for v in w]
            out.append((xmin, q))
        return out, prec

    def apply(src, plan, prec, ax):
        src = np.moveaxis(src.astype(np.int64), ax, 0)
        dst = np.empty((len(plan),) + src.shape[1:], np.int64)
        for i, (xmin, q) in enumerate(plan):
            acc = np.full(src.shape[1:], 1 << (prec - 1), np.int64)
            for j, k in enumerate(q):
                acc += src[xmin + j] * k
            dst[i] = np.clip(acc >> prec, 0, 255)
        return np.moveaxis(dst, 0, ax).astype(np.uint8)

    h, w = img.shape[:2]
    if w != out_w:
        plan, prec = axis(w, out_w)
        img = apply(img, plan, prec, 1)
    if h != out_h:
        plan, prec = axis(h, out_h)
        img = apply(img, plan, prec, 0)
    return img


def patchify(img_f32, merge=2, patch=16, temporal=2):
    """[H, W, C] float32 -> HF's patch rows [gh * gw, C * temporal * patch * patch]."""
    h, w, c = img_f32.shape
    gh, gw = h // patch, w // patch
    x = np.repeat(img_f32.transpose(2, 0, 1)[None], temporal, 0)  # [T, C, H, W]
    x = x.reshape(1, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gh * gw, c * temporal * patch * patch)


def hf_messages(messages):
    """OpenAI parts -> what an HF chat template reads: an image part as {"type": "image"}."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = [{"type": "image"} if p["type"] == "image_url" else p for p in c]
        out.append({"role": m["role"], "content": c})
    return out


def case_images(messages):
    return [p["image_url"]["url"].split("/", 1)[1] for m in messages if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "image_url"]


def kwargs_for(fn, **kw):
    params = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


def load_processor(d, tok):
    """HF's processor for the checkpoint, as a user gets it; where this version cannot build
    one (no video processor), the image processor and the documented expansion instead."""
    try:
        from transformers import AutoProcessor
        return AutoProcessor.from_pretrained(d), "AutoProcessor"
    except Exception as e:  # noqa: BLE001 - recorded in the manifest
        print(f"WARNING: AutoProcessor failed ({type(e).__name__}: {e}); expanding the pads here")
        return None, f"image processor + expansion here (AutoProcessor: {type(e).__name__}: {e})"


def run_processor(processor, image_processor, tok, text, images, mm_kwargs):
    if processor is not None:
        enc = processor(text=[text], images=images, return_tensors="pt", **mm_kwargs)
        ids = enc["input_ids"]
        tt = enc.get("mm_token_type_ids")
        if tt is None:
            tt = (ids == IMAGE_PAD).to(torch.int32)
        return ids, enc["pixel_values"], enc["image_grid_thw"], tt
    pix = image_processor(images=images, return_tensors="pt", **mm_kwargs)
    grids = pix["image_grid_thw"]
    parts = text.split("<|image_pad|>")
    if len(parts) != len(images) + 1:
        fail("the rendered prompt's image pads do not match the images")
    expanded = parts[0]
    for i, g in enumerate(grids.tolist()):
        expanded += "<|image_pad|>" * (g[0] * g[1] * g[2] // 4) + parts[i + 1]
    ids = torch.tensor([tok(expanded, add_special_tokens=False)["input_ids"]])
    return ids, pix["pixel_values"], grids, (ids == IMAGE_PAD).to(torch.int32)


def image_features(model, pixel_values, grid):
    """(pre-merger hidden states, merged embeddings) of the vision tower, whatever this
    version's get_image_features returns."""
    inner = model.model
    out = inner.get_image_features(pixel_values, grid, **kwargs_for(inner.get_image_features, return_dict=True))
    if hasattr(out, "pooler_output"):
        pooled = out.pooler_output
        pooled = torch.cat(list(pooled)) if isinstance(pooled, (tuple, list)) else pooled
        return out.last_hidden_state, pooled
    merged = torch.cat(list(out)) if isinstance(out, (tuple, list)) else out
    vis = inner.visual(pixel_values, grid_thw=grid)
    last = vis.last_hidden_state if hasattr(vis, "last_hidden_state") else None
    return last, merged


def rope_index(model, ids, grid, token_types):
    fn = model.model.get_rope_index
    pos, delta = fn(ids, **kwargs_for(fn, image_grid_thw=grid, mm_token_type_ids=token_types, video_grid_thw=None,
                                      attention_mask=None))
    return pos, delta


def greedy(model, enc, tcfg, delta, explicit):
    """Prefill through the cache, then one token at a time. explicit: the decode steps' positions
    given as HF's 4-row form (row 0 the cache position, for the masks; rows 1-3 the M-RoPE
    streams, cache position + rope delta); otherwise HF derives them from its cached delta."""
    from transformers.cache_utils import DynamicCache
    cache = DynamicCache(config=tcfg)
    n = enc["input_ids"].shape[1]
    with torch.no_grad():
        out = model(**enc, past_key_values=cache, use_cache=True)
        prefill = out.logits[0]
        logits, toks = [prefill[-1]], []
        for t in range(GREEDY_STEPS):
            nxt = int(torch.argmax(logits[-1]))
            toks.append(nxt)
            if t == GREEDY_STEPS - 1:
                break
            p = n + t
            kw = {}
            if explicit:
                kw["position_ids"] = torch.tensor([p, p + delta, p + delta, p + delta]).view(4, 1, 1)
            out = model(input_ids=torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True, **kw)
            logits.append(out.logits[0, -1])
    return prefill, toks, torch.stack(logits)


def references(d, made_images):
    tok = transformers.AutoTokenizer.from_pretrained(d)
    image_processor = AutoImageProcessor.from_pretrained(d)
    processor, processor_path = load_processor(d, tok)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    tcfg = model.config.get_text_config()
    tensors, problems, notes = {}, [], {}

    def report(what, bad):
        for b in bad:
            problems.append(f"{what}: {b}")
            print(f"WARNING: {what}: {b}")
        print(f"checked: {what}: {'ok' if not bad else f'{len(bad)} problem(s)'}")

    rgb = {}
    for name in made_images:
        with Image.open(os.path.join(d, "images", name)) as im:
            rgb[name] = np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
        tensors[f"img.{name}.rgb"] = torch.from_numpy(rgb[name])

    pil_cls = getattr(transformers, "Qwen2VLImageProcessorPil", None)
    try:
        pil_processor = pil_cls.from_pretrained(d) if pil_cls is not None else None
    except Exception as e:  # noqa: BLE001 - report-only
        print(f"WARNING: the PIL backend did not load: {type(e).__name__}: {e}")
        pil_processor = None
    manifest_cases = []
    for i, (name, messages, mm_kwargs) in enumerate(CASES):
        files = case_images(messages)
        text = tok.apply_chat_template(hf_messages(messages), tokenize=False, add_generation_prompt=True)
        images = [Image.open(os.path.join(d, "images", f)) for f in files]
        min_px = mm_kwargs.get("min_pixels", PREPROCESSOR["size"]["shortest_edge"])
        max_px = mm_kwargs.get("max_pixels", PREPROCESSOR["size"]["longest_edge"])
        want = []
        for f in files:
            h, w = rgb[f].shape[:2]
            rh, rw = smart_resize(h, w, 32, min_px, max_px)
            want.append([1, rh // 16, rw // 16])
        # Per-request min/max pixels as vLLM hands them to the processor (keyword arguments);
        # the other spellings only if this version ignores those.
        spellings = [mm_kwargs]
        if mm_kwargs:
            spellings += [{"images_kwargs": mm_kwargs},
                          {"size": {"shortest_edge": min_px, "longest_edge": max_px}}]
        for kw in spellings:
            ids, pixel_values, grid, token_types = run_processor(processor, image_processor, tok, text, images, kw)
            if grid.tolist() == want:
                break
            print(f"WARNING: {name}: processor kwargs {kw} gave grids {grid.tolist()}, not smart_resize's {want}")
        else:
            fail(f"case {name}: the processor's grids {grid.tolist()} are not smart_resize's {want}")
        if mm_kwargs:
            notes[f"{name}.processor_kwargs"] = kw
        pixel_values = pixel_values.to(torch.float64)
        if int((ids == IMAGE_PAD).sum()) != sum(g[1] * g[2] // 4 for g in want):
            fail(f"case {name}: image pads in input_ids do not match the grids")

        # Report-only: this script's transcription of the uint8 resize, and the PIL backend.
        mine, at = [], 0
        for f, g in zip(files, want):
            r = torch_u8_resize(rgb[f], g[1] * 16, g[2] * 16).astype(np.float32)
            mean = np.float32(PREPROCESSOR["image_mean"]) * np.float32(255.0)
            std = np.float32(PREPROCESSOR["image_std"]) * np.float32(255.0)
            mine.append(patchify((r - mean) / std))
        mine = np.concatenate(mine)
        diff = float(np.abs(mine - pixel_values.float().numpy()).max())
        notes[f"{name}.pixel_values_vs_numpy_u8_resize_max_abs"] = diff
        print(f"{name}: pixel_values vs the numpy uint8 resize: max abs diff {diff:.3g}")
        if pil_processor is not None:
            try:
                pil = pil_processor(images=images, return_tensors="pt", **mm_kwargs)["pixel_values"].to(torch.float64)
                notes[f"{name}.pil_backend_max_abs_diff"] = float((pil - pixel_values).abs().max())
            except Exception as e:  # noqa: BLE001 - report-only
                notes[f"{name}.pil_backend"] = f"{type(e).__name__}: {e}"

        with torch.no_grad():
            last_hidden, embeds = image_features(model, pixel_values, grid)
        pos, delta = rope_index(model, ids, grid, token_types)
        delta = int(delta.view(-1)[0])
        enc = {"input_ids": ids, "pixel_values": pixel_values, "image_grid_thw": grid, "mm_token_type_ids": token_types}
        enc = {k: v for k, v in enc.items()
               if k != "mm_token_type_ids" or "mm_token_type_ids" in inspect.signature(model.model.forward).parameters}
        n = ids.shape[1]
        tries = []
        for explicit in (True, False):  # the second only if this version reads positions otherwise
            try:
                prefill, toks, dec = greedy(model, enc, tcfg, delta, explicit)
            except Exception as e:  # noqa: BLE001 - recorded, then the other way is tried
                tries.append(f"explicit={explicit}: {type(e).__name__}: {e}")
                continue
            with torch.no_grad():  # one forward over prompt + tokens must give the stepwise logits
                full = dict(enc, input_ids=torch.cat([ids, torch.tensor([toks[:-1]])], 1))
                if "mm_token_type_ids" in full:
                    full["mm_token_type_ids"] = torch.cat(
                        [token_types, torch.zeros(1, len(toks) - 1, dtype=token_types.dtype)], 1)
                whole = model(**full).logits[0]
            rel_dec = float(((whole[n - 1:] - dec).norm() / dec.norm()).item())
            rel_pre = float(((whole[:n] - prefill).norm() / prefill.norm()).item())
            if rel_dec <= 1e-6 and rel_pre <= 1e-6:
                notes[f"{name}.decode_positions"] = "explicit 4-row" if explicit else "HF's cached rope delta"
                break
            tries.append(f"explicit={explicit}: decode vs full forward rel err {rel_dec:.3g} (prefill {rel_pre:.3g})")
        else:
            fail(f"case {name}: no decode matches one full forward: {tries}")
        if tries:
            notes[f"{name}.decode_tries"] = tries
        print(f"{name}: {n} tokens, grids {want}, rope delta {delta}, decode vs full forward {rel_dec:.2g}")

        p = f"c{i}."
        tensors[p + "input_ids"] = ids[0].to(torch.int32)
        # HF's rows hold the image twice along time (temporal patch 2, a still image repeated):
        # one copy is kept, [N, 3 P P] (channel, y, x), after checking the copies are equal.
        pv = pixel_values.float().view(pixel_values.shape[0], 3, 2, 16 * 16)
        if not torch.equal(pv[:, :, 0], pv[:, :, 1]):
            fail(f"case {name}: the temporal copies of pixel_values differ")
        tensors[p + "patches"] = pv[:, :, 0].reshape(pixel_values.shape[0], 3 * 16 * 16).contiguous()
        tensors[p + "image_grid_thw"] = grid.to(torch.int32).contiguous()
        if last_hidden is not None:
            tensors[p + "vision_hidden"] = last_hidden.float().contiguous()
        tensors[p + "image_embeds"] = embeds.float().contiguous()
        tensors[p + "position_ids"] = pos.reshape(3, -1).to(torch.int32).contiguous()
        tensors[p + "rope_delta"] = torch.tensor([delta], dtype=torch.int32)
        tensors[p + "prefill_logits"] = prefill.float().contiguous()
        tensors[p + "greedy_tokens"] = torch.tensor(toks, dtype=torch.int32)
        tensors[p + "greedy_logits"] = dec.float().contiguous()
        manifest_cases.append({
            "index": i, "name": name, "messages": messages, "images": files, "mm_processor_kwargs": mm_kwargs,
            "rendered": text, "prompt_len": n, "image_grid_thw": want, "rope_delta": delta,
            "greedy_ids": toks, "greedy_text": tok.decode(toks, skip_special_tokens=False),
            "decode_vs_full_forward_rel_err": rel_dec})
    return tensors, {
        "cases": manifest_cases, "processor": processor_path,
        "image_processor_class": type(image_processor).__name__,
        "image_processor_backend": getattr(image_processor, "backend", "unknown"),
        "pil_backend_class": pil_cls.__name__ if pil_cls is not None else None,
        "notes": notes, "check_problems": problems}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the fixture directory to write (must not exist or be empty)")
    args = ap.parse_args()
    d = args.out
    if os.path.isdir(d) and os.listdir(d):
        fail(f"{d} exists and is not empty")
    os.makedirs(d, exist_ok=True)
    made = make_images(os.path.join(d, "images"))
    make_checkpoint(d)
    tensors, manifest = references(d, made)
    try:
        import torchvision  # noqa: F401 - only its version is recorded; absent = the PIL backend ran
    except ImportError:
        pass
    manifest.update({
        "model": "tiny-qwen35-vl", "transformers": transformers.__version__, "torch": torch.__version__,
        "torchvision": getattr(sys.modules.get("torchvision"), "__version__", None),
        "pillow": Image.__version__ if hasattr(Image, "__version__") else __import__("PIL").__version__,
        "dtype_of_reference": "computed in float64 on CPU (eager attention) from the bf16 checkpoint, stored as float32",
        "text_config": TEXT, "vision_config": VISION, "preprocessor": PREPROCESSOR, "images": made,
        "greedy_steps": GREEDY_STEPS})
    save_file(tensors, os.path.join(d, "reference.safetensors"))
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d)) if os.path.isfile(os.path.join(d, f))}
    print(f"wrote {d}: {sum(sizes.values())} bytes: {sizes}")
    if manifest["check_problems"]:
        print(f"WARNING: {len(manifest['check_problems'])} report-only problem(s), see reference.json")


if __name__ == "__main__":
    main()

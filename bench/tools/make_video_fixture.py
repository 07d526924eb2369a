#!/usr/bin/env python3
"""Writes the video reference of tests/data/tiny-qwen35-vl: HF transformers' float64 numbers for
prompts with the fixture clip (issue 52).

    python3 bench/tools/make_video_fixture.py --out DIR      (the study `video_fixture` runs it)

Runs where torch and transformers 5.x are (the GPU machine; no internet, no video decoder:
the clip's frames are the ffmpeg CLI's RGB24 decoding committed beside it,
videos/clip64x48_4fps.mp4.rgb, which our decoder reproduces exactly -- tests/vision/test_video.cpp).
Writes DIR/tiny-qwen35-vl: a copy of the committed fixture plus video_reference.safetensors and
video_reference.json (copy those two into tests/data/tiny-qwen35-vl; refcheck
--reference .../video_reference.safetensors and CTest refcheck_tiny_vl_video_* read them).

For each case (OpenAI messages with one video_url part, and mm_processor_kwargs fps /
max_frames set on the video processor as the request's):
  * the chat template's text; HF's Qwen3VLProcessor on it with the clip's frames and their
    metadata (10 frames, 4 fps): input_ids (timestamps and pads expanded), pixel_values_videos
    ([N, 3 * 2 * 16 * 16], both frames of each temporal patch), video_grid_thw, the sampled
    frame indices; cross-checked (fatal) against this script's transcription of HF's rules
    (sample_frames, the video smart_resize, _calculate_timestamps);
  * the vision tower's merged output (get_video_features), get_rope_index's positions and
    delta, the logits at every prompt position and 16 greedy tokens with their logits
    (make_vl_fixture.greedy: prefill through the cache, then token by token), cross-checked
    against one full forward.
Stored per case c<i>. in the layout of reference.safetensors, the grid split as get_rope_index
splits it ((1, h, w) per temporal patch), so that vision_refcheck reads video cases as images.
"""
import argparse
import importlib.util
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(ROOT, "tests", "data", "tiny-qwen35-vl")
CLIP = "clip64x48_4fps.mp4"
CLIP_FRAMES, CLIP_FPS, CLIP_W, CLIP_H = 10, 4.0, 64, 48  # ffprobe: nb_read_frames=10, avg_frame_rate=4/1
VIDEO_PAD = 1023


def load_vl_module():
    spec = importlib.util.spec_from_file_location("make_vl_fixture", os.path.join(HERE, "make_vl_fixture.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vl = load_vl_module()


def fail(msg):
    sys.exit(f"make_video_fixture: error: {msg}")


def video_part(name):
    return {"type": "video_url", "video_url": {"url": f"videos/{name}"}}


# (name, OpenAI messages, mm_processor_kwargs)
CASES = [
    ("clip", [{"role": "user", "content": [video_part(CLIP), vl.text_part("What happens in this video?")]}], {}),
    ("clip_kwargs", [{"role": "system", "content": "You describe videos."},
                     {"role": "user", "content": [vl.text_part("Watch:"), video_part(CLIP),
                                                  vl.text_part("Then say what moved.")]}],
     {"fps": 4, "max_frames": 6}),
]


# ---- HF's rules, written out (fatal cross-checks) --------------------------------------------

def sample_indices(total, video_fps, fps, min_frames, max_frames):
    n = int(total / video_fps * fps)
    n = min(max(n, min_frames), max_frames, total)
    return np.linspace(0, total - 1, n).round().astype(int).tolist()


def video_smart_resize(t, h, w, tf, factor, min_px, max_px):
    h_bar, w_bar, t_bar = round(h / factor) * factor, round(w / factor) * factor, round(t / tf) * tf
    if t_bar * h_bar * w_bar > max_px:
        beta = math.sqrt(t * h * w / max_px)
        h_bar = max(factor, math.floor(h / beta / factor) * factor)
        w_bar = max(factor, math.floor(w / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_px:
        beta = math.sqrt(min_px / (t * h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    return h_bar, w_bar


def timestamps(indices, video_fps, merge):
    idx = list(indices)
    while len(idx) % merge:
        idx.append(idx[-1])
    ts = [i / video_fps for i in idx]
    return [(ts[i] + ts[i + merge - 1]) / 2 for i in range(0, len(ts), merge)]


def hf_messages(messages):
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = [{"type": "video"} if p["type"] == "video_url" else p for p in c]
        out.append({"role": m["role"], "content": c})
    return out


def run_processor(processor, text, frames, kwargs, notes, name):
    """HF's processor on the frames with their metadata; the video processor's fps /
    max_frames set as the request's (Qwen3VLVideoProcessor.sample_frames reads its own
    max_frames, so a per-call keyword would not reach it)."""
    from transformers.video_utils import VideoMetadata
    vp = processor.video_processor
    saved = {k: getattr(vp, k) for k in ("fps", "max_frames")}
    try:
        for k, v in kwargs.items():
            setattr(vp, k, v)
        meta = VideoMetadata(total_num_frames=CLIP_FRAMES, fps=CLIP_FPS, width=CLIP_W, height=CLIP_H,
                             duration=CLIP_FRAMES / CLIP_FPS, video_backend="ffmpeg-cli-rgb24")
        enc = processor(text=[text], videos=[frames], video_metadata=[meta], do_sample_frames=True,
                        return_tensors="pt", **({"fps": kwargs["fps"]} if "fps" in kwargs else {}))
        indices = getattr(meta, "frames_indices", None)
        if indices is None:
            notes[f"{name}.frames_indices"] = "not reported by this version; this script's sampling recorded"
        return enc, (list(map(int, indices)) if indices is not None else None), \
            {"fps": vp.fps, "min_frames": vp.min_frames, "max_frames": vp.max_frames}
    finally:
        for k, v in saved.items():
            setattr(vp, k, v)


def references(d):
    from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration
    tok = transformers.AutoTokenizer.from_pretrained(d)
    processor = AutoProcessor.from_pretrained(d)
    vcfg = json.load(open(os.path.join(d, "video_preprocessor_config.json")))
    raw = np.fromfile(os.path.join(d, "videos", CLIP + ".rgb"), dtype=np.uint8)
    if raw.size != CLIP_FRAMES * CLIP_H * CLIP_W * 3:
        fail("the clip's RGB frames are not 10 x 48 x 64 x 3 bytes")
    frames = raw.reshape(CLIP_FRAMES, CLIP_H, CLIP_W, 3)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    tcfg = model.config.get_text_config()
    tensors, cases, notes = {}, [], {}
    for i, (name, messages, kwargs) in enumerate(CASES):
        text = tok.apply_chat_template(hf_messages(messages), tokenize=False, add_generation_prompt=True)
        if "<|vision_start|><|video_pad|><|vision_end|>" not in text:
            fail(f"case {name}: the template did not render the video placeholder")
        enc, hf_indices, used = run_processor(processor, text, frames, kwargs, notes, name)
        ids = enc["input_ids"]
        pv = enc["pixel_values_videos"].to(torch.float64)
        grid = enc["video_grid_thw"]
        want_idx = sample_indices(CLIP_FRAMES, CLIP_FPS, used["fps"], used["min_frames"], used["max_frames"])
        if hf_indices is not None and hf_indices != want_idx:
            fail(f"case {name}: HF sampled frames {hf_indices}, HF's rules written out give {want_idx}")
        rh, rw = video_smart_resize(len(want_idx), CLIP_H, CLIP_W, 2, 32, vcfg["size"]["shortest_edge"],
                                    vcfg["size"]["longest_edge"])
        T = (len(want_idx) + 1) // 2
        if grid.tolist() != [[T, rh // 16, rw // 16]]:
            fail(f"case {name}: video_grid_thw {grid.tolist()}, expected {[[T, rh // 16, rw // 16]]}")
        ts = timestamps(want_idx, CLIP_FPS, 2)
        expanded = "".join(f"<{t:.1f} seconds><|vision_start|><|video_pad|><|vision_end|>" for t in ts)
        decoded = tok.decode(ids[0].tolist(), skip_special_tokens=False)
        collapsed = decoded
        while "<|video_pad|><|video_pad|>" in collapsed:
            collapsed = collapsed.replace("<|video_pad|><|video_pad|>", "<|video_pad|>")
        if expanded not in collapsed:
            fail(f"case {name}: the processor's text {collapsed!r} lacks {expanded!r}")
        tt = enc.get("mm_token_type_ids")
        if tt is None:
            tt = (ids == VIDEO_PAD).to(torch.int32) * 2
        with torch.no_grad():
            out = model.model.get_video_features(pv, grid, **vl.kwargs_for(model.model.get_video_features, return_dict=True))
        pooled = out.pooler_output if hasattr(out, "pooler_output") else out
        embeds = torch.cat(list(pooled)) if isinstance(pooled, (tuple, list)) else pooled
        fn = model.model.get_rope_index
        pos, delta = fn(ids, **vl.kwargs_for(fn, image_grid_thw=None, video_grid_thw=grid, mm_token_type_ids=tt,
                                             attention_mask=None))
        delta = int(delta.view(-1)[0])
        fwd = {"input_ids": ids, "pixel_values_videos": pv, "video_grid_thw": grid, "mm_token_type_ids": tt}
        fwd = {k: v for k, v in fwd.items()
               if k != "mm_token_type_ids" or "mm_token_type_ids" in __import__("inspect").signature(model.model.forward).parameters}
        n = ids.shape[1]
        prefill, toks, dec = vl.greedy(model, fwd, tcfg, delta, True)
        with torch.no_grad():
            full = dict(fwd, input_ids=torch.cat([ids, torch.tensor([toks[:-1]])], 1))
            if "mm_token_type_ids" in full:
                full["mm_token_type_ids"] = torch.cat([tt, torch.zeros(1, len(toks) - 1, dtype=tt.dtype)], 1)
            whole = model(**full).logits[0]
        rel = float(((whole[n - 1:] - dec).norm() / dec.norm()).item())
        if rel > 1e-6:
            fail(f"case {name}: decode vs one full forward rel err {rel:.3g}")
        print(f"checked: {name}: {n} tokens, frames {want_idx}, grid {grid.tolist()}, timestamps {ts}, "
              f"rope delta {delta}, decode vs full forward {rel:.2g}")
        p = f"c{i}."
        tensors[p + "input_ids"] = ids[0].to(torch.int32)
        tensors[p + "patches"] = pv.float().contiguous()
        split = [[1, int(grid[0, 1]), int(grid[0, 2])]] * int(grid[0, 0])
        tensors[p + "image_grid_thw"] = torch.tensor(split, dtype=torch.int32)
        tensors[p + "image_embeds"] = embeds.float().contiguous()
        tensors[p + "position_ids"] = pos.reshape(3, -1).to(torch.int32).contiguous()
        tensors[p + "rope_delta"] = torch.tensor([delta], dtype=torch.int32)
        tensors[p + "prefill_logits"] = prefill.float().contiguous()
        tensors[p + "greedy_tokens"] = torch.tensor(toks, dtype=torch.int32)
        tensors[p + "greedy_logits"] = dec.float().contiguous()
        cases.append({"index": i, "name": name, "messages": messages, "videos": [CLIP], "mm_processor_kwargs": kwargs,
                      "rendered": text, "expanded": collapsed, "prompt_len": n, "frames_indices": want_idx,
                      "timestamps": ts, "video_grid_thw": grid.tolist(), "rope_delta": delta, "greedy_ids": toks,
                      "greedy_text": tok.decode(toks, skip_special_tokens=False),
                      "decode_vs_full_forward_rel_err": rel})
    return tensors, {"cases": cases, "notes": notes, "video_processor_class": type(processor.video_processor).__name__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="a directory to write tiny-qwen35-vl/ into (must not hold one)")
    args = ap.parse_args()
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    d = os.path.join(args.out, "tiny-qwen35-vl")
    if os.path.exists(d):
        fail(f"{d} exists")
    shutil.copytree(FIXTURE, d)
    for stale in ("video_reference.safetensors", "video_reference.json"):
        if os.path.exists(os.path.join(d, stale)):
            os.remove(os.path.join(d, stale))
    tensors, manifest = references(d)
    manifest.update({"model": "tiny-qwen35-vl", "clip": {"file": CLIP, "frames": CLIP_FRAMES, "fps": CLIP_FPS,
                                                         "width": CLIP_W, "height": CLIP_H,
                                                         "rgb": CLIP + ".rgb (ffmpeg -sws_flags bilinear rgb24)"},
                     "transformers": transformers.__version__, "torch": torch.__version__,
                     "dtype_of_reference": "computed in float64 on CPU (eager attention) from the bf16 checkpoint, "
                                           "stored as float32"})
    save_file(tensors, os.path.join(d, "video_reference.safetensors"))
    with open(os.path.join(d, "video_reference.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    print(f"wrote {d}/video_reference.safetensors and video_reference.json ({len(manifest['cases'])} cases)")


if __name__ == "__main__":
    main()

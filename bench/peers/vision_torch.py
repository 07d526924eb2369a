#!/usr/bin/env python3
"""HF transformers' Qwen3.5 vision tower with SDPA, timed on the GPU: bench_vision's peer
(the study `vision`). Random bf16 weights of a released geometry, random pixel values of each
image size's smart_resize grid; the median of --iters forwards after a warm-up, between CUDA
events. A line per size on stdout; --json FILE writes the rows in bench_vision's result shape
(programs/bench_result: the same metric names, images/s), so the report sets the two side by
side.

    python3 bench/peers/vision_torch.py --geometry 27b --images 448x448,1024x1024 --batch 1 [--json FILE]
"""
import argparse
import json
import math
import sys
from datetime import datetime, timezone

import torch
import transformers
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5VisionConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

GEOMETRY = {
    "0.8b": dict(depth=12, hidden_size=768, num_heads=12, intermediate_size=3072, out_hidden_size=1024),
    "4b": dict(depth=24, hidden_size=1024, num_heads=16, intermediate_size=4096, out_hidden_size=2560),
    "9b": dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, out_hidden_size=4096),
    "27b": dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, out_hidden_size=5120),
}


def smart_resize(h, w, factor=32, lo=65536, hi=16777216):
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = max(factor, math.floor(h / beta / factor) * factor), max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--geometry", default="27b", choices=sorted(GEOMETRY))
    ap.add_argument("--images", default="448x448,1024x1024")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", help="write the result file here")
    args = ap.parse_args()
    rows = []
    cfg = Qwen3_5VisionConfig(**GEOMETRY[args.geometry], patch_size=16, temporal_patch_size=2, spatial_merge_size=2,
                              num_position_embeddings=2304)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Qwen3_5VisionModel(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    for item in args.images.split(","):
        w, h = (int(v) for v in item.split("x"))
        rh, rw = smart_resize(h, w)
        gh, gw = rh // 16, rw // 16
        grid = torch.tensor([[1, gh, gw]] * args.batch, device="cuda")
        pixels = torch.randn(args.batch * gh * gw, 3 * 2 * 16 * 16, device="cuda", dtype=torch.bfloat16)
        times = []
        with torch.no_grad():
            for i in range(args.iters + 1):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                model(pixels, grid_thw=grid)
                e1.record()
                torch.cuda.synchronize()
                if i > 0:
                    times.append(e0.elapsed_time(e1))
        times.sort()
        ms = times[len(times) // 2]
        row = {"metric": f"vision {args.geometry} {item} x{args.batch}", "value": args.batch / (ms / 1e3),
               "unit": "images/s", "image": item, "resized": f"{rw}x{rh}", "patches_per_image": gh * gw,
               "batch": args.batch, "step_ms": ms}
        rows.append(row)
        print(f"{row['metric']}: step {ms:.2f} ms, {row['value']:.1f} images/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"program": "vision_torch.py", "command": " ".join(sys.argv),
                       "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "version": f"transformers {transformers.__version__}, torch {torch.__version__}", "commit": "",
                       "gpu": torch.cuda.get_device_name(), "impl": "transformers Qwen3_5VisionModel, sdpa, bf16",
                       "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()

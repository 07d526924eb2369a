"""The 4-bit GPTQ and AWQ checkpoint layouts, in plain Python (no torch, no numpy).

Shared by make_random_checkpoint.py --gptq / --awq (which quantises with torch) and
make_int4_fixture.py (which quantises here, so that the fixture's bytes can be produced on a
machine without torch). The layouts are model/qwen35/int4.h's (docs/architecture.md, "INT4"):

GPTQ (AutoGPTQ / GPTQModel, v1 checkpoint_format): qweight I32 [K/8, N] with input k of
output n at nibble k % 8 of word [k/8][n]; qzeros I32 [K/G, N/8] with output n at nibble
n % 8 of word [g][n/8], holding zero - 1; scales F16 [K/G, N]; g_idx I32 [K]. Symmetric: the
zero is 8 (stored 7), scale = 2 amax / 15 per group.

AWQ (AutoAWQ, version gemm): qweight I32 [K, N/8] with output n at nibble
(0 4 1 5 2 6 3 7)[n % 8] of word [k][n/8]; qzeros I32 [K/G, N/8] the same, holding the zero;
scales F16 [K/G, N]. Asymmetric, as AutoAWQ's pseudo_quantize_tensor: scale = (max - min) / 15
(at least 1e-5), zero = clamp(-round(min / scale), 0, 15).

Codes: clamp(round(w / scale) + zero, 0, 15), the scale rounded to f16 first; rounding to
nearest even. The loaded value is scale * (code - zero), exact in f32.
"""
import array
import random
import struct

from fp8_layout import is_fp8_target

# AutoAWQ puts output order[i] of a group of eight at nibble i.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def is_int4_target(name):
    """The linear weights the 4-bit checkpoints written here quantise: the FP8 releases' set
    (q/k/v/o_proj, gate/up/down_proj, in_proj_qkv, in_proj_z, out_proj), not the MTP module
    (which the published GPTQ builds keep in bf16)."""
    return is_fp8_target(name) and not name.startswith("mtp.")


def gptq_config(group_size=128, desc_act=False):
    return {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": desc_act, "sym": True,
            "checkpoint_format": "gptq", "lm_head": False, "true_sequential": True, "damp_percent": 0.01,
            "dynamic": {r"-:.*linear_attn\.in_proj_[ab]": {}, r"-:.*visual.*": {}, r"-:mtp.*": {}}}


def awq_config(group_size=128):
    return {"quant_method": "awq", "bits": 4, "group_size": group_size, "zero_point": True, "version": "gemm",
            "modules_to_not_convert": ["in_proj_a", "in_proj_b", "visual", "mtp"]}


def f16(x):
    """x rounded to the nearest f16 (ties to even), as a Python float."""
    return struct.unpack("<e", struct.pack("<e", x))[0]


def quantize(values, rows, cols, method, group_size, g_idx=None):
    """4-bit round to nearest of a row-major [rows, cols] f32 weight, groups of group_size
    inputs (input k in group g_idx[k], default k // group_size). Returns (codes list [rows*cols]
    row-major, scales list [groups * rows] as [g][n], zeros list likewise, dequantised
    array('f') [rows*cols])."""
    groups = cols // group_size
    if g_idx is None:
        g_idx = [k // group_size for k in range(cols)]
    members = [[] for _ in range(groups)]
    for k, g in enumerate(g_idx):
        members[g].append(k)
    codes = [0] * (rows * cols)
    scales, zeros = [0.0] * (groups * rows), [0] * (groups * rows)
    deq = array.array("f", bytes(4 * rows * cols))
    for n in range(rows):
        base = n * cols
        for g, ks in enumerate(members):
            vals = [values[base + k] for k in ks]
            if method == "gptq":
                amax = max(abs(v) for v in vals)
                scale = f16(2.0 * amax / 15.0) if amax > 0 else 1.0
                zero = 8
            else:
                lo, hi = min(vals), max(vals)
                scale = f16(max(hi - lo, 1e-5) / 15.0)
                zero = min(max(-round(lo / scale), 0), 15)
            scales[g * rows + n], zeros[g * rows + n] = scale, zero
            for k, v in zip(ks, vals):
                c = min(max(round(v / scale) + zero, 0), 15)
                codes[base + k] = c
                deq[base + k] = scale * (c - zero)
    return codes, scales, zeros, deq


def act_order(cols, group_size, seed):
    """A g_idx as act order gives one: the inputs in a random order, group_size at a time."""
    order = list(range(cols))
    random.Random(seed).shuffle(order)
    g_idx = [0] * cols
    for i, k in enumerate(order):
        g_idx[k] = i // group_size
    return g_idx


def _words(nibbles_of, count):
    """array('I') of count words, word w = sum of nibble i << 4i over nibbles_of(w)."""
    out = array.array("I", bytes(4 * count))
    for w in range(count):
        v = 0
        for i, c in enumerate(nibbles_of(w)):
            v |= c << (4 * i)
        out[w] = v
    return out


def pack(module, codes, scales, zeros, rows, cols, method, group_size, g_idx=None):
    """{tensor name: (safetensors dtype, shape, raw bytes)} of one quantised weight [rows, cols]
    (codes row-major [rows*cols], scales / zeros as [g][n])."""
    groups = cols // group_size
    n8 = rows // 8
    out = {}
    if method == "gptq":
        qweight = _words(lambda w: [codes[(w % rows) * cols + 8 * (w // rows) + j] for j in range(8)], cols // 8 * rows)
        qzeros = _words(lambda w: [(zeros[(w // n8) * rows + 8 * (w % n8) + j] - 1) & 15 for j in range(8)], groups * n8)
        out[module + ".qweight"] = ("I32", [cols // 8, rows], qweight.tobytes())
        gi = g_idx if g_idx is not None else [k // group_size for k in range(cols)]
        out[module + ".g_idx"] = ("I32", [cols], array.array("i", gi).tobytes())
    else:
        qweight = _words(lambda w: [codes[(8 * (w % n8) + AWQ_ORDER[i]) * cols + w // n8] for i in range(8)], cols * n8)
        qzeros = _words(lambda w: [zeros[(w // n8) * rows + 8 * (w % n8) + AWQ_ORDER[i]] for i in range(8)], groups * n8)
        out[module + ".qweight"] = ("I32", [cols, n8], qweight.tobytes())
    out[module + ".qzeros"] = ("I32", [groups, n8], qzeros.tobytes())
    out[module + ".scales"] = ("F16", [groups, rows], struct.pack(f"<{len(scales)}e", *scales))
    return out

"""The block-wise FP8 layout of Qwen's -FP8 releases, in plain Python (no torch, no numpy).

Shared by make_random_checkpoint.py --fp8 (which quantises with torch) and make_fp8_fixture.py
(which quantises here, so that the fixture's bytes can be produced and checked on a machine
without torch). The rules are serve's --quantization fp8 (model/qwen35/fp8.h): one f32 scale
per 128x128 block (ceil-divided, so blocks at the right and bottom edges may be partial),
scale = amax / 448 (1 for an all-zero block), code = e4m3fn(w / scale) rounded to nearest even
and saturating at +-448; the loaded weight is decode(code) * scale in f32.

Every f32 operation is done in Python's double and rounded to f32 (struct's 'f'): for one
division or multiplication of two f32 values that gives the correctly rounded f32 result, as
the C++ computes it.
"""
import array
import math
import struct

FP8_BLOCK, E4M3_MAX = 128, 448.0
# What Qwen's FP8 releases quantise; the rest (embedding, lm_head, norms, conv1d, A_log,
# dt_bias, in_proj_a/b, the vision tower) stays bf16/f32.
FP8_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "in_proj_qkv",
               "in_proj_z", "out_proj")
FP8_QUANTIZATION_CONFIG = {
    "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [FP8_BLOCK, FP8_BLOCK],
    "modules_to_not_convert": ["lm_head", "model.language_model.embed_tokens", "linear_attn.in_proj_a",
                               "linear_attn.in_proj_b", "linear_attn.conv1d"],
}


def is_fp8_target(name):
    return (name.endswith(".weight") and name.split(".")[-2] in FP8_TARGETS
            and not name.startswith("model.visual."))


def f32(x):
    """x rounded to the nearest f32 (ties to even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def e4m3_to_float(code):
    """The value of an e4m3fn code (NaN for 0x7f and 0xff)."""
    e, m = (code >> 3) & 0xF, code & 7
    if e == 0xF and m == 7:
        return math.nan
    mag = math.ldexp(m, -9) if e == 0 else math.ldexp(8 + m, e - 10)
    return -mag if code & 0x80 else mag


def float_to_e4m3(x):
    """The nearest e4m3fn code to x (an f32 value): ties to even, |x| >= 448 saturates, NaN -> 0x7f."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= E4M3_MAX:
        return sign | 0x7E
    if a < 2.0 ** -6:  # subnormals: steps of 2^-9 (a * 512 is exact; round() ties to even)
        return sign | int(round(a * 512.0))
    mant, exp = math.frexp(a)  # a = mant * 2^exp, mant in [0.5, 1)
    q = int(round(mant * 16.0))  # 1 implicit + 3 stored bits, ties to even; 16 carries into the exponent
    if q == 16:
        q, exp = 8, exp + 1
    return sign | ((exp + 6) << 3) | (q - 8)  # biased exponent (exp - 1) + 7


E4M3_VALUES = [e4m3_to_float(c) for c in range(256)]


def bf16_to_f32(raw):
    """bf16 bytes (little-endian) as an array('f') of their exact f32 values."""
    halves = array.array("H")
    halves.frombytes(raw)
    words = array.array("I", (h << 16 for h in halves))
    out = array.array("f")
    out.frombytes(words.tobytes())
    return out


def block_shape(rows, cols):
    """The scale grid of a [rows, cols] weight: (ceil(rows/128), ceil(cols/128))."""
    return -(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)


def quantize(values, rows, cols):
    """Block-wise e4m3 of a row-major [rows, cols] f32 matrix: (codes bytes [rows*cols],
    scales array('f') [ceil(rows/128) * ceil(cols/128)], dequantised array('f') [rows*cols])."""
    srows, scols = block_shape(rows, cols)
    codes = bytearray(rows * cols)
    scales = array.array("f", bytes(4 * srows * scols))
    deq = array.array("f", bytes(4 * rows * cols))
    for bi in range(srows):
        r0, r1 = bi * FP8_BLOCK, min((bi + 1) * FP8_BLOCK, rows)
        for bj in range(scols):
            c0, c1 = bj * FP8_BLOCK, min((bj + 1) * FP8_BLOCK, cols)
            amax = max(abs(values[i * cols + j]) for i in range(r0, r1) for j in range(c0, c1))
            scale = f32(amax / E4M3_MAX) if amax > 0 else 1.0
            scales[bi * scols + bj] = scale
            for i in range(r0, r1):
                base = i * cols
                for k in range(base + c0, base + c1):
                    c = float_to_e4m3(f32(values[k] / scale))
                    codes[k] = c
                    deq[k] = E4M3_VALUES[c] * scale  # exact in double, rounded to f32 by the array
    return bytes(codes), scales, deq

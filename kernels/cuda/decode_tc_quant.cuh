// Q8_0 / Q4_0 fragments for the tensor-core decode kernel (decode_tc.cuh): how raw ggml rows in
// shared memory become MMA operands with as few instructions as possible, since the quantised
// kernels are bound by instructions per 16-token tile rather than by bytes.
//
// K (the QK product) goes through the integer tensor cores: K's bytes are the A operand as
// they are (Q8_0: int8; Q4_0: the nibbles masked out as u8), and q enters as two int8 digits
// per element, q ~ sigma * (d0 + d1 / 254) with one sigma per head (its largest |q| / 127), so
// 254 * (K.d0) + (K.d1) is one exact int32 per 32-element ggml block (|.| < 2^28); the block's
// f16 scale then multiplies it in fp32. The digits carry ~15 bits of q relative to the head's
// largest element (|error| <= max|q| / 64516 per element). Q4_0's offset of 8 is folded into
// the accumulator's starting value, -8 * (254 * sum d0 + sum d1) per head and block.
//
// V (the PV product) stays on f16 MMA; its bytes become exact f16 integers with one LOP3 and
// one HSUB2 per pair (see v_fragments). The block scale dv multiplies P in f16 pairs: with
// p = ph + pl split once per tile, x = ph*dv rounded, its exact residual from one FMA, plus
// pl*dv, keeps ~22 bits of p*dv (scale_p).
//
// Rows of Q8_0 blocks are 34 bytes, so every other block's bytes sit 2 bytes off a word; the
// loaders take that offset (a constant once the caller's loop over blocks is unrolled) and
// stitch words with PRMT.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace ds::cuda::detail {

// D = A * B + C, m16n8k32, A s8 (Q8_0) or u8 (Q4_0 nibbles), B s8, int32 accumulators.
template <bool kUnsignedA>
__device__ __forceinline__ void imma16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const int (&c)[4]) {
  if constexpr (kUnsignedA)
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
  else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

template <uint8_t kLut>
__device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
}

__device__ __forceinline__ uint32_t lds_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// 4 bytes at p, p = m (mod 4), m in {0, 2}.
__device__ __forceinline__ uint32_t lds4(const uint8_t* p, int m) {
  if (m == 0) return lds_u32(p);
  return __byte_perm(lds_u32(p - 2), lds_u32(p + 2), 0x5432);
}
// 8 bytes at p, p = m (mod 8), m even.
__device__ __forceinline__ uint2 lds8(const uint8_t* p, int m) {
  if (m == 0) return *reinterpret_cast<const uint2*>(p);
  if (m == 4) return make_uint2(lds_u32(p), lds_u32(p + 4));
  if (m == 2) {
    const uint2 a = *reinterpret_cast<const uint2*>(p - 2);
    const uint32_t b = lds_u32(p + 6);
    return make_uint2(__byte_perm(a.x, a.y, 0x5432), __byte_perm(a.y, b, 0x5432));
  }
  const uint32_t a = lds_u32(p - 2);
  const uint2 b = *reinterpret_cast<const uint2*>(p + 2);
  return make_uint2(__byte_perm(a, b.x, 0x5432), __byte_perm(b.x, b.y, 0x5432));
}

__device__ __forceinline__ float f16_bits_f32(uint32_t h) { return __half2float(__ushort_as_half(static_cast<uint16_t>(h))); }

// ---- K: the A fragment of one 32-element block for the m16n8k32 integer MMA.
// Lane (gid, tig) holds rows gid and gid + 8 (tokens), k-slots 4tig..4tig+3 and 16+4tig..+3.
// Q8_0: those slots are the block's bytes 8tig..8tig+7 (one 8-byte read per row);
// Q4_0: bytes 4tig..4tig+3, low nibbles in the first slots (elements 4tig..), high nibbles
// in the second (elements 16+4tig..). q_k_dim gives q's matching element.
template <bool kQ8>
__device__ __forceinline__ int q_k_dim(int b, int reg, int i, int tig) {
  return kQ8 ? 32 * b + 8 * tig + 4 * reg + i : 32 * b + 16 * reg + 4 * tig + i;
}
template <bool kQ8>
__device__ __forceinline__ void k_fragment(const uint8_t* r0, const uint8_t* r1, int b, int tig, uint32_t (&A)[4],
                                           float& dk0, float& dk1) {
  // Rows start 8-byte aligned (row bytes 272/136 for Q8_0, 144/72 for Q4_0, from a 128-byte base).
  if constexpr (kQ8) {
    const int o = 34 * b + 2 + 8 * tig;
    const uint2 x0 = lds8(r0 + o, (34 * b + 2) % 8), x1 = lds8(r1 + o, (34 * b + 2) % 8);
    A[0] = x0.x, A[1] = x1.x, A[2] = x0.y, A[3] = x1.y;
    dk0 = f16_bits_f32(lds_u16(r0 + 34 * b));
    dk1 = f16_bits_f32(lds_u16(r1 + 34 * b));
  } else {
    const int o = 18 * b + 2 + 4 * tig;
    const uint32_t w0 = lds4(r0 + o, (18 * b + 2) % 4), w1 = lds4(r1 + o, (18 * b + 2) % 4);
    A[0] = w0 & 0x0F0F0F0Fu, A[1] = w1 & 0x0F0F0F0Fu;
    A[2] = (w0 >> 4) & 0x0F0F0F0Fu, A[3] = (w1 >> 4) & 0x0F0F0F0Fu;
    dk0 = f16_bits_f32(lds_u16(r0 + 18 * b));
    dk1 = f16_bits_f32(lds_u16(r1 + 18 * b));
  }
}

// ---- V: f16 operands of one 32-element block for the PV product (A = V^T, m16n8k16).
// rows: the lane's tokens 2tig, 2tig+1, 2tig+8, 2tig+9. A0 is m-tile 2b, A1 m-tile 2b+1, in
// the head_dim order of v_dim (decode_tc.cuh). Bytes 0 and 2 of z become f16 1024 + byte in
// one LOP3 ((z & mask) | 0x6400, LUT 0xEA; for Q8_0 with the sign bit flipped on the way,
// LUT 0x6A: b ? a ^ c : c), and one HSUB2 removes the bias exactly. (Leaving the bias in the
// operand and subtracting bias * sum(p dv) at the end saves the HSUB2 but costs precision: the
// fp32 accumulators then hold values 9x (Q8_0) to 129x (Q4_0) larger than the result, and the
// tensor cores' accumulation error grew 10-100x, to 2.3e-4 in the GPU tests.)
__device__ __forceinline__ uint32_t hsub2_u32(uint32_t x, uint32_t y) {
  const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&x), *reinterpret_cast<const __half2*>(&y));
  return *reinterpret_cast<const uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t q8_f16x2(uint32_t z) {
  return hsub2_u32(lop3<0x6A>(z, 0x00ff00ffu, 0x64806480u), 0x64806480u);  // - 1152
}
// Q4_0 nibbles n of bytes 0 and 2 of z as f16 n - 8: low nibbles 1024 + n - 1032; high
// nibbles (1024 + 16 n) / 16 - 72, exact in one HFMA2.
__device__ __forceinline__ uint32_t nib_lo_f16x2(uint32_t z) {
  return hsub2_u32(lop3<0xEA>(z, 0x000f000fu, 0x64006400u), 0x64086408u);
}
__device__ __forceinline__ uint32_t nib_hi_f16x2(uint32_t z) {
  const uint32_t x = lop3<0xEA>(z, 0x00f000f0u, 0x64006400u);
  const __half2 r = __hfma2(*reinterpret_cast<const __half2*>(&x), __half2half2(__ushort_as_half(0x2C00)),
                            __half2half2(__ushort_as_half(0xD480)));  // x * 1/16 - 72
  return *reinterpret_cast<const uint32_t*>(&r);
}

template <bool kQ8>
__device__ __forceinline__ void v_fragments(const uint8_t* const (&rows)[4], int b, int gid, uint32_t (&A0)[4],
                                            uint32_t (&A1)[4]) {
  if constexpr (kQ8) {
    // Lane gid reads the block's bytes 4gid..4gid+3 (B0..B3) of each token; z01 and y01
    // interleave tokens 0 and 1 as [t0.B0, t0.B1, t1.B0, t1.B1] and [t0.B2, t0.B3, t1.B2, t1.B3].
    uint32_t z01, y01, z23, y23;
    if ((34 * b + 2) % 4 == 0) {
      const int o = 34 * b + 2 + 4 * gid;
      const uint32_t w0 = lds_u32(rows[0] + o), w1 = lds_u32(rows[1] + o);
      const uint32_t w2 = lds_u32(rows[2] + o), w3 = lds_u32(rows[3] + o);
      z01 = __byte_perm(w0, w1, 0x5410), y01 = __byte_perm(w0, w1, 0x7632);
      z23 = __byte_perm(w2, w3, 0x5410), y23 = __byte_perm(w2, w3, 0x7632);
    } else {  // the 4 bytes straddle two words: B0 B1 end one, B2 B3 start the next
      const int o = 34 * b + 4 * gid;
      const uint32_t a0 = lds_u32(rows[0] + o), a1 = lds_u32(rows[1] + o);
      const uint32_t a2 = lds_u32(rows[2] + o), a3 = lds_u32(rows[3] + o);
      const uint32_t c0 = lds_u32(rows[0] + o + 4), c1 = lds_u32(rows[1] + o + 4);
      const uint32_t c2 = lds_u32(rows[2] + o + 4), c3 = lds_u32(rows[3] + o + 4);
      z01 = __byte_perm(a0, a1, 0x7632), y01 = __byte_perm(c0, c1, 0x5410);
      z23 = __byte_perm(a2, a3, 0x7632), y23 = __byte_perm(c2, c3, 0x5410);
    }
    A0[0] = q8_f16x2(z01), A0[1] = q8_f16x2(z01 >> 8), A0[2] = q8_f16x2(z23), A0[3] = q8_f16x2(z23 >> 8);
    A1[0] = q8_f16x2(y01), A1[1] = q8_f16x2(y01 >> 8), A1[2] = q8_f16x2(y23), A1[3] = q8_f16x2(y23 >> 8);
  } else {
    // Lane gid reads bytes 2gid, 2gid+1: low nibbles are elements 2gid, 2gid+1 (m-tile 2b),
    // high nibbles 16+2gid, 16+2gid+1 (m-tile 2b+1).
    const int o = 18 * b + 2 + 2 * gid;
    const uint32_t z01 = __byte_perm(lds_u16(rows[0] + o), lds_u16(rows[1] + o), 0x5410);
    const uint32_t z23 = __byte_perm(lds_u16(rows[2] + o), lds_u16(rows[3] + o), 0x5410);
    const uint32_t s01 = z01 >> 8, s23 = z23 >> 8;
    A0[0] = nib_lo_f16x2(z01), A0[1] = nib_lo_f16x2(s01), A0[2] = nib_lo_f16x2(z23), A0[3] = nib_lo_f16x2(s23);
    A1[0] = nib_hi_f16x2(z01), A1[1] = nib_hi_f16x2(s01), A1[2] = nib_hi_f16x2(z23), A1[3] = nib_hi_f16x2(s23);
  }
}
// The f16 scales of block b of two token rows, as one f16x2.
__device__ __forceinline__ uint32_t scale_pair(const uint8_t* ra, const uint8_t* rb, int block_bytes, int b) {
  return __byte_perm(lds_u16(ra + block_bytes * b), lds_u16(rb + block_bytes * b), 0x5410);
}
// (ph + pl) * dv as an f16 hi + lo pair: hi = ph*dv rounded, lo = the exact residual of that
// rounding (one FMA) plus pl*dv.
__device__ __forceinline__ void scale_p(uint32_t ph, uint32_t pl, uint32_t dv, uint32_t& xh, uint32_t& xl) {
  const __half2 h = *reinterpret_cast<const __half2*>(&ph), l = *reinterpret_cast<const __half2*>(&pl);
  const __half2 d = *reinterpret_cast<const __half2*>(&dv);
  const __half2 hi = __hmul2_rn(h, d);
  const __half2 lo = __hfma2(l, d, __hfma2(h, d, __hneg2(hi)));
  xh = *reinterpret_cast<const uint32_t*>(&hi);
  xl = *reinterpret_cast<const uint32_t*>(&lo);
}

}  // namespace ds::cuda::detail

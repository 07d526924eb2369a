// GEMMs with FP8 weights (fp8_e4m3 codes and f32 block scales, kernels/tensor.h Fp8Scales):
// out [M, N] (+)= x [M, K] · wᵀ with w = code * scale, x bf16, fp32 accumulation.
//
// Decode steps read the codes directly and dequantise in registers, so a step streams one
// byte per weight: the one-row GEMV (and its SwiGLU variant) as in gemv.cu, a warp per
// output row with 16 codes per 16-byte load (gemv_kernel over an FP8 row reader); the skinny
// GEMM as in skinny_gemm.cu, the x rows as the 8-column side of mma.m16n8k16 and K split
// over the block's warps, for 2 to 64 rows (up to 8 column tiles share each converted
// weight fragment, so the weights are still read once). Each
// 128-column block's products are summed before its scale is applied, so a scale costs one
// multiply per 16 codes (GEMV) or per 64-column chunk (skinny), not one per weight.
//
// A code becomes an f16 by moving its bits (sign, then exponent and mantissa one place
// right): the f16 is the e4m3 value times 2^-8, exactly, subnormals included (an e4m3
// subnormal lands on an f16 subnormal of the same mantissa), and 2^8 is folded into the
// scale. From f16 it widens to f32 (GEMV) or to bf16 for the tensor cores (exact: e4m3 has
// 3 mantissa bits). Larger steps go to cuBLAS over a bf16 copy of the weight
// (dequantize_fp8_bf16, cuda_gemm.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_gemm.cuh"

namespace ds::cuda::ops {
namespace {

constexpr float kF16Unbias = 256.0f;  // the f16 of a code is its value times 2^-8

// Codes c0..c3 of a word (c0 lowest) as two f16 pairs (c0, c1) and (c2, c3), each value * 2^-8.
__device__ __forceinline__ void fp8x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t a = __byte_perm(w, 0, 0x1404), b = __byte_perm(w, 0, 0x3424);  // codes in the high bytes
  lo = (a & 0x80008000u) | ((a >> 1) & 0x3f803f80u);
  hi = (b & 0x80008000u) | ((b >> 1) & 0x3f803f80u);
}

__device__ __forceinline__ float2 f16x2_to_f32(uint32_t h) { return __half22float2(*reinterpret_cast<const __half2*>(&h)); }

__device__ __forceinline__ uint32_t f16x2_to_bf16x2(uint32_t h) {
  const __nv_bfloat162 b = __float22bfloat162_rn(f16x2_to_f32(h));
  return *reinterpret_cast<const uint32_t*>(&b);
}

// Sum of 16 codes (values * 2^-8) times 16 bf16 x values (x0: the first 8, x1: the next 8).
__device__ __forceinline__ float dot16(const uint4& codes, const uint4& x0, const uint4& x1) {
  const uint32_t c[4] = {codes.x, codes.y, codes.z, codes.w};
  const uint32_t xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo, hi;
    fp8x4_to_f16x2(c[i], lo, hi);
    const float2 w0 = f16x2_to_f32(lo), w1 = f16x2_to_f32(hi);
    const uint32_t xa = xs[2 * i], xb = xs[2 * i + 1];
    s = fmaf(w0.x, __uint_as_float(xa << 16), s);
    s = fmaf(w0.y, __uint_as_float(xa & 0xffff0000u), s);
    s = fmaf(w1.x, __uint_as_float(xb << 16), s);
    s = fmaf(w1.y, __uint_as_float(xb & 0xffff0000u), s);
  }
  return s;
}

// ---- one row

// An FP8 weight row for warp_dots (decode_gemm.cuh): 16-byte vector v holds codes
// 16v..16v+15, inside 128-column block v / 8, whose scale multiplies their 16 products.
struct Fp8Row {
  static constexpr int kPerVector = 16;
  struct X {
    uint4 lo, hi;  // the 16 bf16 x values of a vector
  };
  const uint4* w;
  const float* scales;  // the row's scales, one per 128 columns
  __device__ __forceinline__ uint4 load(int64_t v) const { return __ldg(w + v); }
  __device__ __forceinline__ static X load_x(const uint16_t* x, int64_t v) {
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    return {__ldg(xv + 2 * v), __ldg(xv + 2 * v + 1)};
  }
  __device__ __forceinline__ float accumulate(float sum, const uint4& codes, const X& x, int64_t v) const {
    return fmaf(dot16(codes, x.lo, x.hi), __ldg(scales + v / 8), sum);
  }
  __device__ __forceinline__ float finish(float sum) const { return sum * kF16Unbias; }
};

__device__ __forceinline__ const float* scale_row(const Fp8Weight& w, int64_t n) {
  return w.scales + (n >> w.row_shift) * w.scale_cols;
}

// An FP8 weight as gemv_kernel reads it.
struct Fp8Rows {
  Fp8Weight w;
  __device__ __forceinline__ Fp8Row row(int64_t n, int64_t K) const {
    return {reinterpret_cast<const uint4*>(w.codes + n * K), scale_row(w, n)};
  }
};

// ---- 2 to 64 rows

constexpr int kSkinnyWarps = 8;
constexpr int kChunk = 64;    // k per chunk: 16 codes of each of a lane's two weight rows

// A block owns weight rows n0..n0+15; lane (gid, tig) loads codes 16·tig..16·tig+15 of each
// 64-column chunk of rows gid and gid + 8, and the same 16 x values of x row gid, so word j
// of the lane's A and B registers is the same k (the k order inside a chunk only has to
// agree between A and B). Warp w takes chunks w, w + 8, ...; a chunk lies inside one
// 128-column block, so its four mma steps go to a fresh tile that is scaled once per row.
// NT column tiles of 8 x rows (x rows 8t..8t+7 in tile t): the weights are converted once
// per chunk and used by every tile, so a step of up to 8·NT rows streams them once.
template <int NT>
__global__ void __launch_bounds__(kSkinnyWarps * 32, 2) skinny_gemm_fp8_kernel(Fp8Weight w, const uint16_t* __restrict__ x,
                                                                            int M, int64_t N, int64_t K,
                                                                            float* __restrict__ out, bool accumulate) {
  // Chunks of codes in flight per lane: as many as the registers of two blocks per SM allow.
  constexpr int kInFlight = NT == 1 ? 4 : NT <= 4 ? 2 : 1;
  __shared__ float part[kSkinnyWarps][NT * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t ra = n0 + gid < N ? n0 + gid : N - 1, rb = n0 + gid + 8 < N ? n0 + gid + 8 : N - 1;
  const uint4* wa = reinterpret_cast<const uint4*>(w.codes + ra * K) + tig;
  const uint4* wb = reinterpret_cast<const uint4*>(w.codes + rb * K) + tig;
  const float* sa = scale_row(w, ra);
  const float* sb = scale_row(w, rb);
  const int64_t chunks = K / kChunk;
  const int64_t mine = chunks > warp ? (chunks - warp + kSkinnyWarps - 1) / kSkinnyWarps : 0;
  uint4 A[kInFlight][2];
  auto load = [&](int u, int64_t j) {
    const int64_t v = (warp + kSkinnyWarps * j) * 4;  // 4 vectors of 16 codes per chunk row
    A[u][0] = __ldg(wa + v);
    A[u][1] = __ldg(wb + v);
  };
  skinny_start<kInFlight>(mine, load);
  const SkinnyX<NT> xs = skinny_x_rows<NT>(x, M, K, gid, 2 * tig);
  float c[NT][4] = {};
  skinny_chunks<kInFlight>(mine, [&](int u, int64_t j) {
    const int64_t chunk = warp + kSkinnyWarps * j;
    const float scale_a = __ldg(sa + chunk / 2), scale_b = __ldg(sb + chunk / 2);
    // Word s of the codes: pairs 2s and 2s + 1 of the lane's 16 k, as bf16.
    uint32_t a[8], b[8];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      uint32_t lo, hi;
      fp8x4_to_f16x2(word(A[u][0], s), lo, hi);
      a[2 * s] = f16x2_to_bf16x2(lo);
      a[2 * s + 1] = f16x2_to_bf16x2(hi);
      fp8x4_to_f16x2(word(A[u][1], s), lo, hi);
      b[2 * s] = f16x2_to_bf16x2(lo);
      b[2 * s + 1] = f16x2_to_bf16x2(hi);
    }
    if (j + kInFlight < mine) load(u, j + kInFlight);  // refill this slot early
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4 x0 = xs.ok[t] ? __ldg(xs.r[t] + chunk * 8) : make_uint4(0, 0, 0, 0);
      const uint4 x1 = xs.ok[t] ? __ldg(xs.r[t] + chunk * 8 + 1) : make_uint4(0, 0, 0, 0);
      const uint32_t xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float acc[4] = {};
#pragma unroll
      for (int s = 0; s < 4; ++s) mma_bf16(acc, a[2 * s], b[2 * s], a[2 * s + 1], b[2 * s + 1], xw[2 * s], xw[2 * s + 1]);
      c[t][0] = fmaf(scale_a, acc[0], c[t][0]);
      c[t][1] = fmaf(scale_a, acc[1], c[t][1]);
      c[t][2] = fmaf(scale_b, acc[2], c[t][2]);
      c[t][3] = fmaf(scale_b, acc[3], c[t][3]);
    }
  });
  skinny_epilogue<kSkinnyWarps, NT>(part, c, n0, M, N, out, accumulate, kF16Unbias);
}

// ---- dequantisation for cuBLAS

// out[n, k] = bf16(code * scale), 8 codes per thread (K a multiple of 8) or one.
template <int kPer>
__global__ void dequantize_fp8_kernel(Fp8Weight w, int64_t N, int64_t K, uint16_t* __restrict__ out) {
  wait_for_previous_kernel();  // out is scratch that the previous GEMM may still read
  const int64_t groups = N * (K / kPer);
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = g / (K / kPer), k = (g % (K / kPer)) * kPer;
    const float scale = scale_row(w, n)[k / 128] * kF16Unbias;
    const uint8_t* src = w.codes + n * K + k;
    uint16_t* dst = out + n * K + k;
    if constexpr (kPer == 8) {
      const uint2 c = *reinterpret_cast<const uint2*>(src);
      const uint32_t words[2] = {c.x, c.y};
      uint32_t packed[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        uint32_t lo, hi;
        fp8x4_to_f16x2(words[i], lo, hi);
        const float2 a = f16x2_to_f32(lo), b = f16x2_to_f32(hi);
        packed[2 * i] = detail::f32_to_bf16_bits(a.x * scale) | (uint32_t{detail::f32_to_bf16_bits(a.y * scale)} << 16);
        packed[2 * i + 1] = detail::f32_to_bf16_bits(b.x * scale) | (uint32_t{detail::f32_to_bf16_bits(b.y * scale)} << 16);
      }
      *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    } else {
      uint32_t lo, hi;
      fp8x4_to_f16x2(*src, lo, hi);
      *dst = detail::f32_to_bf16_bits(f16x2_to_f32(lo).x * scale);
    }
  }
}

}  // namespace

bool gemv_fp8_supported(int64_t M, int64_t K) { return M == 1 && K > 0 && K % 16 == 0; }
bool skinny_gemm_fp8_supported(int64_t M, int64_t K) {
  return M >= 2 && M <= kSkinnyFp8MaxRows && K > 0 && K % kChunk == 0;
}

void gemv_fp8(const Fp8Weight& w, const uint16_t* x, int64_t N, int64_t K, float* out, bool accumulate, Stream stream) {
  if (!gemv_fp8_supported(1, K)) throw std::invalid_argument("cuda backend: fp8 gemv: unsupported shape");
  launch_dependent("gemm (fp8 gemv) kernel", gemv_kernel<Fp8Rows>, dim3(grid_for(N, kGemvWarps)),
                   dim3(kGemvWarps * 32), 0, stream, Fp8Rows{w}, x, N, K, out, accumulate);
}

void gemv_swiglu_fp8(const Fp8Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                     Stream stream) {
  if (!gemv_fp8_supported(1, K)) throw std::invalid_argument("cuda backend: fp8 gate_up + swiglu: unsupported shape");
  launch_gemv_swiglu(Fp8Rows{w}, x, inter, K, act, act_type, stream);
}

void skinny_gemm_fp8(const Fp8Weight& w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                     bool accumulate, Stream stream) {
  if (!skinny_gemm_fp8_supported(M, K)) throw std::invalid_argument("cuda backend: fp8 skinny gemm: unsupported shape");
  const dim3 grid(grid_for(N, 16)), block(kSkinnyWarps * 32);
  const char* name = "gemm (fp8 skinny, tensor core) kernel";
  const int m = static_cast<int>(M);
  if (M <= 8)
    launch_dependent(name, skinny_gemm_fp8_kernel<1>, grid, block, 0, stream, w, x, m, N, K, out, accumulate);
  else if (M <= 16)
    launch_dependent(name, skinny_gemm_fp8_kernel<2>, grid, block, 0, stream, w, x, m, N, K, out, accumulate);
  else if (M <= 32)
    launch_dependent(name, skinny_gemm_fp8_kernel<4>, grid, block, 0, stream, w, x, m, N, K, out, accumulate);
  else
    launch_dependent(name, skinny_gemm_fp8_kernel<8>, grid, block, 0, stream, w, x, m, N, K, out, accumulate);
}

void dequantize_fp8_bf16(const Fp8Weight& w, int64_t N, int64_t K, uint16_t* out, Stream stream) {
  if (N == 0 || K == 0) return;
  const int threads = 256;
  const bool vec = K % 8 == 0;
  const int64_t groups = N * (vec ? K / 8 : K);
  const unsigned blocks = grid_for(groups < int64_t{1} << 22 ? groups : int64_t{1} << 22, threads);
  if (vec)
    launch_dependent("fp8 dequantise kernel", dequantize_fp8_kernel<8>, dim3(blocks), dim3(threads), 0, stream, w, N, K,
                     out);
  else
    launch_dependent("fp8 dequantise kernel", dequantize_fp8_kernel<1>, dim3(blocks), dim3(threads), 0, stream, w, N, K,
                     out);
}

}  // namespace ds::cuda::ops

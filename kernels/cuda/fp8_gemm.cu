// GEMMs with FP8 weights (fp8_e4m3 codes and f32 block scales, kernels/tensor.h Fp8Scales):
// out [M, N] (+)= x [M, K] · wᵀ with w = code * scale, x bf16, fp32 accumulation.
//
// Decode steps read the codes directly and dequantise in registers, so a step streams one
// byte per weight: the one-row GEMV (and its SwiGLU variant) as in gemv.cu, a warp per
// output row with 16 codes per 16-byte load; the 2-8-row skinny GEMM as in skinny_gemm.cu,
// the x rows as the 8-column side of mma.m16n8k16 and K split over the block's warps. Each
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

constexpr int kGemvWarps = 4;  // one output row (or row pair) per warp, as gemv.cu
constexpr int kGemvLoads = 8;  // 16-byte code loads in flight per lane (a 4096-wide row at once)

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

__global__ void __launch_bounds__(kGemvWarps * 32) gemv_fp8_kernel(Fp8Weight w, const uint16_t* __restrict__ x, int64_t N,
                                                                   int64_t K, float* __restrict__ out, bool accumulate) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (n >= N) return;
  const Fp8Row rows[1] = {{reinterpret_cast<const uint4*>(w.codes + n * K), scale_row(w, n)}};
  const bool lead = (threadIdx.x & 31) == 0;
  float prev = 0.0f;
  float s[1];
  warp_dots<kGemvLoads>(rows, x, K, s, [&] {
    if (accumulate && lead) prev = out[n];
  });
  if (lead) out[n] = prev + s[0];
}

template <bool kBf16Out>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_swiglu_fp8_kernel(Fp8Weight w, const uint16_t* __restrict__ x,
                                                                          int64_t inter, int64_t K,
                                                                          void* __restrict__ act) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (i >= inter) return;
  const Fp8Row rows[2] = {{reinterpret_cast<const uint4*>(w.codes + i * K), scale_row(w, i)},
                          {reinterpret_cast<const uint4*>(w.codes + (inter + i) * K), scale_row(w, inter + i)}};
  float s[2];
  warp_dots<kGemvLoads>(rows, x, K, s, [] {});
  if ((threadIdx.x & 31) == 0) store_act<kBf16Out>(act, i, silu_f(s[0]) * s[1]);
}

// ---- 2 to 8 rows

constexpr int kSkinnyWarps = 8;
constexpr int kChunk = 64;    // k per chunk: 16 codes of each of a lane's two weight rows
constexpr int kInFlight = 4;  // chunks of codes in flight per lane (104 registers: two blocks per SM)

// A block owns weight rows n0..n0+15; lane (gid, tig) loads codes 16·tig..16·tig+15 of each
// 64-column chunk of rows gid and gid + 8, and the same 16 x values of x row gid, so word j
// of the lane's A and B registers is the same k (the k order inside a chunk only has to
// agree between A and B). Warp w takes chunks w, w + 8, ...; a chunk lies inside one
// 128-column block, so its four mma steps go to a fresh tile that is scaled once per row.
__global__ void __launch_bounds__(kSkinnyWarps * 32, 2) skinny_gemm_fp8_kernel(Fp8Weight w, const uint16_t* __restrict__ x,
                                                                            int M, int64_t N, int64_t K,
                                                                            float* __restrict__ out, bool accumulate) {
  __shared__ float part[kSkinnyWarps][4][32];
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
#pragma unroll
  for (int u = 0; u < kInFlight; ++u)
    if (u < mine) load(u, u);
  wait_for_previous_kernel();  // x and the residual in out are the previous kernels' results

  const bool xok = gid < M;
  const uint4* xr = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(xok ? gid : 0) * K) + 2 * tig;
  float c[4] = {};
  for (int64_t base = 0; base < mine; base += kInFlight) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u;
      if (j >= mine) break;
      const int64_t chunk = warp + kSkinnyWarps * j;
      const uint4 x0 = xok ? __ldg(xr + chunk * 8) : make_uint4(0, 0, 0, 0);
      const uint4 x1 = xok ? __ldg(xr + chunk * 8 + 1) : make_uint4(0, 0, 0, 0);
      const float scale_a = __ldg(sa + chunk / 2), scale_b = __ldg(sb + chunk / 2);
      const uint4 ca = A[u][0], cb = A[u][1];
      if (j + kInFlight < mine) load(u, j + kInFlight);  // refill this slot early
      const uint32_t xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float t[4] = {};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        // Word s of the codes: pairs 2s and 2s + 1 of the lane's 16 k.
        uint32_t a0, a1, b0, b1;
        fp8x4_to_f16x2(word(ca, s), a0, a1);
        fp8x4_to_f16x2(word(cb, s), b0, b1);
        mma_bf16(t, f16x2_to_bf16x2(a0), f16x2_to_bf16x2(b0), f16x2_to_bf16x2(a1), f16x2_to_bf16x2(b1), xw[2 * s],
                 xw[2 * s + 1]);
      }
      c[0] = fmaf(scale_a, t[0], c[0]);
      c[1] = fmaf(scale_a, t[1], c[1]);
      c[2] = fmaf(scale_b, t[2], c[2]);
      c[3] = fmaf(scale_b, t[3], c[3]);
    }
  }
  // The warps' partial tiles, added in warp order by the first warp.
#pragma unroll
  for (int j = 0; j < 4; ++j) part[warp][j][lane] = c[j];
  __syncthreads();
  if (warp != 0) return;
  // c: weight rows gid / gid + 8, x rows 2·tig, 2·tig + 1.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kSkinnyWarps; ++q) sum += part[q][j][lane];
    const int m = 2 * tig + (j & 1);
    const int64_t n = n0 + gid + 8 * (j >> 1);
    if (m < M && n < N) {
      float* o = out + static_cast<int64_t>(m) * N + n;
      *o = accumulate ? *o + sum * kF16Unbias : sum * kF16Unbias;
    }
  }
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
  return M >= 2 && M <= kSkinnyMaxRows && K > 0 && K % kChunk == 0;
}

void gemv_fp8(const Fp8Weight& w, const uint16_t* x, int64_t N, int64_t K, float* out, bool accumulate, Stream stream) {
  if (!gemv_fp8_supported(1, K)) throw std::invalid_argument("cuda backend: fp8 gemv: unsupported shape");
  launch_dependent("gemm (fp8 gemv) kernel", gemv_fp8_kernel, dim3(grid_for(N, kGemvWarps)), dim3(kGemvWarps * 32), 0,
                   stream, w, x, N, K, out, accumulate);
}

void gemv_swiglu_fp8(const Fp8Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                     Stream stream) {
  if (!gemv_fp8_supported(1, K)) throw std::invalid_argument("cuda backend: fp8 gate_up + swiglu: unsupported shape");
  if (inter == 0) return;
  const dim3 grid(grid_for(inter, kGemvWarps)), block(kGemvWarps * 32);
  if (act_type == DType::bf16)
    launch_dependent("gate_up + swiglu (fp8 gemv) kernel", gemv_swiglu_fp8_kernel<true>, grid, block, 0, stream, w, x,
                     inter, K, act);
  else
    launch_dependent("gate_up + swiglu (fp8 gemv) kernel", gemv_swiglu_fp8_kernel<false>, grid, block, 0, stream, w,
                     x, inter, K, act);
}

void skinny_gemm_fp8(const Fp8Weight& w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                     bool accumulate, Stream stream) {
  if (!skinny_gemm_fp8_supported(M, K)) throw std::invalid_argument("cuda backend: fp8 skinny gemm: unsupported shape");
  launch_dependent("gemm (fp8 skinny, tensor core) kernel", skinny_gemm_fp8_kernel, dim3(grid_for(N, 16)),
                   dim3(kSkinnyWarps * 32), 0, stream, w, x, static_cast<int>(M), N, K, out, accumulate);
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

// GEMMs with FP8 weights (fp8_e4m3 codes and f32 block scales, kernels/tensor.h Fp8Scales):
// out [M, N] (+)= x [M, K] · wᵀ with w = code * scale, x bf16, fp32 accumulation.
//
// Decode steps read the codes directly and dequantise in registers, so a step streams one
// byte per weight. Steps of 1 to 64 rows (K a multiple of 64) run one tensor-core kernel: a
// block owns 16 or 32 weight rows, its warps split K in 64-column chunks, the codes stream
// through a per-warp cp.async ring, and the x rows are the 8-column side of mma.m16n8k16 in
// up to 8 column tiles that share each converted weight fragment (so the weights are read
// once); one-row steps also fuse the MLP's gate_up + SwiGLU. Codes become f16 by the
// hardware conversion (or bf16 by moving bits, with 8 column tiles: see kBf16Operands).
// Each chunk's products (inside one 128-column block) are summed before its scale is
// applied, so a scale costs one multiply per 64-column chunk and row, not one per weight.
//
// The warp-per-row GEMV of gemv.cu over an FP8 row reader (16 codes per 16-byte load) takes
// one-row steps whose K is only a multiple of 16, and is the benchmark's --fp8-warp-gemv; there
// a code becomes an f16 by moving its bits (sign, then exponent and mantissa one place right:
// the e4m3 value times 2^-8, exactly, subnormals included; 2^8 is folded into the scale) and
// widens to f32. Larger steps go to cuBLASLt's block-scaled FP8 GEMM over x quantised here
// (quantize_rows_fp8; fp8_block_gemm.h), or to cuBLAS over a bf16 copy of the weight
// (dequantize_fp8_bf16, cuda_gemm.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_gemm.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/skinny_gemm_tiling.cuh"

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

// ---- 1 to 64 rows on the tensor cores

// The launch shape of skinny_gemm_tiling.cuh, on 64-column chunks.
constexpr int kChunk = 64;  // k per chunk: 16 codes of each of a lane's weight rows
// Resident blocks per SM asked of the compiler: two with two row tiles of up to 4 column tiles.
template <int NT, int RT>
constexpr int kMinBlocks = RT == 2 && NT <= 4 ? 2 : 1;
// The operand type per column-tile count (docs/bench-log, "FP8 weights on the H200",
// 2026-12-02 08:39): f16 up to 4 tiles (codes by the hardware's e4m3 -> f16 conversion, one
// instruction per pair, x converted from bf16 per tile); bf16 with 8 tiles, where converting
// x (once per tile) costs more than the codes' conversion by bit moves saves.
template <int NT>
constexpr bool kBf16Operands = NT == 8;

// Codes c0..c3 of a word as the f16 pairs (c0, c1) and (c2, c3), exact (e4m3 fits in f16):
// one conversion instruction per pair on sm_89+.
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  fp8x4_to_f16x2(w, lo, hi);
  const __half2 unbias = __float2half2_rn(kF16Unbias);
  const __half2 l = __hmul2(*reinterpret_cast<const __half2*>(&lo), unbias);
  const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&hi), unbias);
  lo = *reinterpret_cast<const uint32_t*>(&l);
  hi = *reinterpret_cast<const uint32_t*>(&h);
#endif
}

// Codes c0..c3 as the bf16 pairs (c0, c1) and (c2, c3), exact: sign, exponent and mantissa
// moved into place give the value times 2^-120 (an e4m3 subnormal lands on a bf16 subnormal
// of the same mantissa), and one bf16x2 multiply by 2^120 each (bf16 arithmetic keeps
// subnormals; the test with subnormal-only codes checks it).
__device__ __forceinline__ void e4m3x4_to_bf16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t a = __byte_perm(w, 0, 0x1404), b = __byte_perm(w, 0, 0x3424);  // codes in the high bytes
  const uint32_t l = (a & 0x80008000u) | ((a >> 4) & 0x07f007f0u), h = (b & 0x80008000u) | ((b >> 4) & 0x07f007f0u);
  constexpr uint32_t k = 0x7b807b80u;  // 2^120 twice
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(lo) : "r"(l), "r"(k));
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(hi) : "r"(h), "r"(k));
}

// A bf16 pair as an f16 pair: exact inside f16's normal range; beyond +-65504 it saturates
// (an activation that large would otherwise become inf).
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  uint32_t r;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n"
      : "=r"(r)
      : "f"(__uint_as_float(v & 0xffff0000u)), "f"(__uint_as_float(v << 16)));
  return r;
}

// c (16 x 8, f32) += a (16 x 16, f16 pairs, row major) · b (16 x 8, f16 pairs, column major).
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// The partial products of one warp: rows[r][0] and rows[r][1] are the weight rows of lanes'
// groups gid and gid + 8 in row tile r (16 rows each), x the M <= 8·NT input rows in NT
// column tiles of 8. Lane (gid, tig) takes codes 16·tig..16·tig+15 of each 64-column chunk
// and the same 16 x values, so word j of its A and B registers is the same k (the k order
// inside a chunk only has to agree between A and B). Warp w takes chunks w, w + 8, ...; a
// chunk lies inside one 128-column block, so its four mma steps go to a fresh tile that is
// scaled once per row: c[r][t] (+)= scale · (16 rows x 8 x rows). The codes come through
// cp.async into the warp's ring, kStages - 1 chunks ahead, so the bytes in flight cost no
// registers; x (a few KiB, read by every block) through the L1 / L2 as ordinary loads
// (through the ring as well, the one-tile steps ran at half the speed: same benchmarks
// section, 2026-12-02 08:17 and 08:39).
template <int NT, int RT>
__device__ __forceinline__ void fp8_mma_rows(const Fp8Weight& w, const uint16_t* __restrict__ x, int M, int64_t K,
                                             const int64_t (&rows)[RT][2], uint4* smem, float (&c)[RT][NT][4]) {
  constexpr int V = 2 * RT, kStages = kMmaStagesFor<RT>;
  constexpr bool kBf16 = kBf16Operands<NT>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const uint8_t* src[RT][2];
  const float* sc[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      src[r][h] = w.codes + rows[r][h] * K + 16 * tig;
      sc[r][h] = scale_row(w, rows[r][h]);
    }
  const int64_t chunks = K / kChunk;
  const int mine = static_cast<int>(chunks > warp ? (chunks - warp + kMmaWarps - 1) / kMmaWarps : 0);
  uint4* ring = smem + warp * (kStages * V * 32) + lane;
  // Chunk j into slot j % kStages (an empty group past the warp's last chunk keeps the count).
  auto issue = [&](int j) {
    if (j < mine) {
      const int64_t col = static_cast<int64_t>(warp + kMmaWarps * j) * kChunk;
      uint4* slot = ring + (j % kStages) * V * 32;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) detail::cp_async<16>(detail::smem_addr(slot + (2 * r + h) * 32), src[r][h] + col, 16);
    }
    detail::cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) issue(j);  // no earlier kernel writes the weights
  wait_for_previous_kernel();  // x and the residual in out are the previous kernels' results
  const SkinnyX<NT> xs = skinny_x_rows<NT>(x, M, K, gid, 2 * tig);
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[r][t][i] = 0.0f;
  for (int j = 0; j < mine; ++j) {
    issue(j + kStages - 1);
    detail::cp_async_wait<kStages - 1>();  // chunk j's group is complete
    const uint4* slot = ring + (j % kStages) * V * 32;
    const int64_t chunk = warp + kMmaWarps * j;
    uint32_t a[RT][2][8];
    float s[RT][2];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v = slot[(2 * r + h) * 32];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (kBf16)
            e4m3x4_to_bf16x2(word(v, q), a[r][h][2 * q], a[r][h][2 * q + 1]);
          else
            e4m3x4_to_f16x2(word(v, q), a[r][h][2 * q], a[r][h][2 * q + 1]);
        }
        s[r][h] = __ldg(sc[r][h] + chunk / 2);
      }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const uint4 x0 = xs.ok[t] ? __ldg(xs.r[t] + chunk * 8) : make_uint4(0, 0, 0, 0);
      const uint4 x1 = xs.ok[t] ? __ldg(xs.r[t] + chunk * 8 + 1) : make_uint4(0, 0, 0, 0);
      uint32_t xw[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        xw[q] = kBf16 ? word(x0, q) : bf16x2_to_f16x2(word(x0, q));
        xw[4 + q] = kBf16 ? word(x1, q) : bf16x2_to_f16x2(word(x1, q));
      }
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        float acc[4] = {};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (kBf16)
            mma_bf16(acc, a[r][0][2 * q], a[r][1][2 * q], a[r][0][2 * q + 1], a[r][1][2 * q + 1], xw[2 * q], xw[2 * q + 1]);
          else
            mma_f16(acc, a[r][0][2 * q], a[r][1][2 * q], a[r][0][2 * q + 1], a[r][1][2 * q + 1], xw[2 * q], xw[2 * q + 1]);
        }
        c[r][t][0] = fmaf(s[r][0], acc[0], c[r][t][0]);
        c[r][t][1] = fmaf(s[r][0], acc[1], c[r][t][1]);
        c[r][t][2] = fmaf(s[r][1], acc[2], c[r][t][2]);
        c[r][t][3] = fmaf(s[r][1], acc[3], c[r][t][3]);
      }
    }
  }
  detail::cp_async_wait<0>();  // the ring becomes the epilogue's scratch
  __syncthreads();
}

// out [M, N] (+)= x [M, K] · wᵀ; a block owns weight rows n0..n0 + 16·RT - 1.
template <int NT, int RT>
__global__ void __launch_bounds__(kMmaWarps * 32, (kMinBlocks<NT, RT>)) fp8_mma_gemm_kernel(Fp8Weight w, const uint16_t* __restrict__ x, int M,
                                                                    int64_t N, int64_t K, float* __restrict__ out,
                                                                    bool accumulate) {
  extern __shared__ uint4 smem[];
  const int gid = (threadIdx.x & 31) >> 2;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16 * RT;
  int64_t rows[RT][2];
  mma_block_rows<RT>(n0, N, gid, rows);
  float c[RT][NT][4];
  fp8_mma_rows<NT, RT>(w, x, M, K, rows, smem, c);
  mma_store_rows<NT, RT>(reinterpret_cast<float*>(smem), c, n0, M, N, out, accumulate);
}

// act[i] = silu(w[i] · x) * (w[I + i] · x) for one x row: a block owns act columns
// i0..i0 + 7, its lane groups gid the gate rows and gid + 8 the up rows.
template <bool kBf16Out>
__global__ void __launch_bounds__(kMmaWarps * 32) fp8_mma_swiglu_kernel(Fp8Weight w, const uint16_t* __restrict__ x,
                                                                      int64_t inter, int64_t K, void* __restrict__ act) {
  extern __shared__ uint4 smem[];
  const int gid = (threadIdx.x & 31) >> 2;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * 8;
  const int64_t i = i0 + gid < inter ? i0 + gid : inter - 1;
  const int64_t rows[1][2] = {{i, inter + i}};
  float c[1][1][4];
  fp8_mma_rows<1, 1>(w, x, 1, K, rows, smem, c);
  mma_store_swiglu<kBf16Out>(reinterpret_cast<float*>(smem), c[0], i0, inter, act);
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

// ---- activations for the block-scaled FP8 GEMM

// A warp per (row, 128 columns): four bf16 a lane, the group's amax by shuffles.
__global__ void quantize_rows_fp8_kernel(const uint16_t* __restrict__ x, int64_t M, int64_t K, uint8_t* __restrict__ codes,
                                         float* __restrict__ scales, int64_t scale_row_stride, int64_t scale_col_stride) {
  wait_for_previous_kernel();
  const int lane = threadIdx.x & 31;
  const int64_t groups = K / 128;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (g >= M * groups) return;
  const int64_t m = g / groups, kb = g % groups;
  const int64_t at = m * K + kb * 128 + 4 * lane;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + at);
  const float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                      __uint_as_float(raw.y & 0xffff0000u)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f, inv = amax > 0.0f ? 448.0f / amax : 1.0f;
  const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[0] * inv, v[1] * inv), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[2] * inv, v[3] * inv), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(codes + at) = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  if (lane == 0) scales[m * scale_row_stride + kb * scale_col_stride] = scale;
}

}  // namespace

bool gemv_fp8_supported(int64_t M, int64_t K) { return M == 1 && K > 0 && K % 16 == 0; }
bool skinny_gemm_fp8_supported(int64_t M, int64_t K) {
  return M >= 1 && M <= kSkinnyFp8MaxRows && K > 0 && K % kChunk == 0;
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
  const int m = static_cast<int>(M);
  with_mma_tiles(M, [&](auto nt, auto rt) {
    constexpr int NT = decltype(nt)::value, RT = decltype(rt)::value;
    launch_mma<fp8_mma_gemm_kernel<NT, RT>, mma_smem_bytes<NT, RT>()>("gemm (fp8, tensor core) kernel", N, 16 * RT,
                                                                      stream, w, x, m, N, K, out, accumulate);
  });
}

void skinny_swiglu_fp8(const Fp8Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                       Stream stream) {
  if (!skinny_gemm_fp8_supported(1, K)) throw std::invalid_argument("cuda backend: fp8 gate_up + swiglu: unsupported shape");
  if (inter == 0) return;
  constexpr size_t smem = mma_smem_bytes<1, 1>();
  const char* name = "gate_up + swiglu (fp8, tensor core) kernel";
  if (act_type == DType::bf16)
    launch_mma<fp8_mma_swiglu_kernel<true>, smem>(name, inter, 8, stream, w, x, inter, K, act);
  else
    launch_mma<fp8_mma_swiglu_kernel<false>, smem>(name, inter, 8, stream, w, x, inter, K, act);
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

void quantize_rows_fp8(const uint16_t* x, int64_t M, int64_t K, uint8_t* codes, float* scales, int64_t scale_row_stride,
                       int64_t scale_col_stride, Stream stream) {
  if (K % 128 != 0) throw std::invalid_argument("cuda backend: fp8 activation quantisation: K not a multiple of 128");
  if (M == 0 || K == 0) return;
  constexpr int kWarps = 8;
  launch_dependent("fp8 activation quantise kernel", quantize_rows_fp8_kernel, dim3(grid_for(M * (K / 128), kWarps)),
                   dim3(kWarps * 32), 0, stream, x, M, K, codes, scales, scale_row_stride, scale_col_stride);
}

}  // namespace ds::cuda::ops

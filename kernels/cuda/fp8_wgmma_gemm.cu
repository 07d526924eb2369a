// FP8 x FP8 GEMMs of decode-sized steps on Hopper's warpgroup MMA: out [M, N] (+)= x · wᵀ
// for M <= 64 rows of x quantised to e4m3 per row and 128 columns (quantize_rows_fp8) and an
// FP8 weight with 128 x 128 block scales, fp32 accumulation.
//
// The operands are swapped against the usual GEMM: the weight's rows are wgmma's M side (a
// CTA owns 128 of them, 64 per warpgroup) and the step's x rows are its N side, padded to 8,
// 16, 32 or 64, so every weight byte is read once and the tensor cores' 64-row minimum is
// spent on weights, not on padding. Both operands are K-major in 128-byte swizzled shared
// memory (wgmma.cuh), one 128-column block of K per pipeline stage: the stage's four k32
// steps go to a fresh tile that is then scaled once, by the weight block's scale times each x
// row's scale, into the accumulators. All threads copy stages with cp.async, kStages - 1 ahead;
// the weight copies of the first stages are issued before the wait for the previous kernel
// (the weights are constant), so they overlap its tail.
//
// Steps whose weight has few 128-row tiles (N = 4096 outputs: 32 tiles for 132 SMs) split K
// over gridDim.y CTAs per tile; each writes its partial tile to a workspace and the last one
// to arrive (a per-tile counter) sums the partials in split order, so the result does not
// depend on timing, and resets the counter for the next call.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_tc_ptx.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kTileRows = 128;  // weight rows per CTA: two warpgroups of 64
constexpr int kThreads = 256;
constexpr int kKBlock = 128;  // K per stage: one column block of scales, one 128-byte swizzle row
constexpr int kWeightStageBytes = kTileRows * kKBlock;

template <int TN>
struct Stages {
  static constexpr int kStageBytes = kWeightStageBytes + TN * kKBlock;  // a multiple of 1024
  // Up to ~110 KiB per CTA so two fit on an SM (their stages in flight cover the memory latency).
  static constexpr int kCount = std::min(8, (110 * 1024) / kStageBytes);
  static constexpr int kSmem = kCount * kStageBytes;
  static_assert(TN * kTileRows * 4 + 4 <= kSmem, "the epilogue's tile (and a flag) reuses the stages");
};

// d (+)= A B for one 64 x TN x 32 step, A (64 weight rows) and B (TN x rows) e4m3 from shared
// memory, K-major; `accumulate` false overwrites d.
template <int TN>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[TN / 2], uint64_t a, uint64_t b, bool accumulate);

#define DS_WGMMA_E4M3_HEAD(n) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #n ", 0;\n"
template <>
__device__ __forceinline__ void wgmma_e4m3<8>(float (&d)[4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(DS_WGMMA_E4M3_HEAD(6) "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<16>(float (&d)[8], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(DS_WGMMA_E4M3_HEAD(10) "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<32>(float (&d)[16], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(DS_WGMMA_E4M3_HEAD(18) "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
template <>
__device__ __forceinline__ void wgmma_e4m3<64>(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(DS_WGMMA_E4M3_HEAD(34) "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
               "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
#undef DS_WGMMA_E4M3_HEAD

struct Args {
  Fp8Weight w;
  const uint8_t* x_codes;  // [M, K]
  const float* x_scales;   // scale of (m, k / 128) at x_scales[(k / 128) * M + m]
  int M;
  int64_t N, K;
  int kblocks_per_split;
  float* out;
  bool accumulate;
  float* partials;  // [splits, M, N] when gridDim.y > 1
  int* counters;    // one per 128-row tile, zero between calls
};

template <int TN>
__global__ void __launch_bounds__(kThreads, 2) fp8_wgmma_gemm_kernel(Args a) {
  using S = Stages<TN>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp >> 2;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int64_t kblocks = a.K / kKBlock;
  const int64_t kb0 = static_cast<int64_t>(blockIdx.y) * a.kblocks_per_split;
  const int nkb = static_cast<int>(std::min<int64_t>(a.kblocks_per_split, kblocks - kb0));

  // Stage j (this CTA's j-th column block) lives in slot j % kCount: the weight tile first.
  auto copy_weights = [&](int j) {
    if (j < nkb) {
      uint8_t* slot = smem + (j % S::kCount) * S::kStageBytes;
      const int64_t k = (kb0 + j) * kKBlock;
#pragma unroll
      for (int i = 0; i < kWeightStageBytes / 16 / kThreads; ++i) {
        const int c = tid + kThreads * i, r = c >> 3, ch = c & 7;
        const int64_t n = n0 + r;
        const bool ok = n < a.N;
        detail::cp_async<16>(detail::smem_addr(slot + detail::sw128_offset<kTileRows>(r, ch)),
                             a.w.codes + (ok ? n : 0) * a.K + k + ch * 16, ok ? 16 : 0);
      }
    }
  };
  auto copy_x = [&](int j) {
    if (j < nkb) {
      uint8_t* slot = smem + (j % S::kCount) * S::kStageBytes + kWeightStageBytes;
      const int64_t k = (kb0 + j) * kKBlock;
      for (int c = tid; c < TN * 8; c += kThreads) {
        const int r = c >> 3, ch = c & 7;
        const bool ok = r < a.M;
        detail::cp_async<16>(detail::smem_addr(slot + detail::sw128_offset<TN>(r, ch)),
                             a.x_codes + (ok ? r : 0) * a.K + k + ch * 16, ok ? 16 : 0);
      }
    }
  };

  // Groups: the first kCount - 1 stages' weights, then (after the wait) their x, one group
  // each; then one group per stage. Before stage j is read, kCount - 2 later groups may still
  // be in flight, in both phases.
  for (int j = 0; j < S::kCount - 1; ++j) {
    copy_weights(j);
    detail::cp_async_commit();
  }
  wait_for_previous_kernel();  // x, out and the workspace belong to earlier kernels until now
  for (int j = 0; j < S::kCount - 1; ++j) {
    copy_x(j);
    detail::cp_async_commit();
  }

  // This thread's accumulator elements (wgmma's D layout): weight rows r and r + 8 of the
  // warp's 16, x rows 8i + 2 (lane % 4) + {0, 1} for i < TN / 8.
  float acc[TN / 2], part[TN / 2];
#pragma unroll
  for (int i = 0; i < TN / 2; ++i) acc[i] = 0.0f;
  const int64_t wg_row0 = n0 + 64 * wg;
  const float* w_scales = a.w.scales + (wg_row0 < a.N ? (wg_row0 >> a.w.row_shift) * a.w.scale_cols : 0);
  const uint32_t base = detail::smem_addr(smem);
  for (int j = 0; j < nkb; ++j) {
    detail::cp_async_wait<S::kCount - 2>();
    detail::fence_proxy_async_shared();
    __syncthreads();  // stage j is in for every thread, and stage j - 1's slot is read
    copy_weights(j + S::kCount - 1);
    copy_x(j + S::kCount - 1);
    detail::cp_async_commit();
    const uint32_t slot = base + (j % S::kCount) * S::kStageBytes;
    detail::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKBlock / 32; ++ks) {
      const uint64_t ad = detail::wgmma_desc_sw128(slot + wg * 64 * 128 + ks * 32, 16, 1024);
      const uint64_t bd = detail::wgmma_desc_sw128(slot + kWeightStageBytes + ks * 32, 16, 1024);
      wgmma_e4m3<TN>(part, ad, bd, ks > 0);
    }
    detail::wgmma_commit();
    detail::wgmma_wait<0>();
    detail::wgmma_hold(part);
    const int64_t kb = kb0 + j;
    const float ws = wg_row0 < a.N ? __ldg(w_scales + kb) : 0.0f;
    const float* xs = a.x_scales + kb * a.M;
#pragma unroll
    for (int i = 0; i < TN / 8; ++i) {
      const int m = 8 * i + 2 * (lane & 3);
      const float s0 = m < a.M ? ws * __ldg(xs + m) : 0.0f, s1 = m + 1 < a.M ? ws * __ldg(xs + m + 1) : 0.0f;
      acc[4 * i] = fmaf(part[4 * i], s0, acc[4 * i]);
      acc[4 * i + 1] = fmaf(part[4 * i + 1], s1, acc[4 * i + 1]);
      acc[4 * i + 2] = fmaf(part[4 * i + 2], s0, acc[4 * i + 2]);
      acc[4 * i + 3] = fmaf(part[4 * i + 3], s1, acc[4 * i + 3]);
    }
  }
  detail::cp_async_wait<0>();
  __syncthreads();  // the stages become the epilogue's tile

  // The tile as [x row][weight row] in shared memory, then written row by row (coalesced).
  float* tile = reinterpret_cast<float*>(smem);
  const int r = 64 * wg + 16 * (warp & 3) + (lane >> 2);
#pragma unroll
  for (int i = 0; i < TN / 8; ++i) {
    const int m = 8 * i + 2 * (lane & 3);
    tile[m * kTileRows + r] = acc[4 * i];
    tile[(m + 1) * kTileRows + r] = acc[4 * i + 1];
    tile[m * kTileRows + r + 8] = acc[4 * i + 2];
    tile[(m + 1) * kTileRows + r + 8] = acc[4 * i + 3];
  }
  __syncthreads();
  const int rows = static_cast<int>(std::min<int64_t>(kTileRows, a.N - n0));
  if (gridDim.y == 1) {
    for (int e = tid; e < a.M * kTileRows; e += kThreads) {
      const int m = e / kTileRows, rr = e % kTileRows;
      if (rr >= rows) continue;
      float* o = a.out + m * a.N + n0 + rr;
      *o = a.accumulate ? *o + tile[e] : tile[e];
    }
    return;
  }
  const int64_t plane = static_cast<int64_t>(a.M) * a.N;
  for (int e = tid; e < a.M * kTileRows; e += kThreads) {
    const int m = e / kTileRows, rr = e % kTileRows;
    if (rr < rows) a.partials[blockIdx.y * plane + m * a.N + n0 + rr] = tile[e];
  }
  __threadfence();
  __syncthreads();
  int* last = reinterpret_cast<int*>(tile + TN * kTileRows);  // past the tile, inside the stages
  if (tid == 0) *last = atomicAdd(a.counters + blockIdx.x, 1) == static_cast<int>(gridDim.y) - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();  // the other splits' partials, published before their counter increments
  for (int e = tid; e < a.M * kTileRows; e += kThreads) {
    const int m = e / kTileRows, rr = e % kTileRows;
    if (rr >= rows) continue;
    const int64_t at = m * a.N + n0 + rr;
    float sum = 0.0f;
    for (unsigned s = 0; s < gridDim.y; ++s) sum += __ldcg(a.partials + s * plane + at);
    a.out[at] = a.accumulate ? a.out[at] + sum : sum;
  }
  if (tid == 0) a.counters[blockIdx.x] = 0;
}

template <int TN>
void launch(const Args& a, dim3 grid, Stream stream) {
  static const bool attr = (check_cuda(cudaFuncSetAttribute(fp8_wgmma_gemm_kernel<TN>,
                                                            cudaFuncAttributeMaxDynamicSharedMemorySize, Stages<TN>::kSmem),
                                       "fp8 wgmma gemm: shared memory attribute"),
                            true);
  (void)attr;
  launch_dependent("gemm (fp8 x fp8, wgmma) kernel", fp8_wgmma_gemm_kernel<TN>, grid, dim3(kThreads), Stages<TN>::kSmem,
                   stream, a);
}

}  // namespace

bool fp8_wgmma_gemm_supported(int64_t M, int64_t K, int row_shift) {
  return M >= 1 && M <= kFp8WgmmaMaxRows && K > 0 && K % kKBlock == 0 && row_shift == 7;
}

Fp8WgmmaPlan plan_fp8_wgmma_gemm(int64_t M, int64_t N, int64_t K, int n_sms, int ctas_per_sm) {
  Fp8WgmmaPlan p;
  p.tiles = (N + kTileRows - 1) / kTileRows;
  const int64_t kblocks = K / kKBlock;
  // Split K while the tiles are fewer than ctas_per_sm per SM, keeping at least two column
  // blocks per split: each split costs M x 128 partial sums written and read back per tile.
  const int64_t target = static_cast<int64_t>(ctas_per_sm) * n_sms;
  int64_t splits = 1;
  if (p.tiles < target && p.tiles <= kFp8WgmmaMaxTiles)
    splits = std::clamp<int64_t>((target + p.tiles - 1) / p.tiles, 1, std::max<int64_t>(1, std::min<int64_t>(16, kblocks / 2)));
  p.kblocks_per_split = static_cast<int>((kblocks + splits - 1) / splits);
  p.splits = static_cast<int>((kblocks + p.kblocks_per_split - 1) / p.kblocks_per_split);
  p.partial_floats = p.splits > 1 ? p.splits * M * N : 0;
  return p;
}

void fp8_wgmma_gemm(const Fp8Weight& w, const uint8_t* x_codes, const float* x_scales, int64_t M, int64_t N, int64_t K,
                    float* out, bool accumulate, const Fp8WgmmaPlan& plan, float* partials, int* counters,
                    Stream stream) {
  if (!fp8_wgmma_gemm_supported(M, K, w.row_shift)) throw std::invalid_argument("cuda backend: fp8 wgmma gemm: unsupported shape");
  if (N == 0) return;
  if (plan.splits > 1 && (!partials || !counters)) throw std::invalid_argument("cuda backend: fp8 wgmma gemm: no split workspace");
  const Args a{w, x_codes, x_scales, static_cast<int>(M), N, K, plan.kblocks_per_split, out, accumulate, partials, counters};
  const dim3 grid(static_cast<unsigned>(plan.tiles), static_cast<unsigned>(plan.splits));
  if (M <= 8)
    launch<8>(a, grid, stream);
  else if (M <= 16)
    launch<16>(a, grid, stream);
  else if (M <= 32)
    launch<32>(a, grid, stream);
  else
    launch<64>(a, grid, stream);
}

}  // namespace ds::cuda::ops

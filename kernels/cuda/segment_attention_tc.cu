// Non-causal attention within segments on the tensor cores (mma.sync m16n8k16, bf16 operands,
// f32 accumulation), FlashAttention-2 style: the vision encoder's images, where every patch
// attends to every patch of its own image. Two kernels:
//
// * The pack: Q, K and V (f32, as the QKV GEMM leaves them: column blocks with a row stride,
//   optionally before their bias and before the rotary embedding of q and k) to bf16, head-major
//   [3][heads][rows][DP] with the head size d zero-padded to DP (a multiple of 16: 72 -> 80 for
//   the released towers), Q pre-scaled by the softmax scale times log2 e (the softmax runs in
//   the exp2 domain). One pass over the activations replaces the bias add, the split of the
//   fused projection and the two rotary passes; every CTA of the attention then reads bf16 rows
//   that cp.async copies as they are, instead of converting f32 for each of its tiles.
// * The attention: a CTA takes 128 consecutive query rows of one head (8 warps, 16 rows each)
//   and walks 64-key tiles over the union of those rows' segments (usually one image, two where
//   the rows straddle a boundary, each row masked to its own segment). K and V tiles are double
//   buffered in shared memory (cp.async: the next tile loads while this one is multiplied), with
//   a row stride of DP + 8 elements so ldmatrix's eight rows fall in distinct banks; the online
//   softmax takes a tile in two steps of 32 keys (fewer registers for the scores). Q goes to
//   registers once, as the A fragments of S = Q K^T; P stays in registers as the A fragments of
//   O += P V (the accumulator layout of two n-blocks of S is the A layout of one k-step); K and
//   V come through ldmatrix (V transposed).
#include <cuda_bf16.h>

#include <stdexcept>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/ex2_approx.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 16 * kWarps;  // query rows per CTA
constexpr int kKeys = 64;           // keys per tile (of shared memory)
constexpr int kSubKeys = 32;        // keys per online-softmax step
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

constexpr int padded_width(int64_t d) { return static_cast<int>((d + 15) / 16 * 16); }

template <int DP>
constexpr size_t smem_bytes() {
  return 4 * static_cast<size_t>(kKeys) * (DP + 8) * sizeof(__nv_bfloat16);  // 2 stages of K and V
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// ---- the pack

struct Pack {
  SegmentOperands in;
  int64_t rows;
  int heads, d, dp;
  float q_scale;
  __nv_bfloat16* out;  // [3][heads][rows][dp]
};

// Grid: x over one head's rows x dp elements (its bf16 rows are contiguous), y over the three
// parts times the heads.
__global__ void pack_kernel(Pack p) {
  wait_for_previous_kernel();
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + static_cast<int>(threadIdx.x);
  if (i >= static_cast<int>(p.rows) * p.dp) return;
  const int part = static_cast<int>(blockIdx.y) / p.heads, h = static_cast<int>(blockIdx.y) % p.heads;
  const int row = i / p.dp, j = i % p.dp;
  float val = 0.f;
  if (j < p.d) {
    const float* src = (part == 0 ? p.in.q : part == 1 ? p.in.k : p.in.v) + static_cast<int64_t>(row) * p.in.ld +
                       static_cast<int64_t>(h) * p.d;
    const float* bias = p.in.bias ? p.in.bias + (static_cast<int64_t>(part) * p.heads + h) * p.d : nullptr;
    val = src[j] + (bias ? bias[j] : 0.f);
    if (part < 2 && p.in.cos) {
      const int half = p.d / 2, f = j < half ? j : j - half, other_j = j < half ? j + half : j - half;
      const float other = src[other_j] + (bias ? bias[other_j] : 0.f);
      const float c = p.in.cos[static_cast<int64_t>(row) * half + f], s = p.in.sin[static_cast<int64_t>(row) * half + f];
      val = j < half ? val * c - other * s : val * c + other * s;
    }
    if (part == 0) val *= p.q_scale;
  }
  p.out[static_cast<int64_t>(blockIdx.y) * p.rows * p.dp + i] = __float2bfloat16_rn(val);
}

// ---- the attention

// The segment [lo, hi) holding `row` (an empty one past the last row). Rows in int (the
// launcher checks that they fit): 64-bit bounds would cost the registers that keep two CTAs on
// an SM without spills.
__device__ __forceinline__ void segment_of(const int64_t* offsets, int n_segments, int row, int& lo, int& hi) {
  if (row >= offsets[n_segments]) {
    lo = hi = 0;
    return;
  }
  int a = 0, b = n_segments;
  while (b - a > 1) {
    const int mid = (a + b) / 2;
    if (offsets[mid] <= row) a = mid; else b = mid;
  }
  lo = static_cast<int>(offsets[a]);
  hi = static_cast<int>(offsets[a + 1]);
}

// Rows [r0, r0 + ROWS) of x [*, DP] bf16 into tile [ROWS][DP + 8] by cp.async; rows at or past
// `end` are zero-filled (their scores are masked, and a zero V row keeps 0 * garbage out of O).
template <int DP, int ROWS>
__device__ __forceinline__ void load_rows(const __nv_bfloat16* x, int r0, int end, __nv_bfloat16* tile) {
  constexpr int kChunks = DP / 8;  // 16-byte chunks per row
  for (int i = static_cast<int>(threadIdx.x); i < ROWS * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = r0 + r;
    const bool in = row < end;
    const __nv_bfloat16* src = x + static_cast<int64_t>(in ? row : 0) * DP + 8 * c;
    detail::cp_async<16>(detail::smem_addr(tile + r * (DP + 8) + 8 * c), src, in ? 16 : 0);
  }
}

template <int DP>
__global__ void __launch_bounds__(kThreads, DP <= 80 ? 2 : 1)
    segment_attention_tc_kernel(const __nv_bfloat16* packed, const int64_t* offsets, int n_segments, int rows,
                                int heads, int d, __nv_bfloat16* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kStride = DP + 8;
  constexpr int kTile = kKeys * kStride;
  constexpr int kSteps = DP / 16;     // k-steps of S = Q K^T
  constexpr int kDimBlocks = DP / 8;  // n-blocks of O
  // Stage s: K at 2 s kTile, V after it. Q (kRows = 2 kKeys rows) is staged in stage 1.
  static_assert(kRows == 2 * kKeys, "Q is staged in one stage's K and V tiles");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* const smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  wait_for_previous_kernel();

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int h = static_cast<int>(blockIdx.y);
  const int r0 = static_cast<int>(blockIdx.x) * kRows;
  const int64_t head_elems = static_cast<int64_t>(rows) * DP;
  const __nv_bfloat16* const qh = packed + static_cast<int64_t>(h) * head_elems;
  const __nv_bfloat16* const kh = packed + static_cast<int64_t>(heads + h) * head_elems;
  const __nv_bfloat16* const vh = packed + static_cast<int64_t>(2 * heads + h) * head_elems;

  // The keys of the CTA: from the first row's segment to the last row's.
  int first_lo, first_hi, last_lo, last_hi;
  segment_of(offsets, n_segments, r0, first_lo, first_hi);
  segment_of(offsets, n_segments, (r0 + kRows < rows ? r0 + kRows : rows) - 1, last_lo, last_hi);
  const int key_begin = first_lo, key_end = last_hi;
  const int n_tiles = (key_end - key_begin + kKeys - 1) / kKeys;
  // This thread's two rows (g and g + 8 of its warp) and their segments.
  const int row_a = r0 + 16 * warp + g, row_b = row_a + 8;
  int a_lo, a_hi, b_lo, b_hi;
  segment_of(offsets, n_segments, row_a, a_lo, a_hi);
  segment_of(offsets, n_segments, row_b, b_lo, b_hi);
  const int both_lo = a_lo > b_lo ? a_lo : b_lo, both_hi = a_hi < b_hi ? a_hi : b_hi;

  // Q into stage 1, the first K and V tile into stage 0; Q to registers as A fragments.
  load_rows<DP, kRows>(qh, r0, rows, smem + 2 * kTile);
  detail::cp_async_commit();
  if (n_tiles > 0) {
    load_rows<DP, kKeys>(kh, key_begin, key_end, smem);
    load_rows<DP, kKeys>(vh, key_begin, key_end, smem + kTile);
  }
  detail::cp_async_commit();
  detail::cp_async_wait<1>();
  __syncthreads();
  uint32_t qf[kSteps][4];
  {
    const int m = lane >> 3, r = lane & 7;
    const __nv_bfloat16* sq = smem + 2 * kTile;
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
      detail::ldsm_x4(qf[s], detail::smem_addr(sq + (16 * warp + r + 8 * (m & 1)) * kStride + 16 * s + 8 * (m >> 1)));
  }
  __syncthreads();  // stage 1 is free for the second tile

  float o[kDimBlocks][4];
#pragma unroll
  for (int c = 0; c < kDimBlocks; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

  for (int it = 0; it < n_tiles; ++it) {
    const int k0 = key_begin + it * kKeys;
    if (it + 1 < n_tiles) {
      __nv_bfloat16* next = smem + 2 * kTile * ((it + 1) & 1);
      load_rows<DP, kKeys>(kh, k0 + kKeys, key_end, next);
      load_rows<DP, kKeys>(vh, k0 + kKeys, key_end, next + kTile);
      detail::cp_async_commit();
      detail::cp_async_wait<1>();
    } else {
      detail::cp_async_wait<0>();
    }
    __syncthreads();  // this tile has landed for every thread
    const __nv_bfloat16* const sk = smem + 2 * kTile * (it & 1);
    const __nv_bfloat16* const sv = sk + kTile;

    // Each half of the tile in turn (32 keys: 4 n-blocks of S), which keeps the scores in 16
    // registers instead of 32 (two CTAs an SM without spills at DP 80).
#pragma unroll 1
    for (int sub = 0; sub < kKeys / kSubKeys; ++sub) {
      const int kk = k0 + kSubKeys * sub;
      const __nv_bfloat16* const skk = sk + kSubKeys * sub * kStride;
      const __nv_bfloat16* const svv = sv + kSubKeys * sub * kStride;
      float s[kSubKeys / 8][4];
#pragma unroll
      for (int j = 0; j < kSubKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      {
        const int m = lane >> 3, r = lane & 7;
#pragma unroll
        for (int j = 0; j < kSubKeys / 8; j += 2)
#pragma unroll
          for (int st = 0; st < kSteps; ++st) {
            uint32_t b[4];
            detail::ldsm_x4(b, detail::smem_addr(skk + (8 * j + r + 8 * (m >> 1)) * kStride + 16 * st + 8 * (m & 1)));
            detail::mma16816<false>(s[j], qf[st], b[0], b[1]);
            detail::mma16816<false>(s[j + 1], qf[st], b[2], b[3]);
          }
      }

      // Mask each row to its own segment (not needed where these keys lie inside both rows'
      // segment, the common case), then the online softmax (exp2 domain).
      if (kk < both_lo || kk + kSubKeys > both_hi) {
#pragma unroll
        for (int j = 0; j < kSubKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = kk + 8 * j + 2 * t + e;
            if (key < a_lo || key >= a_hi) s[j][e] = -INFINITY;
            if (key < b_lo || key >= b_hi) s[j][2 + e] = -INFINITY;
          }
      }
      float tile_a = -INFINITY, tile_b = -INFINITY;
#pragma unroll
      for (int j = 0; j < kSubKeys / 8; ++j) {
        tile_a = fmaxf(tile_a, fmaxf(s[j][0], s[j][1]));
        tile_b = fmaxf(tile_b, fmaxf(s[j][2], s[j][3]));
      }
#pragma unroll
      for (int x = 1; x <= 2; x <<= 1) {
        tile_a = fmaxf(tile_a, __shfl_xor_sync(0xffffffffu, tile_a, x));
        tile_b = fmaxf(tile_b, __shfl_xor_sync(0xffffffffu, tile_b, x));
      }
      const float new_a = fmaxf(m_a, tile_a), new_b = fmaxf(m_b, tile_b);
      // A row that has seen no key of its segment yet keeps m = -inf; 0 stands in for it so
      // no -inf - -inf appears (its p are all 0 then).
      const float ref_a = new_a == -INFINITY ? 0.f : new_a, ref_b = new_b == -INFINITY ? 0.f : new_b;
      const float corr_a = detail::fast_exp2(m_a - ref_a), corr_b = detail::fast_exp2(m_b - ref_b);
      m_a = new_a;
      m_b = new_b;
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int j = 0; j < kSubKeys / 8; ++j) {
        s[j][0] = detail::fast_exp2(s[j][0] - ref_a);
        s[j][1] = detail::fast_exp2(s[j][1] - ref_a);
        s[j][2] = detail::fast_exp2(s[j][2] - ref_b);
        s[j][3] = detail::fast_exp2(s[j][3] - ref_b);
        sum_a += s[j][0] + s[j][1];
        sum_b += s[j][2] + s[j][3];
      }
      l_a = l_a * corr_a + sum_a;
      l_b = l_b * corr_b + sum_b;
#pragma unroll
      for (int c = 0; c < kDimBlocks; ++c) {
        o[c][0] *= corr_a;
        o[c][1] *= corr_a;
        o[c][2] *= corr_b;
        o[c][3] *= corr_b;
      }

      // O += P V: k-steps of 16 keys; P's A fragments straight from the S accumulators.
      {
        const int m = lane >> 3, r = lane & 7;
#pragma unroll
        for (int u = 0; u < kSubKeys / 16; ++u) {
          const uint32_t pa[4] = {pack_bf16(s[2 * u][0], s[2 * u][1]), pack_bf16(s[2 * u][2], s[2 * u][3]),
                                  pack_bf16(s[2 * u + 1][0], s[2 * u + 1][1]),
                                  pack_bf16(s[2 * u + 1][2], s[2 * u + 1][3])};
#pragma unroll
          for (int c = 0; c < kDimBlocks; c += 2) {
            uint32_t b[4];
            detail::ldsm_x4_trans(b,
                                  detail::smem_addr(svv + (16 * u + r + 8 * (m & 1)) * kStride + 8 * c + 8 * (m >> 1)));
            detail::mma16816<false>(o[c], pa, b[0], b[1]);
            detail::mma16816<false>(o[c + 1], pa, b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every thread is done with this stage before the next load refills it
  }

  // The row sums are split over the four threads of a row.
#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const float inv_a = l_a > 0.f ? 1.f / l_a : 0.f, inv_b = l_b > 0.f ? 1.f / l_b : 0.f;
  const int64_t ld = static_cast<int64_t>(heads) * d;
  __nv_bfloat16* const out_a = out + static_cast<int64_t>(row_a) * ld + static_cast<int64_t>(h) * d;
  __nv_bfloat16* const out_b = out_a + 8 * ld;
  const bool pairs = (d & 1) == 0;  // (h d + col) even: 4-byte stores of two columns
#pragma unroll
  for (int c = 0; c < kDimBlocks; ++c) {
    const int col = 8 * c + 2 * t;
    if (col >= d) continue;
    if (pairs) {
      if (row_a < rows)
        *reinterpret_cast<__nv_bfloat162*>(out_a + col) = __floats2bfloat162_rn(o[c][0] * inv_a, o[c][1] * inv_a);
      if (row_b < rows)
        *reinterpret_cast<__nv_bfloat162*>(out_b + col) = __floats2bfloat162_rn(o[c][2] * inv_b, o[c][3] * inv_b);
    } else {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (col + e >= d) continue;
        if (row_a < rows) out_a[col + e] = __float2bfloat16_rn(o[c][e] * inv_a);
        if (row_b < rows) out_b[col + e] = __float2bfloat16_rn(o[c][2 + e] * inv_b);
      }
    }
  }
#endif
}

template <int DP>
void launch_tc(const __nv_bfloat16* packed, const int64_t* offsets, int n_segments, int rows, int heads, int d,
               __nv_bfloat16* out, Stream stream) {
  constexpr size_t smem = smem_bytes<DP>();
  static const bool attr_set = [] {
    check_cuda(cudaFuncSetAttribute(segment_attention_tc_kernel<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               "segment_attention_tc: shared memory attribute");
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>((rows + kRows - 1) / kRows), static_cast<unsigned>(heads));
  launch_dependent("segment_attention_tc", segment_attention_tc_kernel<DP>, grid, dim3(kThreads), smem, stream, packed,
                   offsets, n_segments, rows, heads, d, out);
}

}  // namespace

int64_t segment_attention_tc_scratch_bytes(int64_t rows, int64_t heads, int64_t d) {
  return 3 * rows * heads * padded_width(d) * static_cast<int64_t>(sizeof(__nv_bfloat16));
}

void segment_attention_tc(const SegmentOperands& in, const int64_t* offsets, int64_t n_segments, int64_t rows,
                          int64_t heads, int64_t d, float scale, void* scratch, void* out, Stream stream) {
  if (rows <= 0) return;
  if (rows > (int64_t{1} << 23)) throw std::invalid_argument("segment_attention_tc: more than 2^23 rows");
  const int dp = padded_width(d);
  auto* packed = static_cast<__nv_bfloat16*>(scratch);
  const Pack p{in, rows, static_cast<int>(heads), static_cast<int>(d), dp, scale * kLog2e, packed};
  const dim3 pack_grid(static_cast<unsigned>(grid_for(rows * dp, 256)), static_cast<unsigned>(3 * heads));
  launch_dependent("segment_attention_tc pack", pack_kernel, pack_grid, dim3(256), 0, stream, p);
  const int ns = static_cast<int>(n_segments), rs = static_cast<int>(rows), hs = static_cast<int>(heads),
            ds = static_cast<int>(d);
  auto* o = static_cast<__nv_bfloat16*>(out);
  switch (dp / 16) {
    case 1: launch_tc<16>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 2: launch_tc<32>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 3: launch_tc<48>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 4: launch_tc<64>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 5: launch_tc<80>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 6: launch_tc<96>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    case 7: launch_tc<112>(packed, offsets, ns, rs, hs, ds, o, stream); break;
    default: launch_tc<128>(packed, offsets, ns, rs, hs, ds, o, stream); break;
  }
}

}  // namespace ds::cuda::ops

// Non-causal attention within segments (the vision encoder's images): one warp per (query
// row, head), 32 keys a step with one key per lane (the query in every lane's registers), an
// online softmax in f32, and the output accumulated with each lane owning d / 32 of its
// columns. Correct for any segment length and head sizes up to 128; the f32 path (an f32
// output: the f32-weight reference mode). The backend sends bf16 outputs to
// segment_attention_tc.cu.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 4;

template <int kMaxD, bool kOutBf16>
__global__ void __launch_bounds__(kWarps * 32) segment_attention_kernel(const float* q, const float* k, const float* v,
                                                                        const int64_t* offsets, int n_segments,
                                                                        int64_t rows, int heads, int d, float scale,
                                                                        void* out) {
  wait_for_previous_kernel();
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (item >= rows * heads) return;
  const int64_t row = item / heads;
  const int h = static_cast<int>(item % heads);
  // The row's segment: the last offset at or before it.
  int lo = 0, hi = n_segments;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (offsets[mid] <= row) lo = mid; else hi = mid;
  }
  const int64_t s0 = offsets[lo], s1 = offsets[lo + 1];
  const int64_t ld = static_cast<int64_t>(heads) * d;
  float qr[kMaxD];
#pragma unroll
  for (int i = 0; i < kMaxD; ++i) qr[i] = i < d ? q[row * ld + h * d + i] * scale : 0.0f;
  constexpr int kCols = kMaxD / 32;
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t key0 = s0; key0 < s1; key0 += 32) {
    const int64_t key = key0 + lane;
    float s = -INFINITY;
    if (key < s1) {
      const float* kr = k + key * ld + h * d;
      s = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxD; ++i)
        if (i < d) s += qr[i] * kr[i];
    }
    float tile_max = s;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float m_new = fmaxf(m, tile_max);
    const float corr = expf(m - m_new);
    const float p = key < s1 ? expf(s - m_new) : 0.0f;
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[c] *= corr;
    const int n = static_cast<int>(s1 - key0 < 32 ? s1 - key0 : 32);
    for (int j = 0; j < n; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float* vr = v + (key0 + j) * ld + h * d;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int i = lane + 32 * c;
        if (i < d) acc[c] += pj * vr[i];
      }
    }
    m = m_new;
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int i = lane + 32 * c;
    if (i < d) store_act<kOutBf16>(out, row * ld + h * d + i, acc[c] * inv);
  }
}

template <int kMaxD>
void launch(const float* q, const float* k, const float* v, const int64_t* offsets, int n_segments, int64_t rows,
            int heads, int d, float scale, void* out, DType out_type, Stream stream) {
  const auto kern = out_type == DType::bf16 ? segment_attention_kernel<kMaxD, true> : segment_attention_kernel<kMaxD, false>;
  launch_dependent("segment_attention", kern, dim3(grid_for(rows * heads, kWarps)), dim3(kWarps * 32), 0, stream, q, k,
                   v, offsets, n_segments, rows, heads, d, scale, out);
}

}  // namespace

bool segment_attention_supported(int64_t d) { return d >= 1 && d <= 128; }

void segment_attention(const float* q, const float* k, const float* v, const int64_t* offsets, int64_t n_segments,
                       int64_t rows, int64_t heads, int64_t d, float scale, void* out, DType out_type, Stream stream) {
  if (rows <= 0) return;
  if (d <= 64)
    launch<64>(q, k, v, offsets, static_cast<int>(n_segments), rows, static_cast<int>(heads), static_cast<int>(d), scale,
               out, out_type, stream);
  else
    launch<128>(q, k, v, offsets, static_cast<int>(n_segments), rows, static_cast<int>(heads), static_cast<int>(d),
                scale, out, out_type, stream);
}

}  // namespace ds::cuda::ops

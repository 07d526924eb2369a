// Tensor-core GEMM for small decode batches (2 to 8 rows): out [M, N] (+)= x [M, K] · w [N, K]ᵀ,
// bf16 operands, fp32 accumulation. Like the one-row GEMV (gemv.cu) it streams the weight
// matrix once; the rows of x ride along as the 8-column side of mma.m16n8k16, so the weights
// are read once for all M rows (cuBLAS at these shapes is a general GEMM that loses to the
// weight-streaming floor, and the GEMV re-read the weights per row).
//
// A block owns 16 output features (weight rows n0..n0+15); its 8 warps split K, warp w taking
// the 64-element chunks w, w + 8, ..., and add their partial tiles in shared memory at the end
// (a fixed order: the result does not depend on timing). Per chunk and per weight row it
// holds (gid, gid + 8) a lane loads two 16-byte vectors (elements 8·tig.. and 32 + 8·tig..),
// and the same two vectors of x row gid (and gid + 8 for more than 8 rows). The k order
// inside a chunk is a permutation that makes those 16-byte loads the operand registers
// directly: k-step s takes words 2s and 2s + 1 of the lane's eight words, for A and B alike,
// so every product pairs the same k. Two chunks are in flight per lane (80 registers, three
// blocks per SM); the first ones are
// loaded before waiting for the previous kernel (weights only), as in gemv.cu. (A first
// version gave each warp 16 rows and all of K: 2 warps per SM for a 4096-row matrix, half
// cuBLAS's speed.)
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_gemm.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 8;
constexpr int kChunk = 64;    // k elements per chunk
constexpr int kInFlight = 2;  // chunks of weights in flight per lane

// NT column tiles of 8: rows of x 0..7 (and 8..15 when NT == 2).
template <int NT>
__global__ void __launch_bounds__(kWarps * 32, 3) skinny_gemm_kernel(const uint16_t* __restrict__ w,
                                                                  const uint16_t* __restrict__ x, int M, int64_t N,
                                                                  int64_t K, float* __restrict__ out, bool accumulate) {
  __shared__ float part[kWarps][NT * 4][32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16;
  // Rows past N read row N - 1 (their results are not stored).
  const int64_t ra = n0 + gid < N ? n0 + gid : N - 1, rb = n0 + gid + 8 < N ? n0 + gid + 8 : N - 1;
  const uint4* wa = reinterpret_cast<const uint4*>(w + ra * K) + tig;
  const uint4* wb = reinterpret_cast<const uint4*>(w + rb * K) + tig;
  const int64_t chunks = K / kChunk;  // each chunk is 8 vectors of a row; the lane's are tig and 4 + tig
  // This warp's chunks: warp + kWarps * j, j = 0, 1, ...
  const int64_t mine = chunks > warp ? (chunks - warp + kWarps - 1) / kWarps : 0;
  uint4 A[kInFlight][4];
  auto load = [&](int u, int64_t j) {
    const int64_t v = (warp + kWarps * j) * 8;
    A[u][0] = __ldg(wa + v);
    A[u][1] = __ldg(wa + v + 4);
    A[u][2] = __ldg(wb + v);
    A[u][3] = __ldg(wb + v + 4);
  };
  skinny_start<kInFlight>(mine, load);
  const SkinnyX<NT> xs = skinny_x_rows<NT>(x, M, K, gid, tig);
  float c[NT][4] = {};
  skinny_chunks<kInFlight>(mine, [&](int u, int64_t j) {
    const int64_t v = (warp + kWarps * j) * 8;
    uint4 X[NT][2];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      X[t][0] = xs.ok[t] ? __ldg(xs.r[t] + v) : make_uint4(0, 0, 0, 0);
      X[t][1] = xs.ok[t] ? __ldg(xs.r[t] + v + 4) : make_uint4(0, 0, 0, 0);
    }
    const uint4 a0 = A[u][0], a1 = A[u][1], b0 = A[u][2], b1 = A[u][3];
    if (j + kInFlight < mine) load(u, j + kInFlight);  // refill this slot early
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint4& av = s < 2 ? a0 : a1;
      const uint4& bv = s < 2 ? b0 : b1;
      const int i = 2 * (s & 1);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint4& xv = X[t][s < 2 ? 0 : 1];
        mma_bf16(c[t], word(av, i), word(bv, i), word(av, i + 1), word(bv, i + 1), word(xv, i), word(xv, i + 1));
      }
    }
  });
  skinny_epilogue<kWarps, NT>(part, c, n0, M, N, out, accumulate, 1.0f);
}

}  // namespace

bool skinny_gemm_supported(int64_t M, int64_t K) { return M >= 2 && M <= kSkinnyMaxRows && K > 0 && K % kChunk == 0; }

void skinny_gemm_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                      bool accumulate, Stream stream) {
  if (!skinny_gemm_supported(M, K)) throw std::invalid_argument("cuda backend: skinny gemm: unsupported shape");
  // One column tile (up to 8 rows). Two tiles (9-16 rows) measured slower than cuBLAS on the
  // 9B decode step (their registers spill at three blocks per SM), so those stay on cuBLAS.
  const dim3 grid(grid_for(N, 16)), block(kWarps * 32);
  launch_dependent("gemm (skinny, tensor core) kernel", skinny_gemm_kernel<1>, grid, block, 0, stream, w, x,
                   static_cast<int>(M), N, K, out, accumulate);
}

}  // namespace ds::cuda::ops

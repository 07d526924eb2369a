// GEMMs with 4-bit weights (DType::int4, kernels/tensor.h Int4Groups: codes with an f32 scale
// and a u8 zero per row and group of stored columns, and for GPTQ's act order a permutation of
// the input columns): out [M, N] (+)= x [M, K] · wᵀ with w = scale * (code - zero), x bf16,
// fp32 accumulation.
//
// Steps of 1 to 64 rows read the codes directly, half a byte per weight: one tensor-core
// kernel, the FP8 kernel's structure (fp8_gemm.cu) on 128-column chunks: a block owns 16 or 32
// weight rows, its warps split K in chunks, the codes stream through a per-warp cp.async ring
// (16 bytes, 32 codes, of each of a lane's rows per chunk), and the x rows are the 8-column side
// of mma.m16n8k16 in up to 8 column tiles that share each decoded weight fragment. A code
// becomes a bf16 by the magic-number trick: its nibble under the exponent of 128 is 128 +
// code, exactly, and one bf16x2 fma subtracts 128 + zero, leaving the exact integer code -
// zero; the products with x are exact and summed in fp32 per group, then scaled once per group
// and row. One-row steps also fuse the MLP's gate_up + SwiGLU. With a permutation each lane
// gathers its x values through it (the weights are stored in group order, so a group's columns
// are consecutive).
//
// The device layout (repack_int4, run once at upload): rows in groups of 8 (kInt4RowGroup),
// a group's chunks of 128 stored columns one after another, and in a chunk the 8 rows' 64
// bytes in row order (int4_chunk_offset), so that the 8 rows a warp's lane groups read in one
// copy are 512 contiguous bytes (a row-major layout made them 8 pieces of 64 bytes, 2 KiB or
// more apart: bench-log 2026-12-07, "int4: rows grouped by 8"). In a row's chunk, lane tig's
// 16 bytes at 16·tig, its word j holding columns 32j + 8·tig .. + 7 with columns 2i and 2i + 1
// at nibbles i and i + 4, so that one shift and mask give the pair (2i, 2i + 1) as the low
// halves of two 16-bit words: the A operand's k order, which the x values (one 16-byte load
// per word) follow. A group of 32 columns is one word of each lane: group sizes of 32, 64 and
// multiples of 128 keep every mma step inside one group.
//
// Larger steps go to cuBLAS over bf16 tiles of the weight dequantised into scratch
// (dequantize_int4_bf16, cuda_gemm_int4.cpp), in input column order.
#include <cuda_bf16.h>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/decode_gemm.cuh"
#include "kernels/cuda/skinny_gemm_tiling.cuh"
#include "kernels/tensor.h"  // kInt4RowGroup

namespace ds::cuda::ops {
namespace {

// The launch shape of skinny_gemm_tiling.cuh, on 128-column chunks. No minimum of resident
// blocks (fp8_gemm.cu asks for two with two row tiles): the per-group partial tiles need the
// registers, which two blocks of 256 threads would spill.
constexpr int kChunk = 128;  // stored columns per chunk: 16 bytes of each of a lane's weight rows

// The bytes of row n's chunk c (of `chunks` a row) from the weight's first (the layout above).
__host__ __device__ __forceinline__ int64_t int4_chunk_offset(int64_t n, int64_t c, int64_t chunks) {
  constexpr int64_t G = kernels::kInt4RowGroup;
  return ((n / G) * chunks + c) * (G * kChunk / 2) + (n % G) * (kChunk / 2);
}

// The stored column of nibble p of a device word, relative to the word's first.
__device__ __forceinline__ int nibble_column(int p) { return p < 4 ? 2 * p : 2 * (p - 4) + 1; }

// -(128 + zero) twice, as bf16.
__device__ __forceinline__ uint32_t minus_zero_pair(int zero) {
  const uint32_t b = 0xc300u | static_cast<uint32_t>(zero);
  return b | (b << 16);
}

// Columns 2i and 2i + 1 of a device word as the bf16 pair (code - zero): exact integers.
__device__ __forceinline__ uint32_t code_pair(uint32_t v, int i, uint32_t minus_zero) {
  const uint32_t biased = ((v >> (4 * i)) & 0x000f000fu) | 0x43004300u;  // 128 + code, twice
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(biased), "r"(0x3f803f80u), "r"(minus_zero));
  return r;
}

// Eight bf16 x values of row pointer xr for stored columns k0 .. k0 + 7 (k0 a multiple of 8),
// through the permutation when there is one.
template <bool kPerm>
__device__ __forceinline__ uint4 load_x8(const uint16_t* xr, const int32_t* perm, int64_t k0) {
  if constexpr (!kPerm) {
    return __ldg(reinterpret_cast<const uint4*>(xr + k0));
  } else {
    const int4 p0 = __ldg(reinterpret_cast<const int4*>(perm + k0)), p1 = __ldg(reinterpret_cast<const int4*>(perm + k0) + 1);
    const int idx[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<uint32_t>(__ldg(xr + idx[2 * i])) | (static_cast<uint32_t>(__ldg(xr + idx[2 * i + 1])) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The partial products of one warp: rows[r][0] and rows[r][1] are the weight rows of lanes'
// groups gid and gid + 8 in row tile r (16 rows each), x the M <= 8·NT input rows in NT column
// tiles of 8. Warp w takes chunks w, w + 8, ...; within a chunk, word j (32 columns) is two mma
// steps, whose products go to a fresh tile that is scaled when the group ends:
// c[r][t] (+)= scale · (16 rows x 8 x rows).
template <int NT, int RT, bool kPerm>
__device__ __forceinline__ void int4_mma_rows(const Int4Weight& w, const uint16_t* __restrict__ x, int M, int64_t K,
                                              const int64_t (&rows)[RT][2], uint4* smem, float (&c)[RT][NT][4]) {
  constexpr int V = 2 * RT, kStages = kMmaStagesFor<RT>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  const int64_t groups = K / w.group_size;
  // Words (32 columns) per group inside a chunk: 1, 2, or 4 (a group of 128 or more columns).
  const int words_per_group = w.group_size >= kChunk ? 4 : static_cast<int>(w.group_size / 32);
  const uint8_t* src[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) src[r][h] = w.codes + int4_chunk_offset(rows[r][h], 0, K / kChunk) + 16 * tig;
  const int64_t chunks = K / kChunk;
  const int mine = static_cast<int>(chunks > warp ? (chunks - warp + kMmaWarps - 1) / kMmaWarps : 0);
  uint4* ring = smem + warp * (kStages * V * 32) + lane;
  auto issue = [&](int j) {
    if (j < mine) {
      const int64_t at = static_cast<int64_t>(warp + kMmaWarps * j) * (kernels::kInt4RowGroup * kChunk / 2);
      uint4* slot = ring + (j % kStages) * V * 32;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) detail::cp_async<16>(detail::smem_addr(slot + (2 * r + h) * 32), src[r][h] + at, 16);
    }
    detail::cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) issue(j);  // no earlier kernel writes the weights
  wait_for_previous_kernel();  // x and the residual in out are the previous kernels' results
  const uint16_t* xr[NT];
  bool ok[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int m = gid + 8 * t;
    ok[t] = m < M;
    xr[t] = x + static_cast<int64_t>(ok[t] ? m : 0) * K;
  }
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[r][t][i] = 0.0f;
  // Loads that do not wait for the ring are issued before it is waited for, so their latency
  // overlaps the codes' instead of following it (bench-log 2026-12-07, "int4 decode GEMMs"):
  // with one group a chunk (group size >= 128: every released checkpoint), the next chunk's
  // scales and zeros one chunk ahead; with up to 16 x rows, the chunk's x values.
  // Four column tiles (17-32 rows) keep the in-loop group loads: there the early ones measured
  // 4-7% slower, where 1-16 rows gained 10-32% and 64 rows 8-11% (bench-log 2026-12-07,
  // "int4 loads before the ring's wait").
  const bool early_groups = words_per_group == 4 && NT != 4;
  // Group g's scales and (as -(128 + zero) pairs) zeros of the warp's rows.
  auto read_group = [&](int64_t g, float (&s)[RT][2], uint32_t (&mz)[RT][2]) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t at = rows[r][h] * groups + g;
        s[r][h] = __ldg(w.scales + at);
        mz[r][h] = minus_zero_pair(__ldg(w.zeros + at));
      }
  };
  float s_next[RT][2] = {};
  uint32_t mz_next[RT][2] = {};
  auto load_group = [&](int j) {
    if (early_groups && j < mine)
      read_group(static_cast<int64_t>(warp + kMmaWarps * j) * kChunk / w.group_size, s_next, mz_next);
  };
  load_group(0);
  constexpr bool kEarlyX = NT <= 2;
  for (int jc = 0; jc < mine; ++jc) {
    issue(jc + kStages - 1);
    const int64_t k0 = static_cast<int64_t>(warp + kMmaWarps * jc) * kChunk;
    float s[RT][2] = {};
    uint32_t mz[RT][2] = {};
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[r][h] = s_next[r][h];
        mz[r][h] = mz_next[r][h];
      }
    load_group(jc + 1);
    uint4 xe[kEarlyX ? NT : 1][4];
    if constexpr (kEarlyX) {
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          xe[t][j] = ok[t] ? load_x8<kPerm>(xr[t], w.perm, k0 + 32 * j + 8 * tig) : make_uint4(0, 0, 0, 0);
    }
    detail::cp_async_wait<kStages - 1>();  // chunk jc's group is complete
    const uint4* slot = ring + (jc % kStages) * V * 32;
    uint4 v[RT][2];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) v[r][h] = slot[(2 * r + h) * 32];
    float acc[RT][NT][4] = {};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j % words_per_group == 0) {  // a group starts: its scales and zeros
        if (!early_groups) read_group((k0 + 32 * j) / w.group_size, s, mz);
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][t][i] = 0.0f;
      }
      uint32_t a[RT][2][4];
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) a[r][h][i] = code_pair(word(v[r][h], j), i, mz[r][h]);
      const int64_t kx = k0 + 32 * j + 8 * tig;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        uint4 xv;
        if constexpr (kEarlyX)
          xv = xe[t][j];
        else
          xv = ok[t] ? load_x8<kPerm>(xr[t], w.perm, kx) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          mma_bf16(acc[r][t], a[r][0][0], a[r][1][0], a[r][0][1], a[r][1][1], xv.x, xv.y);
          mma_bf16(acc[r][t], a[r][0][2], a[r][1][2], a[r][0][3], a[r][1][3], xv.z, xv.w);
        }
      }
      if ((j + 1) % words_per_group == 0) {  // the group ends
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            c[r][t][0] = fmaf(s[r][0], acc[r][t][0], c[r][t][0]);
            c[r][t][1] = fmaf(s[r][0], acc[r][t][1], c[r][t][1]);
            c[r][t][2] = fmaf(s[r][1], acc[r][t][2], c[r][t][2]);
            c[r][t][3] = fmaf(s[r][1], acc[r][t][3], c[r][t][3]);
          }
      }
    }
  }
  detail::cp_async_wait<0>();  // the ring becomes the epilogue's scratch
  __syncthreads();
}

// out [M, N] (+)= x [M, K] · wᵀ; a block owns weight rows n0..n0 + 16·RT - 1.
template <int NT, int RT, bool kPerm>
__global__ void __launch_bounds__(kMmaWarps * 32)
    int4_mma_gemm_kernel(Int4Weight w, const uint16_t* __restrict__ x, int M, int64_t N, int64_t K,
                         float* __restrict__ out, bool accumulate) {
  extern __shared__ uint4 smem[];
  const int gid = (threadIdx.x & 31) >> 2;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 16 * RT;
  int64_t rows[RT][2];
  mma_block_rows<RT>(n0, N, gid, rows);
  float c[RT][NT][4];
  int4_mma_rows<NT, RT, kPerm>(w, x, M, K, rows, smem, c);
  mma_store_rows<NT, RT>(reinterpret_cast<float*>(smem), c, n0, M, N, out, accumulate);
}

// act[i] = silu(w[i] · x) * (w[I + i] · x) for one x row: a block owns act columns
// i0..i0 + 7, its lane groups gid the gate rows and gid + 8 the up rows.
template <bool kBf16Out, bool kPerm>
__global__ void __launch_bounds__(kMmaWarps * 32) int4_mma_swiglu_kernel(Int4Weight w, const uint16_t* __restrict__ x,
                                                                      int64_t inter, int64_t K, void* __restrict__ act) {
  extern __shared__ uint4 smem[];
  const int gid = (threadIdx.x & 31) >> 2;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * 8;
  const int64_t i = i0 + gid < inter ? i0 + gid : inter - 1;
  const int64_t rows[1][2] = {{i, inter + i}};
  float c[1][1][4];
  int4_mma_rows<1, 1, kPerm>(w, x, 1, K, rows, smem, c);
  mma_store_swiglu<kBf16Out>(reinterpret_cast<float*>(smem), c[0], i0, inter, act);
}

// ---- layout and dequantisation

// One thread per (row, chunk): the host form (column k at nibble k % 2 of byte k / 2 of its
// row, so word q of a chunk holds columns 8q .. 8q + 7 in order) to the device layout above.
__global__ void repack_int4_kernel(const uint8_t* __restrict__ host_form, uint8_t* __restrict__ codes, int64_t rows,
                                   int64_t chunks) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / chunks, c = i % chunks;
    const uint4* p = reinterpret_cast<const uint4*>(host_form + i * (kChunk / 2));
    const uint4 a = p[0], b = p[1], d = p[2], e = p[3];
    const uint32_t in[16] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, d.x, d.y, d.z, d.w, e.x, e.y, e.z, e.w};
    uint32_t out[16];
#pragma unroll
    for (int tig = 0; tig < 4; ++tig)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t v = in[4 * j + tig];
        uint32_t r = 0;
#pragma unroll
        for (int n = 0; n < 8; ++n) r |= ((v >> (4 * nibble_column(n))) & 15u) << (4 * n);
        out[4 * tig + j] = r;
      }
    uint4* q = reinterpret_cast<uint4*>(codes + int4_chunk_offset(n, c, chunks));
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] = make_uint4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]);
  }
}

// out [N, K] bf16 (input column order) = scale * (code - zero), one thread per device word.
template <bool kPerm>
__global__ void dequantize_int4_kernel(Int4Weight w, int64_t N, int64_t K, uint16_t* __restrict__ out) {
  wait_for_previous_kernel();  // out is scratch that the previous GEMM may still read
  const int64_t words_per_row = K / 8, groups = K / w.group_size;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N * words_per_row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / words_per_row, q = i % words_per_row;
    const int64_t within = q % 16, tig = within / 4, j = within % 4;
    const int64_t k0 = (q / 16) * kChunk + 32 * j + 8 * tig;
    const uint32_t v = reinterpret_cast<const uint32_t*>(w.codes + int4_chunk_offset(n, q / 16, K / kChunk))[within];
    const int64_t g = n * groups + k0 / w.group_size;
    const float s = w.scales[g];
    const int zero = w.zeros[g];
    uint16_t h[8];
#pragma unroll
    for (int p = 0; p < 8; ++p)
      h[nibble_column(p)] = detail::f32_to_bf16_bits(s * static_cast<float>(static_cast<int>((v >> (4 * p)) & 15u) - zero));
    uint16_t* row = out + n * K;
    if constexpr (kPerm) {
#pragma unroll
      for (int e = 0; e < 8; ++e) row[w.perm[k0 + e]] = h[e];
    } else {
      *reinterpret_cast<uint4*>(row + k0) = make_uint4(h[0] | (uint32_t{h[1]} << 16), h[2] | (uint32_t{h[3]} << 16),
                                                       h[4] | (uint32_t{h[5]} << 16), h[6] | (uint32_t{h[7]} << 16));
    }
  }
}

template <bool kPerm>
void launch_int4_rows(const Int4Weight& w, const uint16_t* x, int M, int64_t N, int64_t K, float* out, bool accumulate,
                      Stream stream) {
  with_mma_tiles(M, [&](auto nt, auto rt) {
    constexpr int NT = decltype(nt)::value, RT = decltype(rt)::value;
    launch_mma<int4_mma_gemm_kernel<NT, RT, kPerm>, mma_smem_bytes<NT, RT>()>("gemm (int4, tensor core) kernel", N,
                                                                             16 * RT, stream, w, x, M, N, K, out,
                                                                             accumulate);
  });
}

template <bool kBf16Out, bool kPerm>
void launch_int4_swiglu(const Int4Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, Stream stream) {
  launch_mma<int4_mma_swiglu_kernel<kBf16Out, kPerm>, mma_smem_bytes<1, 1>()>(
      "gate_up + swiglu (int4, tensor core) kernel", inter, 8, stream, w, x, inter, K, act);
}

}  // namespace

// The columns the kernels take (any rows of an uploaded weight: a view starts on a row group).
static bool int4_columns_supported(int64_t K, int64_t group_size) {
  return K > 0 && K % kChunk == 0 && group_size > 0 && K % group_size == 0 &&
         (group_size == 32 || group_size == 64 || group_size % kChunk == 0);
}

bool int4_layout_supported(int64_t N, int64_t K, int64_t group_size) {
  return N % kernels::kInt4RowGroup == 0 && int4_columns_supported(K, group_size);
}

bool skinny_gemm_int4_supported(int64_t M) { return M >= 1 && M <= kSkinnyInt4MaxRows; }

void repack_int4(const uint8_t* host_form, uint8_t* codes, int64_t N, int64_t K, Stream stream) {
  if (N % kernels::kInt4RowGroup != 0) throw std::invalid_argument("cuda backend: int4 repack: rows not in groups of 8");
  const int64_t items = N * (K / kChunk);
  if (items == 0) return;
  const int threads = 256;
  const unsigned blocks = grid_for(items < int64_t{1} << 22 ? items : int64_t{1} << 22, threads);
  repack_int4_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(host_form, codes, N, K / kChunk);
  check_cuda(cudaGetLastError(), "int4 repack kernel");
}

void skinny_gemm_int4(const Int4Weight& w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                      bool accumulate, Stream stream) {
  if (!skinny_gemm_int4_supported(M) || !int4_columns_supported(K, w.group_size))
    throw std::invalid_argument("cuda backend: int4 skinny gemm: unsupported shape");
  if (N == 0) return;
  if (w.perm)
    launch_int4_rows<true>(w, x, static_cast<int>(M), N, K, out, accumulate, stream);
  else
    launch_int4_rows<false>(w, x, static_cast<int>(M), N, K, out, accumulate, stream);
}

void skinny_swiglu_int4(const Int4Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                        Stream stream) {
  if (!int4_columns_supported(K, w.group_size))
    throw std::invalid_argument("cuda backend: int4 gate_up + swiglu: unsupported shape");
  if (inter == 0) return;
  const bool bf16 = act_type == DType::bf16;
  if (w.perm)
    bf16 ? launch_int4_swiglu<true, true>(w, x, inter, K, act, stream) : launch_int4_swiglu<false, true>(w, x, inter, K, act, stream);
  else
    bf16 ? launch_int4_swiglu<true, false>(w, x, inter, K, act, stream) : launch_int4_swiglu<false, false>(w, x, inter, K, act, stream);
}

void dequantize_int4_bf16(const Int4Weight& w, int64_t N, int64_t K, uint16_t* out, Stream stream) {
  if (N == 0 || K == 0) return;
  const int threads = 256;
  const int64_t words = N * (K / 8);
  const unsigned blocks = grid_for(words < int64_t{1} << 22 ? words : int64_t{1} << 22, threads);
  if (w.perm)
    launch_dependent("int4 dequantise kernel", dequantize_int4_kernel<true>, dim3(blocks), dim3(threads), 0, stream, w,
                     N, K, out);
  else
    launch_dependent("int4 dequantise kernel", dequantize_int4_kernel<false>, dim3(blocks), dim3(threads), 0, stream, w,
                     N, K, out);
}

}  // namespace ds::cuda::ops

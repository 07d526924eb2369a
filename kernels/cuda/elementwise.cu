// Row gathers and elementwise kernels of the CUDA backend: embedding lookup, logit-row
// gather, SwiGLU (from the f32 or the bf16 projection), the q/gate split, the column split of
// fused projections, the attention output gate, bf16 conversions.
// Grid-stride loops over 64-bit element indices; one thread per element (or per 4 or 8 where
// the rows allow 8- and 16-byte accesses: the prefill-sized passes are bandwidth-bound).
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kThreads = 256;

template <bool kBf16Table>
__global__ void embedding_kernel(const void* table, const int32_t* ids, int64_t rows, int64_t hidden, float* out) {
  wait_for_previous_kernel();
  const int64_t n = rows * hidden;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / hidden, c = i - r * hidden;
    out[i] = load_act<kBf16Table>(table, static_cast<int64_t>(ids[r]) * hidden + c);
  }
}

// bf16 table rows of hidden % 8 == 0 (the prefill case): eight columns per thread, a 16-byte
// load and two 16-byte stores; blockIdx.y walks the rows.
__global__ void embedding8_bf16_kernel(const uint16_t* table, const int32_t* ids, int64_t rows, int64_t hidden,
                                       float* out) {
  wait_for_previous_kernel();
  const int64_t q = hidden / 8;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint4* src = reinterpret_cast<const uint4*>(table + static_cast<int64_t>(ids[r]) * hidden);
    float4* dst = reinterpret_cast<float4*>(out + r * hidden);
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < q; c += int64_t{gridDim.x} * blockDim.x) {
      const uint4 b = src[c];
      dst[2 * c] = make_float4(detail::bf16_bits_to_f32(b.x & 0xffffu), detail::bf16_bits_to_f32(b.x >> 16),
                               detail::bf16_bits_to_f32(b.y & 0xffffu), detail::bf16_bits_to_f32(b.y >> 16));
      dst[2 * c + 1] = make_float4(detail::bf16_bits_to_f32(b.z & 0xffffu), detail::bf16_bits_to_f32(b.z >> 16),
                                   detail::bf16_bits_to_f32(b.w & 0xffffu), detail::bf16_bits_to_f32(b.w >> 16));
    }
  }
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out) {
  wait_for_previous_kernel();
  const int64_t total = n * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i - r * width;
    out[i] = x[static_cast<int64_t>(rows[r]) * width + c];
  }
}

// Row-wise kernels: blockIdx.y walks the rows, x the columns (no per-element division).
template <bool kBf16Out>
__global__ void swiglu_kernel(const float* gate_up, int64_t m, int64_t inter, void* out) {
  wait_for_previous_kernel();
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const float* g = gate_up + r * 2 * inter;
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < inter; c += int64_t{gridDim.x} * blockDim.x)
      store_act<kBf16Out>(out, r * inter + c, silu_f(g[c]) * g[inter + c]);
  }
}

// The same with 16-byte loads: four columns per thread (inter % 4 == 0).
template <bool kBf16Out>
__global__ void swiglu4_kernel(const float* gate_up, int64_t m, int64_t inter, void* out) {
  wait_for_previous_kernel();
  const int64_t q = inter / 4;
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const float4* g = reinterpret_cast<const float4*>(gate_up + r * 2 * inter);
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < q; c += int64_t{gridDim.x} * blockDim.x) {
      const float4 a = g[c], u = g[q + c];
      const float y[4] = {silu_f(a.x) * u.x, silu_f(a.y) * u.y, silu_f(a.z) * u.z, silu_f(a.w) * u.w};
      if constexpr (kBf16Out) {
        uint2 packed;
        packed.x = detail::f32_to_bf16_bits(y[0]) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(y[1])) << 16);
        packed.y = detail::f32_to_bf16_bits(y[2]) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(y[3])) << 16);
        reinterpret_cast<uint2*>(static_cast<uint16_t*>(out) + r * inter)[c] = packed;
      } else {
        reinterpret_cast<float4*>(static_cast<float*>(out) + r * inter)[c] = make_float4(y[0], y[1], y[2], y[3]);
      }
    }
  }
}

// The tiled GEMM's bf16 product (gate_up_swiglu for steps on cuBLAS) to a bf16 product: eight
// columns per thread, 16-byte loads and stores (inter % 8 == 0).
__global__ void swiglu8_bf16_kernel(const uint16_t* gate_up, int64_t m, int64_t inter, uint16_t* out) {
  wait_for_previous_kernel();
  const int64_t q = inter / 8;
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const uint4* g = reinterpret_cast<const uint4*>(gate_up + r * 2 * inter);
    uint4* o = reinterpret_cast<uint4*>(out + r * inter);
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < q; c += int64_t{gridDim.x} * blockDim.x) {
      const uint4 a = g[c], u = g[q + c];
      const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, uw[4] = {u.x, u.y, u.z, u.w};
      uint32_t ow[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float lo = silu_f(detail::bf16_bits_to_f32(aw[j] & 0xffffu)) * detail::bf16_bits_to_f32(uw[j] & 0xffffu);
        const float hi = silu_f(detail::bf16_bits_to_f32(aw[j] >> 16)) * detail::bf16_bits_to_f32(uw[j] >> 16);
        ow[j] = detail::f32_to_bf16_bits(lo) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(hi)) << 16);
      }
      o[c] = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    }
  }
}

__global__ void split_query_gate_kernel(const float* qg, int64_t rows_heads, int64_t d, float* q, float* gate) {
  wait_for_previous_kernel();
  for (int64_t r = blockIdx.y; r < rows_heads; r += gridDim.y) {
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < d; c += int64_t{gridDim.x} * blockDim.x) {
      q[r * d + c] = qg[r * 2 * d + c];
      gate[r * d + c] = qg[r * 2 * d + d + c];
    }
  }
}

// Rows on blockIdx.y, columns on x; each column finds its part among at most four ranges.
__global__ void split_columns_kernel(const float* x, int64_t m, int64_t n, SplitParts parts) {
  wait_for_previous_kernel();
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < n; c += int64_t{gridDim.x} * blockDim.x) {
      int p = 0;
      while (p + 1 < parts.count && c >= parts.first[p + 1]) ++p;
      const int64_t width = parts.first[p + 1] - parts.first[p];
      parts.dst[p][r * width + (c - parts.first[p])] = x[r * n + c];
    }
  }
}

dim3 rows_grid(int64_t rows, int64_t cols) {
  const int64_t gx = (cols + 255) / 256;
  return dim3(static_cast<unsigned>(gx > 1024 ? 1024 : gx), static_cast<unsigned>(rows > 65535 ? 65535 : rows));
}

template <bool kBf16>
__global__ void sigmoid_gate_kernel(void* x, const float* gate, int64_t n) {
  wait_for_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    store_act<kBf16>(x, i, load_act<kBf16>(x, i) * sigmoid_f(gate[i]));
}

// bf16 x (the attention output) with four elements per thread: 8-byte x, 16-byte gate accesses.
__global__ void sigmoid_gate4_bf16_kernel(uint16_t* x, const float* gate, int64_t n4) {
  wait_for_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4; i += int64_t{gridDim.x} * blockDim.x) {
    const uint2 v = reinterpret_cast<const uint2*>(x)[i];
    const float4 g = reinterpret_cast<const float4*>(gate)[i];
    const float y0 = detail::bf16_bits_to_f32(v.x & 0xffffu) * sigmoid_f(g.x);
    const float y1 = detail::bf16_bits_to_f32(v.x >> 16) * sigmoid_f(g.y);
    const float y2 = detail::bf16_bits_to_f32(v.y & 0xffffu) * sigmoid_f(g.z);
    const float y3 = detail::bf16_bits_to_f32(v.y >> 16) * sigmoid_f(g.w);
    uint2 o;
    o.x = detail::f32_to_bf16_bits(y0) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(y1)) << 16);
    o.y = detail::f32_to_bf16_bits(y2) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(y3)) << 16);
    reinterpret_cast<uint2*>(x)[i] = o;
  }
}

__global__ void to_bf16_kernel(const float* x, uint16_t* out, int64_t n) {
  wait_for_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = detail::f32_to_bf16_bits(x[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t* x, float* out, int64_t n) {
  wait_for_previous_kernel();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = detail::bf16_bits_to_f32(x[i]);
}

// Enough blocks to cover n once, capped (the loops stride over the rest).
unsigned blocks_for(int64_t n) {
  const int64_t g = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65536 ? 65536 : g));
}

}  // namespace

void embedding(const void* table, DType table_type, const int32_t* ids, int64_t rows, int64_t hidden, float* out,
               Stream stream) {
  if (rows * hidden == 0) return;
  if (table_type == DType::bf16 && hidden % 8 == 0 && aligned_to(table, 16) && aligned_to(out, 16)) {
    launch_dependent("embedding8_bf16_kernel", embedding8_bf16_kernel, rows_grid(rows, hidden / 8), kThreads, 0, stream,
                     static_cast<const uint16_t*>(table), ids, rows, hidden, out);
    return;
  }
  if (table_type == DType::bf16)
    launch_dependent("embedding_kernel", embedding_kernel<true>, blocks_for(rows * hidden), kThreads, 0, stream, table, ids, rows, hidden, out);
  else
    launch_dependent("embedding_kernel", embedding_kernel<false>, blocks_for(rows * hidden), kThreads, 0, stream, table, ids, rows, hidden, out);
}

void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out, Stream stream) {
  if (n * width == 0) return;
  launch_dependent("gather_rows_kernel", gather_rows_kernel, blocks_for(n * width), kThreads, 0, stream, x, rows, n, width, out);
}

void swiglu(const float* gate_up, int64_t m, int64_t inter, void* out, DType out_type, Stream stream) {
  if (m * inter == 0) return;
  const Stream s = stream;
  if (inter % 4 == 0) {
    if (out_type == DType::bf16)
      launch_dependent("swiglu4_kernel", swiglu4_kernel<true>, rows_grid(m, inter / 4), kThreads, 0, s, gate_up, m, inter, out);
    else
      launch_dependent("swiglu4_kernel", swiglu4_kernel<false>, rows_grid(m, inter / 4), kThreads, 0, s, gate_up, m, inter, out);
  } else if (out_type == DType::bf16) {
    launch_dependent("swiglu_kernel", swiglu_kernel<true>, rows_grid(m, inter), kThreads, 0, s, gate_up, m, inter, out);
  } else {
    launch_dependent("swiglu_kernel", swiglu_kernel<false>, rows_grid(m, inter), kThreads, 0, s, gate_up, m, inter, out);
  }
}

void swiglu_bf16(const uint16_t* gate_up, int64_t m, int64_t inter, uint16_t* out, Stream stream) {
  if (m * inter == 0) return;
  if (inter % 8 != 0 || !aligned_to(gate_up, 16) || !aligned_to(out, 16))
    throw std::invalid_argument("cuda backend: swiglu_bf16 needs inter % 8 == 0 and 16-byte aligned rows");
  launch_dependent("swiglu8_bf16_kernel", swiglu8_bf16_kernel, rows_grid(m, inter / 8), kThreads, 0, stream, gate_up, m,
                   inter, out);
}

void split_query_gate(const float* qg, int64_t rows_heads, int64_t d, float* q, float* gate, Stream stream) {
  if (rows_heads * d == 0) return;
  launch_dependent("split_query_gate_kernel", split_query_gate_kernel, rows_grid(rows_heads, d), kThreads, 0, stream, qg, rows_heads, d, q, gate);
}

void split_columns(const float* x, int64_t m, int64_t n, const SplitParts& parts, Stream stream) {
  if (m * n == 0) return;
  launch_dependent("split_columns_kernel", split_columns_kernel, rows_grid(m, n), kThreads, 0, stream, x, m, n, parts);
}

void sigmoid_gate(void* x, DType x_type, const float* gate, int64_t n, Stream stream) {
  if (n == 0) return;
  if (x_type == DType::bf16 && n % 4 == 0 && aligned_to(x, 8) && aligned_to(gate, 16)) {
    launch_dependent("sigmoid_gate4_bf16_kernel", sigmoid_gate4_bf16_kernel, blocks_for(n / 4), kThreads, 0, stream,
                     static_cast<uint16_t*>(x), gate, n / 4);
  } else if (x_type == DType::bf16) {
    launch_dependent("sigmoid_gate_kernel", sigmoid_gate_kernel<true>, blocks_for(n), kThreads, 0, stream, x, gate, n);
  } else {
    launch_dependent("sigmoid_gate_kernel", sigmoid_gate_kernel<false>, blocks_for(n), kThreads, 0, stream, x, gate, n);
  }
}

void to_bf16(const float* x, uint16_t* out, int64_t n, Stream stream) {
  if (n == 0) return;
  launch_dependent("to_bf16_kernel", to_bf16_kernel, blocks_for(n), kThreads, 0, stream, x, out, n);
}

void bf16_to_f32(const uint16_t* x, float* out, int64_t n, Stream stream) {
  if (n == 0) return;
  launch_dependent("bf16_to_f32_kernel", bf16_to_f32_kernel, blocks_for(n), kThreads, 0, stream, x, out, n);
}

}  // namespace ds::cuda::ops

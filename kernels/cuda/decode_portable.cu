// Portable paged decode kernel: plain CUDA-core code that also compiles with hipcc.
//
// One thread block per (work item, KV head) computes every query head of the group. Tiles
// of kTile tokens are decoded to fp32 in shared memory; logits, the online softmax (base 2)
// and the PV product each run as a block-wide loop with barriers between them, so the code
// depends on neither warp size nor warp-level instructions. It is the only kernel on HIP and
// the cross-check for the tensor-core kernel on NVIDIA; it is not tuned for speed.
#include "kernels/cuda/decode_common.cuh"

namespace ds::cuda::detail {
namespace {

constexpr int kTile = 16;
constexpr int kThreads = 128;

template <DType KT, DType VT>
__global__ void __launch_bounds__(kThreads) decode_portable_kernel(const DecodeArgs a) {
  extern __shared__ float sm[];
  const int D = a.head_dim, G = a.group;
  const int kvh = blockIdx.x;
  const ItemRange r = item_range(a, blockIdx.y);
  const int tid = threadIdx.x;
  const float neg_inf = -__builtin_huge_valf();
  float* qs = sm;              // [G][D]
  float* os = qs + G * D;      // [G][D]
  float* ks = os + G * D;      // [kTile][D]
  float* vs = ks + kTile * D;  // [kTile][D]
  float* lg = vs + kTile * D;  // [G][kTile]
  float* mst = lg + G * kTile;
  float* lst = mst + G;
  float* alpha = lst + G;
  const int64_t rk = row_bytes(KT, D), rv = row_bytes(VT, D);

  for (int idx = tid; idx < G * D; idx += kThreads) {
    const int g = idx / D, d = idx - g * D;
    qs[idx] = load_q(a, (static_cast<int64_t>(r.seq) * a.n_q_heads + kvh * G + g) * D + d) * a.q_scale;
    os[idx] = 0.f;
  }
  for (int g = tid; g < G; g += kThreads) {
    mst[g] = neg_inf;
    lst[g] = 0.f;
  }
  __syncthreads();
  const int32_t* trow = a.table + static_cast<int64_t>(r.seq) * a.table_stride;
  for (int t = r.t0; t < r.t1; t += kTile) {
    const int n = min(kTile, r.t1 - t);
    for (int idx = tid; idx < n * D; idx += kThreads) {
      const int j = idx / D, d = idx - j * D;
      const int tok = t + j;
      const int page = page_of(a, tok);
      const int64_t row = kv_row(a, trow[page], tok, page, kvh);
      ks[idx] = row >= 0 ? load_element(KT, a.k_pool + row * rk, d) : 0.f;
      vs[idx] = row >= 0 ? load_element(VT, a.v_pool + row * rv, d) : 0.f;
    }
    __syncthreads();
    for (int idx = tid; idx < G * n; idx += kThreads) {
      const int g = idx / n, j = idx - g * n;
      float dot = 0.f;
      for (int d = 0; d < D; ++d) dot += qs[g * D + d] * ks[j * D + d];
      lg[g * kTile + j] = dot;
    }
    __syncthreads();
    for (int g = tid; g < G; g += kThreads) {
      float mx = neg_inf;
      for (int j = 0; j < n; ++j) mx = fmaxf(mx, lg[g * kTile + j]);
      const float mn = fmaxf(mst[g], mx);
      const float base = mn == neg_inf ? 0.f : mn;
      const float al = exp2f(mst[g] - base);
      float sum = 0.f;
      for (int j = 0; j < n; ++j) {
        const float p = exp2f(lg[g * kTile + j] - base);
        lg[g * kTile + j] = p;
        sum += p;
      }
      lst[g] = lst[g] * al + sum;
      mst[g] = mn;
      alpha[g] = al;
    }
    __syncthreads();
    for (int idx = tid; idx < G * D; idx += kThreads) {
      const int g = idx / D, d = idx - g * D;
      float acc = os[idx] * alpha[g];
      for (int j = 0; j < n; ++j) acc += lg[g * kTile + j] * vs[j * D + d];
      os[idx] = acc;
    }
    __syncthreads();
  }
  for (int idx = tid; idx < G * D; idx += kThreads) {
    const int g = idx / D, d = idx - g * D;
    const float l = lst[g];
    const float val = l > 0.f ? os[idx] / l : 0.f;
    const float lse = l > 0.f ? mst[g] + log2f(l) : neg_inf;
    write_result(a, r, kvh * G + g, d, val, lse);
  }
}

template <DType KT>
const void* portable_symbol_v(DType v) {
  switch (v) {
    case DType::bf16: return reinterpret_cast<const void*>(&decode_portable_kernel<KT, DType::bf16>);
    case DType::f16: return reinterpret_cast<const void*>(&decode_portable_kernel<KT, DType::f16>);
    case DType::q8_0: return reinterpret_cast<const void*>(&decode_portable_kernel<KT, DType::q8_0>);
    case DType::q4_0: return reinterpret_cast<const void*>(&decode_portable_kernel<KT, DType::q4_0>);
    default: return nullptr;
  }
}

template <DType KT>
void launch_v(const DecodeArgs& a, DType v, dim3 grid, size_t smem, gpuStream_t s) {
  switch (v) {
    case DType::bf16: decode_portable_kernel<KT, DType::bf16><<<grid, kThreads, smem, s>>>(a); break;
    case DType::f16: decode_portable_kernel<KT, DType::f16><<<grid, kThreads, smem, s>>>(a); break;
    case DType::q8_0: decode_portable_kernel<KT, DType::q8_0><<<grid, kThreads, smem, s>>>(a); break;
    case DType::q4_0: decode_portable_kernel<KT, DType::q4_0><<<grid, kThreads, smem, s>>>(a); break;
    default: throw std::invalid_argument("portable decode: unsupported V type");
  }
}

}  // namespace

int64_t portable_smem_bytes(int group, int head_dim) {
  return static_cast<int64_t>(4) * (2 * group * head_dim + 2 * kTile * head_dim + group * kTile + 3 * group);
}

const void* portable_symbol(DType k, DType v) {
  switch (k) {
    case DType::bf16: return portable_symbol_v<DType::bf16>(v);
    case DType::f16: return portable_symbol_v<DType::f16>(v);
    case DType::q8_0: return portable_symbol_v<DType::q8_0>(v);
    case DType::q4_0: return portable_symbol_v<DType::q4_0>(v);
    default: return nullptr;
  }
}

void launch_portable(const DecodeArgs& a, DType k, DType v, uint32_t grid_x, uint32_t grid_y, void* stream) {
  const dim3 grid(grid_x, grid_y);
  const auto s = static_cast<gpuStream_t>(stream);
  const size_t smem = static_cast<size_t>(portable_smem_bytes(a.group, a.head_dim));
  switch (k) {
    case DType::bf16: launch_v<DType::bf16>(a, v, grid, smem, s); break;
    case DType::f16: launch_v<DType::f16>(a, v, grid, smem, s); break;
    case DType::q8_0: launch_v<DType::q8_0>(a, v, grid, smem, s); break;
    case DType::q4_0: launch_v<DType::q4_0>(a, v, grid, smem, s); break;
    default: throw std::invalid_argument("portable decode: unsupported K type");
  }
  DS_GPU_CHECK_LAUNCH();
}

}  // namespace ds::cuda::detail

// The device sampler's kernels (sampler_kernels.h): the edits, and one 1024-thread block per
// row that finds its token by argmax or by bisection searches (cuda_sampler.h), then its raw
// logprobs. A row's token mask is applied where the row is read (RowIn), so a masked row costs
// no copy, and a masked token is skipped without reading its logit.
#include "kernels/cuda/sampler_kernels.h"

#include <algorithm>

#include "kernels/cuda/backend_common.cuh"

namespace ds::cuda::sampler {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t okey(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_key(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

struct Shared {
  double d[32];
  long long ll[32];
  float f[32];
  int i[32];
};

__device__ double block_sum_d(double v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh.d[warp] = v;
  __syncthreads();
  double t = lane < static_cast<int>(blockDim.x >> 5) ? sh.d[lane] : 0.0;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();
  return t;
}

__device__ long long block_sum_ll(long long v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh.ll[warp] = v;
  __syncthreads();
  long long t = lane < static_cast<int>(blockDim.x >> 5) ? sh.ll[lane] : 0;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();
  return t;
}

// The best (value desc, id asc) pair over the block; ids < 0 are "none".
__device__ void block_best(float& v, int& id, Shared& sh) {
  auto better = [](float a, int ia, float b, int ib) {
    if (ib < 0) return ia >= 0;
    if (ia < 0) return false;
    return a > b || (a == b && ia < ib);
  };
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (better(ov, oi, v, id)) v = ov, id = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh.f[warp] = v, sh.i[warp] = id;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? sh.f[lane] : 0.0f;
    id = lane < static_cast<int>(blockDim.x >> 5) ? sh.i[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, id, o);
      if (better(ov, oi, v, id)) v = ov, id = oi;
    }
    if (lane == 0) sh.f[0] = v, sh.i[0] = id;
  }
  __syncthreads();
  v = sh.f[0];
  id = sh.i[0];
  __syncthreads();
}

// One row as the sampling sees it: its logits (raw or edited), -inf where its mask, if any,
// forbids the token (words past mask_words forbid every token, as kernels/sampler.h says).
struct RowIn {
  const float* p;
  const uint32_t* mask;  // null: no mask
  int64_t words;
  __device__ __forceinline__ float operator[](int i) const {
    if (mask == nullptr) return p[i];
    const int64_t w = i >> 5;
    return w < words && ((__ldg(mask + w) >> (i & 31)) & 1u) ? p[i] : -INFINITY;
  }
};

__global__ void copy_rows_kernel(const float* logits, float* work, const int32_t* rows, int64_t vocab) {
  const int64_t r = rows[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vocab; i += int64_t{gridDim.x} * blockDim.x)
    work[r * vocab + i] = logits[r * vocab + i];
}

// One thread per distinct (row, token): the CPU sampler's order -- biases, repetition,
// frequency and presence.
__global__ void edits_kernel(const Edit* edits, int32_t n, const float* biases, float* work, int64_t vocab) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const Edit ed = edits[e];
  float& x = work[static_cast<int64_t>(ed.row) * vocab + ed.token];
  float v = x;
  for (int b = 0; b < ed.bias_n; ++b) v += biases[ed.bias_begin + b];
  if (ed.repetition) v = v > 0 ? v / ed.rep_penalty : v * ed.rep_penalty;
  if (ed.frequency != 0.0f || ed.presence != 0.0f)
    v -= ed.frequency * ed.count + ed.presence * (ed.count > 0 ? 1.0f : 0.0f);
  x = v;
}

// The draw in token order: the smallest kept id whose cumulative mass (from id 0) exceeds
// u x the total, in two passes instead of a bisection of ~18 passes over the row (which cost
// 3.7 ms a step at 256 rows of 248K: docs/bench-log, "Host time per step"). Warp w owns
// the w-th 32nd of the ids; pass 1 sums each warp's mass (coalesced, lanes strided); the warp
// holding the draw is the first whose running total exceeds it, and that warp alone walks its
// ids 32 at a time with a scan. The walk sums in another order than pass 1, so when rounding
// leaves the draw past its end the warp's last kept id is taken (the boundary lies within
// rounding there), and when the draw is past every warp, the row's last kept id.
template <class Kept>
__device__ int draw_in_token_order(int n, float m, double u, Kept&& kept) {
  constexpr int kWarps = kThreads / 32;
  __shared__ double seg[kWarps];
  __shared__ int seg_last[kWarps];
  __shared__ int chosen, sel;
  __shared__ double sel_base, sel_r;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (n + kWarps - 1) / kWarps;
  const int b = min(n, warp * per), e = min(n, b + per);
  double mass = 0;
  int last = -1;
  for (int i = b + lane; i < e; i += 32) {
    float v;
    if (kept(i, v)) mass += static_cast<double>(expf(v - m)), last = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    mass += __shfl_xor_sync(0xffffffffu, mass, o);
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
  if (lane == 0) seg[warp] = mass, seg_last[warp] = last;
  __syncthreads();
  if (warp == 0) {  // the warps' running totals: which one holds the draw, and its base
    static_assert(kWarps == 32, "one lane per warp");
    const double t = seg[lane];
    double incl = t;
    for (int o = 1; o < 32; o <<= 1) {
      const double up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    const double r = u * __shfl_sync(0xffffffffu, incl, 31);
    const unsigned over = __ballot_sync(0xffffffffu, incl > r);
    const int w = over ? __ffs(over) - 1 : -1;
    const double base = __shfl_sync(0xffffffffu, incl - t, w < 0 ? 0 : w);
    int lk = seg_last[lane];
    for (int o = 16; o > 0; o >>= 1) lk = max(lk, __shfl_xor_sync(0xffffffffu, lk, o));
    if (lane == 0) sel = w, sel_base = base, sel_r = r, chosen = lk;
  }
  __syncthreads();
  if (warp == sel) {
    const double r = sel_r;
    double base = sel_base;
    int found = -1;
    for (int g = b; g < e && found < 0; g += 32) {
      const int i = g + lane;
      float v;
      const double w_i = i < e && kept(i, v) ? static_cast<double>(expf(v - m)) : 0.0;
      double incl = w_i;
      for (int o = 1; o < 32; o <<= 1) {
        const double up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
      }
      const unsigned over = __ballot_sync(0xffffffffu, w_i > 0 && base + incl > r);
      if (over) found = g + __ffs(over) - 1;
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) chosen = found >= 0 ? found : seg_last[warp];
  }
  __syncthreads();
  const int token = chosen;
  __syncthreads();
  return token;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, const float* work, const RowDesc* descs,
                                                          const uint32_t* masks, int64_t vocab, RowResult* results) {
  __shared__ Shared sh;
  const int row = blockIdx.x;
  const RowDesc d = descs[row];
  const uint32_t* mask = d.mask_offset >= 0 ? masks + d.mask_offset : nullptr;
  const RowIn raw{logits + static_cast<int64_t>(row) * vocab, mask, d.mask_words};
  const RowIn x{(d.use_work ? work : logits) + static_cast<int64_t>(row) * vocab, mask, d.mask_words};
  const int tid = threadIdx.x;
  const int n = static_cast<int>(vocab);
  int token = -1;

  if (!d.sample) {
    float best = -INFINITY;
    int id = -1;
    long long nan = 0;
    for (int i = tid; i < n; i += kThreads) {
      const float v = x[i];
      if (v != v) ++nan;
      else if (id < 0 || v > best) best = v, id = i;
    }
    block_best(best, id, sh);
    nan = block_sum_ll(nan, sh);
    token = (nan == 0 && id >= 0 && isfinite(best)) ? id : -1;
  } else {
    const float T = d.temperature;
    float m = -INFINITY;
    int mid_ = -1;
    long long bad = 0;
    for (int i = tid; i < n; i += kThreads) {
      const float v = x[i];
      if (v != v || v == INFINITY) ++bad;
      const float s = v / T;
      if (mid_ < 0 || s > m) m = s, mid_ = i;
    }
    block_best(m, mid_, sh);
    bad = block_sum_ll(bad, sh);
    if (bad == 0 && isfinite(m)) {
      const double thr = d.min_p > 0 ? static_cast<double>(m) + log(static_cast<double>(d.min_p)) : -INFINITY;
      auto pass = [&](int i, float& s) {
        s = x[i] / T;
        return s != -INFINITY && static_cast<double>(s) >= thr;
      };
      // Cuts: (key, id) pairs; an element is kept when its key is above the cut's key, or equal
      // with an id at most the cut's id. No cut = everything that passes.
      bool k_on = false, p_on = false;
      uint32_t kk = 0, pk = 0;
      int kid = 0, pid = 0;
      auto kept1 = [&](int i, float& s) {
        if (!pass(i, s)) return false;
        if (!k_on) return true;
        const uint32_t k = okey(s);
        return k > kk || (k == kk && i <= kid);
      };
      auto kept2 = [&](int i, float& s) {
        if (!kept1(i, s)) return false;
        if (!p_on) return true;
        const uint32_t k = okey(s);
        return k > pk || (k == pk && i <= pid);
      };
      auto count_if = [&](auto&& pred) {
        long long c = 0;
        for (int i = tid; i < n; i += kThreads) c += pred(i) ? 1 : 0;
        return block_sum_ll(c, sh);
      };
      auto mass_if = [&](auto&& pred) {
        double s = 0;
        for (int i = tid; i < n; i += kThreads) {
          float v;
          if (pred(i, v)) s += static_cast<double>(expf(v - m));
        }
        return block_sum_d(s, sh);
      };
      // Smallest id with pred-count >= need among ids <= I (bisection over ids).
      auto id_cut = [&](auto&& pred, long long need) {
        int lo = 0, hi = n - 1;
        while (lo < hi) {
          const int mid = lo + (hi - lo) / 2;
          if (count_if([&](int i) { return i <= mid && pred(i); }) >= need)
            hi = mid;
          else
            lo = mid + 1;
        }
        return lo;
      };

      if (d.top_k > 0) {
        const long long cnt = count_if([&](int i) { float s; return pass(i, s); });
        if (cnt > d.top_k) {
          uint32_t lo = 0, hi = 0xffffffffu;  // count(key >= lo) >= k holds
          while (lo < hi) {
            const uint32_t mid = lo + (hi - lo) / 2 + 1;
            if (count_if([&](int i) { float s; return pass(i, s) && okey(s) >= mid; }) >= d.top_k)
              lo = mid;
            else
              hi = mid - 1;
          }
          const long long gt = count_if([&](int i) { float s; return pass(i, s) && okey(s) > lo; });
          kk = lo;
          kid = id_cut([&](int i) { float s; return pass(i, s) && okey(s) == lo; }, d.top_k - gt);
          k_on = true;
        }
      }
      if (d.top_p < 1.0f) {
        const double z = mass_if(kept1);
        const double target = static_cast<double>(d.top_p) * z;
        uint32_t lo = 0, hi = 0xffffffffu;  // mass(key >= lo) >= target holds
        while (lo < hi) {
          const uint32_t mid = lo + (hi - lo) / 2 + 1;
          if (mass_if([&](int i, float& s) { return kept1(i, s) && okey(s) >= mid; }) >= target)
            lo = mid;
          else
            hi = mid - 1;
        }
        const double gt = mass_if([&](int i, float& s) { return kept1(i, s) && okey(s) > lo; });
        const double w = static_cast<double>(expf(from_key(lo) - m));
        const long long ties = count_if([&](int i) { float s; return kept1(i, s) && okey(s) == lo; });
        long long need = w > 0 ? static_cast<long long>(ceil((target - gt) / w)) : ties;
        need = max(1LL, min(need, ties));
        const uint32_t cut = lo;
        pid = id_cut([&](int i) { float s; return kept1(i, s) && okey(s) == cut; }, need);
        pk = cut;
        p_on = true;
      }
      if (d.top_k > 0 || d.top_p < 1.0f) {
        const double total = mass_if(kept2);
        const double r = d.u * total;
        uint32_t lo = 0, hi = 0xffffffffu;  // mass(key >= lo) > r holds (u < 1)
        while (lo < hi) {
          const uint32_t mid = lo + (hi - lo) / 2 + 1;
          if (mass_if([&](int i, float& s) { return kept2(i, s) && okey(s) >= mid; }) > r)
            lo = mid;
          else
            hi = mid - 1;
        }
        const double gt = mass_if([&](int i, float& s) { return kept2(i, s) && okey(s) > lo; });
        const double w = static_cast<double>(expf(from_key(lo) - m));
        const long long ties = count_if([&](int i) { float s; return kept2(i, s) && okey(s) == lo; });
        if (ties > 0) {
          long long c = w > 0 ? static_cast<long long>(floor((r - gt) / w)) + 1 : 1;
          c = max(1LL, min(c, ties));
          const uint32_t cut = lo;
          token = id_cut([&](int i) { float s; return kept2(i, s) && okey(s) == cut; }, c);
        }
      } else {
        token = draw_in_token_order(n, m, d.u, kept2);
      }
    }
  }

  RowResult& out = results[row];
  if (tid == 0) out.token = token;
  if (d.n_top < 0 || token < 0) return;
  // Raw log-softmax: the chosen token's and the n best.
  float m = -INFINITY;
  int mi = -1;
  for (int i = tid; i < n; i += kThreads) {
    const float v = raw[i];
    if (mi < 0 || v > m) m = v, mi = i;
  }
  block_best(m, mi, sh);
  double s = 0;
  for (int i = tid; i < n; i += kThreads) s += static_cast<double>(expf(raw[i] - m));
  s = block_sum_d(s, sh);
  const double lse = static_cast<double>(m) + log(s);
  if (tid == 0) out.logprob = static_cast<float>(static_cast<double>(raw[token]) - lse);
  float pv = INFINITY;
  int pi = -1;
  for (int k = 0; k < d.n_top; ++k) {
    float bv = -INFINITY;
    int bi = -1;
    for (int i = tid; i < n; i += kThreads) {
      const float v = raw[i];
      const bool after = pi < 0 || v < pv || (v == pv && i > pi);
      if (after && (bi < 0 || v > bv)) bv = v, bi = i;
    }
    block_best(bv, bi, sh);
    if (tid == 0) {
      out.top_ids[k] = bi;
      out.top_lp[k] = static_cast<float>(static_cast<double>(bv) - lse);
    }
    pv = bv;
    pi = bi;
  }
}

}  // namespace

void launch_edits(const float* logits, float* work, const int32_t* edit_rows, int32_t n_edit_rows, const Edit* edits,
                  int32_t n_edits, const float* biases, int64_t vocab, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  copy_rows_kernel<<<dim3(static_cast<unsigned>(std::min<int64_t>((vocab + 255) / 256, 1024)),
                          static_cast<unsigned>(n_edit_rows)),
                     256, 0, s>>>(logits, work, edit_rows, vocab);
  ops::check_launch("sampler copy kernel");
  if (n_edits > 0) {
    edits_kernel<<<static_cast<unsigned>((n_edits + 255) / 256), 256, 0, s>>>(edits, n_edits, biases, work, vocab);
    ops::check_launch("sampler edits kernel");
  }
}

void launch_sample(const float* logits, const float* work, const RowDesc* descs, const uint32_t* masks, int32_t n_rows,
                   int64_t vocab, RowResult* results, void* stream) {
  sample_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, work, descs, masks, vocab, results);
  ops::check_launch("sampler kernel");
}

}  // namespace ds::cuda::sampler

// Test scenarios for paged decode: random pools with shuffled block tables, poisoned free
// slots, the float64 CPU reference, and a runner for the GPU kernels.
//
// Every pool byte that no sequence owns is 0xFF (NaN in bf16/f16 and in the f16 scale of
// Q8_0/Q4_0 blocks), including the tail of each sequence's last block, so a kernel that
// reads past a sequence or lets 0 * NaN into its products fails. Table entries past a
// sequence's last block are -1, which trips the bounds guard if a kernel touches them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/common/quant.h"
#include "kernels/cpu/paged_attention_ref.h"
#include "kernels/cuda/decode_trace.h"
#include "kernels/cuda/paged_attention.h"
#include "tests/kernels_cuda/gpu_buffer.h"

namespace ds::test {

struct Rng {  // splitmix64: fast enough to fill pools of hundreds of MB
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / 16777216.0f; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

struct Shape {
  int n_q_heads = 24, n_kv_heads = 4, head_dim = 256, block_size = 16;
};

struct Scenario {
  Shape sh;
  DType kt = DType::bf16, vt = DType::bf16;
  std::vector<int32_t> lens;
  int64_t num_blocks = 0;
  int32_t stride = 1;
  std::vector<int32_t> table;  // [n_seqs, stride]
  std::vector<uint8_t> hk, hv;
  std::vector<float> q32;
  std::vector<uint16_t> qbf;

  int n() const { return static_cast<int>(lens.size()); }
  size_t out_elems() const { return lens.size() * sh.n_q_heads * sh.head_dim; }
};

inline Scenario make_scenario(Shape sh, DType kt, DType vt, std::vector<int32_t> lens, uint64_t seed,
                              int extra_blocks = 5) {
  Rng rng(seed);
  Scenario s;
  s.sh = sh;
  s.kt = kt;
  s.vt = vt;
  s.lens = std::move(lens);
  int64_t used = 0, maxb = 1;
  for (int32_t L : s.lens) {
    used += (L + sh.block_size - 1) / sh.block_size;
    maxb = std::max<int64_t>(maxb, (L + sh.block_size - 1) / sh.block_size);
  }
  s.num_blocks = used + extra_blocks;
  s.stride = static_cast<int32_t>(maxb);
  std::vector<int32_t> ids(static_cast<size_t>(s.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
  s.table.assign(s.lens.size() * static_cast<size_t>(s.stride), -1);
  size_t next = 0;
  for (size_t i = 0; i < s.lens.size(); ++i)
    for (int64_t j = 0; j < (s.lens[i] + sh.block_size - 1) / sh.block_size; ++j)
      s.table[i * s.stride + j] = ids[next++];

  const int64_t rk = row_bytes(kt, sh.head_dim), rv = row_bytes(vt, sh.head_dim);
  const int64_t rows = s.num_blocks * sh.block_size * sh.n_kv_heads;
  s.hk.assign(static_cast<size_t>(rows * rk), 0xFF);
  s.hv.assign(static_cast<size_t>(rows * rv), 0xFF);
  std::vector<float> x(sh.head_dim);
  for (size_t i = 0; i < s.lens.size(); ++i)
    for (int32_t t = 0; t < s.lens[i]; ++t)
      for (int h = 0; h < sh.n_kv_heads; ++h) {
        const int64_t blk = s.table[i * s.stride + t / sh.block_size];
        const int64_t row = (blk * sh.block_size + t % sh.block_size) * sh.n_kv_heads + h;
        for (auto& v : x) v = rng.uniform(-2.f, 2.f);
        encode_row(kt, x.data(), &s.hk[row * rk], sh.head_dim);
        for (auto& v : x) v = rng.uniform(-2.f, 2.f);
        encode_row(vt, x.data(), &s.hv[row * rv], sh.head_dim);
      }
  s.q32.resize(s.out_elems());
  s.qbf.resize(s.out_elems());
  for (size_t i = 0; i < s.q32.size(); ++i) {
    s.q32[i] = rng.uniform(-2.f, 2.f);
    s.qbf[i] = f32_to_bf16(s.q32[i]);
  }
  return s;
}

inline std::vector<double> reference(const Scenario& s, bool q_bf16, const std::vector<int32_t>* table = nullptr) {
  cpu::PagedDecodeRefArgs a;
  a.n_seqs = s.n();
  a.n_q_heads = s.sh.n_q_heads;
  a.n_kv_heads = s.sh.n_kv_heads;
  a.head_dim = s.sh.head_dim;
  a.block_size = s.sh.block_size;
  a.num_blocks = s.num_blocks;
  a.q = q_bf16 ? static_cast<const void*>(s.qbf.data()) : static_cast<const void*>(s.q32.data());
  a.q_type = q_bf16 ? DType::bf16 : DType::f32;
  a.k_pool = s.hk.data();
  a.k_type = s.kt;
  a.v_pool = s.hv.data();
  a.v_type = s.vt;
  a.block_table = table ? table->data() : s.table.data();
  a.max_blocks_per_seq = s.stride;
  a.seq_lens = s.lens.data();
  a.scale = 1.0 / std::sqrt(static_cast<double>(s.sh.head_dim));
  return cpu::paged_attention_decode_ref(a);
}

// The scenario's data on the device.
struct DeviceScenario {
  DeviceBuffer k, v, table, lens, q32, qbf;
  explicit DeviceScenario(const Scenario& s)
      : k(to_device(s.hk)), v(to_device(s.hv)), table(to_device(s.table)), lens(to_device(s.lens)),
        q32(to_device(s.q32)), qbf(to_device(s.qbf)) {}
};

struct RunOptions {
  cuda::DecodeKernel kernel = cuda::DecodeKernel::tensor_core;
  int32_t chunk = 0;  // 0: planner's choice
  bool q_bf16 = false;
  DType out_type = DType::f32;
  bool bounds_check = true;
  const int32_t* table_override = nullptr;  // device table to use instead of the scenario's
  const int32_t* lens_override = nullptr;
  uint64_t* trace = nullptr;  // device: run the traced kernels (decode_trace.h) into it
  bool token_rows = true;     // DecodeOptions::token_rows
};

struct RunResult {
  std::vector<float> out;
  cuda::KvGuardReport guard;
  cuda::DecodePlan plan;
};

inline cuda::KvPoolView pool_view(const Scenario& s, DeviceScenario& d) {
  cuda::KvPoolView p;
  p.k = d.k.get();
  p.v = d.v.get();
  p.k_type = s.kt;
  p.v_type = s.vt;
  p.num_blocks = s.num_blocks;
  p.block_size = s.sh.block_size;
  p.n_kv_heads = s.sh.n_kv_heads;
  p.head_dim = s.sh.head_dim;
  return p;
}

// Runs the decode; the output buffer is filled with NaN first so unwritten elements show.
inline RunResult run_decode(const Scenario& s, DeviceScenario& d, const RunOptions& o) {
  const cuda::KvPoolView pools = pool_view(s, d);
  cuda::DecodeOptions opts;
  opts.kernel = o.kernel;
  opts.bounds_check = o.bounds_check;
  opts.chunk_tokens = o.chunk;
  opts.token_rows = o.token_rows;
  const cuda::DecodeLaunchConfig dev = cuda::choose_decode_launch(pools, s.sh.n_q_heads, opts);
  RunResult res;
  res.plan = cuda::plan_decode(dev, s.sh.n_kv_heads, s.lens, o.chunk);
  cuda::DecodeWorkspace ws(std::max<int32_t>(1, static_cast<int32_t>(res.plan.items.size())), std::max(1, s.n()),
                           s.sh.n_q_heads, s.sh.head_dim);
  ws.upload(res.plan, nullptr);
  const size_t esz = o.out_type == DType::f32 ? 4 : 2;
  DeviceBuffer out(std::max<size_t>(1, s.out_elems()) * esz);
  cuda_ok(cudaMemset(out.get(), 0xFF, out.bytes()), "poison output");
  cuda::DecodeQuery q;
  q.q = o.q_bf16 ? d.qbf.get() : d.q32.get();
  q.q_type = o.q_bf16 ? DType::bf16 : DType::f32;
  q.out = out.get();
  q.out_type = o.out_type;
  q.n_seqs = s.n();
  q.n_q_heads = s.sh.n_q_heads;
  q.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.sh.head_dim)));
  q.block_table = o.table_override ? o.table_override : d.table.as<int32_t>();
  q.block_table_stride = s.stride;
  q.seq_lens = o.lens_override ? o.lens_override : d.lens.as<int32_t>();
  try {
    if (o.trace)
      cuda::paged_attention_decode_traced(pools, q, ws, opts, o.trace, nullptr);
    else
      cuda::paged_attention_decode(pools, q, ws, opts, nullptr);
  } catch (const cuda::KvBoundsError&) {
    // Debug builds throw after the guard trips; the report was consumed by the throw.
    res.guard.tripped = true;
    res.guard.bad_id = std::numeric_limits<int32_t>::min();
  }
  cuda_ok(cudaDeviceSynchronize(), "decode");
  if (!res.guard.tripped) res.guard = ws.take_guard_report(nullptr);
  res.out.resize(s.out_elems());
  if (o.out_type == DType::f32) {
    res.out = to_host<float>(out, s.out_elems());
  } else {
    const auto raw = to_host<uint16_t>(out, s.out_elems());
    for (size_t i = 0; i < raw.size(); ++i) res.out[i] = bf16_to_f32(raw[i]);
  }
  return res;
}

struct ErrorStats {
  double max_abs = 0;
  size_t non_finite = 0;
};

inline ErrorStats compare(const std::vector<float>& got, const std::vector<double>& ref) {
  ErrorStats e;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++e.non_finite;
      continue;
    }
    e.max_abs = std::max(e.max_abs, std::fabs(static_cast<double>(got[i]) - ref[i]));
  }
  return e;
}

}  // namespace ds::test

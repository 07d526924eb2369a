#include "kernels/cpu/paged_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "kernels/common/quant.h"

namespace ds::cpu {
namespace {

void validate(const PagedDecodeRefArgs& a) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("paged_attention_decode_ref: " + m); };
  if (a.n_seqs < 0) bad("negative n_seqs");
  if (a.n_q_heads <= 0 || a.n_kv_heads <= 0 || a.n_q_heads % a.n_kv_heads != 0)
    bad("n_q_heads must be a positive multiple of n_kv_heads");
  if (a.head_dim <= 0 || a.block_size <= 0 || a.num_blocks < 0) bad("non-positive head_dim or block_size");
  if (a.q_type != DType::f32 && a.q_type != DType::bf16 && a.q_type != DType::f16) bad("q must be f32, bf16 or f16");
  if ((is_quantized(a.k_type) || is_quantized(a.v_type)) && a.head_dim % kQuantBlock != 0)
    bad("quantised pools need head_dim to be a multiple of 32");
  if (a.n_seqs > 0 && (!a.q || !a.k_pool || !a.v_pool || !a.block_table || !a.seq_lens)) bad("null pointer");
}

// One (sequence, KV head): all query heads of the group, written to out.
void decode_one(const PagedDecodeRefArgs& a, int64_t s, int64_t kvh, double* out) {
  const int64_t D = a.head_dim;
  const int64_t G = a.n_q_heads / a.n_kv_heads;
  const int64_t len = a.seq_lens[s];
  const int64_t rk = row_bytes(a.k_type, D), rv = row_bytes(a.v_type, D);
  const int32_t* table = a.block_table + s * a.max_blocks_per_seq;
  auto row_of = [&](int64_t t) {
    const int32_t blk = table[t / a.block_size];
    if (blk < 0 || blk >= a.num_blocks)
      throw std::out_of_range("paged_attention_decode_ref: block id " + std::to_string(blk) + " of sequence " +
                              std::to_string(s) + " is outside [0, " + std::to_string(a.num_blocks) + ")");
    return (static_cast<int64_t>(blk) * a.block_size + t % a.block_size) * a.n_kv_heads + kvh;
  };

  std::vector<double> q(G * D), row(D), logits(G * std::max<int64_t>(len, 1));
  const int64_t qrow_bytes = row_bytes(a.q_type, D);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t head = kvh * G + g;
    decode_row(a.q_type, static_cast<const uint8_t*>(a.q) + (s * a.n_q_heads + head) * qrow_bytes, &q[g * D], D);
  }
  for (int64_t t = 0; t < len; ++t) {
    decode_row(a.k_type, static_cast<const uint8_t*>(a.k_pool) + row_of(t) * rk, row.data(), D);
    for (int64_t g = 0; g < G; ++g) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += q[g * D + d] * row[d];
      logits[g * len + t] = dot * a.scale;
    }
  }
  std::vector<double> mx(G, -std::numeric_limits<double>::infinity()), sum(G, 0.0);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < len; ++t) mx[g] = std::max(mx[g], logits[g * len + t]);
    for (int64_t t = 0; t < len; ++t) {
      logits[g * len + t] = std::exp(logits[g * len + t] - mx[g]);
      sum[g] += logits[g * len + t];
    }
  }
  std::vector<double> acc(G * D, 0.0);
  for (int64_t t = 0; t < len; ++t) {
    decode_row(a.v_type, static_cast<const uint8_t*>(a.v_pool) + row_of(t) * rv, row.data(), D);
    for (int64_t g = 0; g < G; ++g) {
      const double p = logits[g * len + t];
      for (int64_t d = 0; d < D; ++d) acc[g * D + d] += p * row[d];
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    double* o = out + (s * a.n_q_heads + kvh * G + g) * D;
    for (int64_t d = 0; d < D; ++d) o[d] = len > 0 ? acc[g * D + d] / sum[g] : 0.0;
  }
}

}  // namespace

std::vector<double> paged_attention_decode_ref(const PagedDecodeRefArgs& a) {
  validate(a);
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    if (a.seq_lens[s] < 0 || a.seq_lens[s] > a.max_blocks_per_seq * a.block_size)
      throw std::out_of_range("paged_attention_decode_ref: sequence " + std::to_string(s) + " has length " +
                              std::to_string(a.seq_lens[s]) + ", beyond its block table row");
  }
  std::vector<double> out(a.n_seqs * a.n_q_heads * a.head_dim, 0.0);
  const int64_t units = a.n_seqs * a.n_kv_heads;
  int64_t work = 0;
  for (int64_t s = 0; s < a.n_seqs; ++s) work += a.seq_lens[s];
  // Long references (the 128K ragged case) run one (sequence, KV head) per thread.
  const int64_t threads = work * a.n_kv_heads * a.head_dim > (int64_t{1} << 24)
                              ? std::min<int64_t>(units, std::max(1u, std::thread::hardware_concurrency()))
                              : 1;
  std::vector<std::exception_ptr> errors(threads);
  auto worker = [&](int64_t tid) {
    try {
      for (int64_t u = tid; u < units; u += threads) decode_one(a, u / a.n_kv_heads, u % a.n_kv_heads, out.data());
    } catch (...) {
      errors[tid] = std::current_exception();
    }
  };
  if (threads == 1) {
    worker(0);
  } else {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto& th : pool) th.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace ds::cpu

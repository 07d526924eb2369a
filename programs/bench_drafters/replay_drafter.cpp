#include "programs/bench_drafters/replay_drafter.h"

#include <algorithm>

#include "kvcache/prefix_key.h"

namespace ds::bench {
namespace {

uint64_t prompt_hash(std::span<const int32_t> tokens, int64_t prompt_len) {
  return kvcache::chain_key(0, tokens.first(static_cast<size_t>(prompt_len)));
}

}  // namespace

ReplayDrafter::Record ReplayDrafter::find(std::span<const int32_t> tokens, int64_t prompt_len) const {
  const auto [lo, hi] = records_.equal_range(prompt_hash(tokens, prompt_len));
  for (auto it = lo; it != hi; ++it) {
    const std::vector<int32_t>& r = *it->second;
    if (static_cast<int64_t>(r.size()) > prompt_len && std::equal(tokens.begin(), tokens.begin() + prompt_len, r.begin()))
      return it->second;
  }
  return nullptr;
}

void ReplayDrafter::propose(scheduler::RequestId id, std::span<const int32_t> tokens, int64_t prompt_len,
                            int32_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  auto [it, fresh] = active_.try_emplace(id);
  Active& a = it->second;
  if (fresh) a.record = find(tokens, prompt_len), a.matched = prompt_len;
  if (!a.record) return;
  const std::vector<int32_t>& r = *a.record;
  const auto len = static_cast<int64_t>(tokens.size());
  if (len > static_cast<int64_t>(r.size()) ||
      !std::equal(tokens.begin() + a.matched, tokens.end(), r.begin() + a.matched)) {
    a.record = nullptr;  // the output went its own way
    return;
  }
  a.matched = len;
  for (int64_t p = len; p < static_cast<int64_t>(r.size()) && static_cast<int64_t>(out.size()) < max_tokens; ++p) {
    int32_t t = r[static_cast<size_t>(p)];
    if (rng_.next_unit() >= acceptance_ && vocab_ > 1)
      t = static_cast<int32_t>((t + 1 + static_cast<int64_t>(rng_.next_u64() % static_cast<uint64_t>(vocab_ - 1))) % vocab_);
    out.push_back(t);
  }
}

void ReplayDrafter::finished(scheduler::RequestId id, std::span<const int32_t> tokens, int64_t prompt_len,
                             bool completed) {
  active_.erase(id);
  if (!completed || static_cast<int64_t>(tokens.size()) <= prompt_len || find(tokens, prompt_len)) return;
  const uint64_t h = prompt_hash(tokens, prompt_len);
  Record r = std::make_shared<const std::vector<int32_t>>(tokens.begin(), tokens.end());
  records_.emplace(h, r);
  order_.emplace_back(h, r);
  if (order_.size() > kMaxRecords) {
    const auto [oh, old] = order_.front();
    order_.pop_front();
    const auto [lo, hi] = records_.equal_range(oh);
    for (auto e = lo; e != hi; ++e)
      if (e->second == old) {
        records_.erase(e);
        break;
      }
  }
}

}  // namespace ds::bench

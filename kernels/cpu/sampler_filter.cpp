// Steps 3-4 of sampling on the host: greedy, or temperature + min_p + top_k + top_p and one
// draw; and the raw log-softmax the logprobs come from.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/sampler.h"

namespace ds::kernels::cpu {
namespace {

// Largest first, ties by token id: the one order every selection here agrees on.
bool before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

// Keeps the shortest prefix of the sorted candidates whose mass reaches target (all of them
// when rounding leaves the sum just short).
void cut_nucleus(std::vector<Candidate>& sorted, float m, double target) {
  double cum = 0;
  for (size_t j = 0; j < sorted.size(); ++j) {
    cum += std::exp(sorted[j].logit - m);
    if (cum >= target) {
      sorted.resize(j + 1);
      return;
    }
  }
}

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
  // The maximum first, in independent lanes the compiler keeps in vector registers (one
  // 248k-entry row per sampled token), then the first index that holds it. v * 0 is NaN
  // exactly when v is NaN or infinite, so one sum tells whether the fast path may be trusted;
  // a row that is not all finite takes the careful loop.
  constexpr size_t kLanes = 16;
  float lane[kLanes], probe[kLanes];
  for (size_t l = 0; l < kLanes; ++l) {
    lane[l] = -std::numeric_limits<float>::infinity();
    probe[l] = 0.0f;
  }
  const size_t n = logits.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      const float v = logits[i + l];
      probe[l] += v * 0.0f;
      lane[l] = v > lane[l] ? v : lane[l];
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  float finite = 0.0f;
  for (size_t l = 0; l < kLanes; ++l) {
    best = lane[l] > best ? lane[l] : best;
    finite += probe[l];
  }
  for (; i < n; ++i) {
    const float v = logits[i];
    finite += v * 0.0f;
    best = v > best ? v : best;
  }
  if (finite == 0.0f && n > 0) {
    for (size_t j = 0; j < n; ++j)
      if (logits[j] == best) return static_cast<int32_t>(j);
  }
  // Some value is NaN or infinite: NaN fails the row, -inf never wins, +inf is not a logit.
  int32_t arg = -1;
  best = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < n; ++j) {
    const float v = logits[j];
    if (std::isnan(v)) return -1;
    if (v > best) {
      best = v;
      arg = static_cast<int32_t>(j);
    }
  }
  return std::isfinite(best) ? arg : -1;
}

bool filtered_distribution(std::span<const float> logits, const SamplerSettings& params,
                           std::vector<Candidate>& cand, std::vector<TokenProb>& out) {
  out.clear();
  cand.clear();
  if (params.greedy()) {
    const int32_t t = greedy_token(logits);
    if (t < 0) return false;
    out.push_back({t, 1.0});
    return true;
  }

  const float temperature = params.temperature;
  float m = -std::numeric_limits<float>::infinity();
  for (float v : logits) {
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) return false;
    m = std::max(m, v / temperature);
  }
  if (!std::isfinite(m)) return false;

  // min_p: p_i >= min_p * p_max  <=>  x_i >= m + log(min_p).
  const double threshold = params.min_p > 0 ? static_cast<double>(m) + std::log(static_cast<double>(params.min_p))
                                            : -std::numeric_limits<double>::infinity();
  auto passes = [&](float x) {
    return x != -std::numeric_limits<float>::infinity() && static_cast<double>(x) >= threshold;
  };

  bool sorted = false;
  const size_t vocab = logits.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab / 8) {
    // A small top_k: keep the k best in a heap while scanning (worst on top), so most tokens
    // cost one comparison and the 248k-entry candidate list is never built.
    const auto k = static_cast<size_t>(params.top_k);
    cand.reserve(k);
    for (size_t i = 0; i < vocab; ++i) {
      const Candidate c{static_cast<int32_t>(i), logits[i] / temperature};
      if (!passes(c.logit)) continue;
      if (cand.size() < k) {
        cand.push_back(c);
        std::push_heap(cand.begin(), cand.end(), before);
      } else if (before(c, cand.front())) {
        std::pop_heap(cand.begin(), cand.end(), before);
        cand.back() = c;
        std::push_heap(cand.begin(), cand.end(), before);
      }
    }
    std::sort(cand.begin(), cand.end(), before);
    sorted = true;
  } else {
    cand.reserve(vocab);
    for (size_t i = 0; i < vocab; ++i) {
      const float x = logits[i] / temperature;
      if (passes(x)) cand.push_back({static_cast<int32_t>(i), x});
    }
    if (params.top_k > 0) {
      const auto k = static_cast<size_t>(params.top_k);
      if (cand.size() > k) {
        std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(k), cand.end(), before);
        cand.resize(k);
      }
      std::sort(cand.begin(), cand.end(), before);
      sorted = true;
    }
  }
  if (cand.empty()) return false;  // cannot happen: the maximum always passes

  // Weights are exp(logit - max) in float (arguments <= 0, relative error ~1e-7; the double
  // exp cost 40% more over 248k tokens), summed in double.
  if (params.top_p < 1.0f) {
    if (!sorted) {
      // Only the nucleus needs sorting. A histogram of the mass by distance below the
      // largest logit finds the bin where the cumulative mass crosses top_p; the tokens of
      // that bin and above are sorted, the rest dropped unsorted. One pass over the
      // vocabulary, then a sort of little more than the nucleus.
      constexpr int kBins = 2048;
      constexpr float kRange = 32.0f;  // nats below the maximum; farther goes to the last bin
      constexpr float kScale = kBins / kRange;
      auto bin_of = [&](float logit) {
        const float d = (m - logit) * kScale;
        return d < static_cast<float>(kBins - 1) ? static_cast<int>(d) : kBins - 1;
      };
      std::vector<double> mass(kBins, 0.0);
      double z = 0;
      for (const Candidate& c : cand) {
        const double w = std::exp(c.logit - m);
        mass[static_cast<size_t>(bin_of(c.logit))] += w;
        z += w;
      }
      const double target = static_cast<double>(params.top_p) * z;
      double cum = 0;
      int last = kBins - 1;
      for (int b = 0; b < kBins; ++b) {
        cum += mass[static_cast<size_t>(b)];
        if (cum >= target) {
          last = b;
          break;
        }
      }
      auto end = std::partition(cand.begin(), cand.end(), [&](const Candidate& c) { return bin_of(c.logit) <= last; });
      cand.erase(end, cand.end());
      std::sort(cand.begin(), cand.end(), before);
      sorted = true;
      // The exact cut below is measured against the whole distribution's mass.
      cut_nucleus(cand, m, target);
    } else {
      double z = 0;
      for (const Candidate& c : cand) z += std::exp(c.logit - m);
      cut_nucleus(cand, m, static_cast<double>(params.top_p) * z);
    }
  }

  double total = 0;
  out.reserve(cand.size());
  for (const Candidate& c : cand) {
    const double w = std::exp(c.logit - m);
    out.push_back({c.token, w});
    total += w;
  }
  for (TokenProb& t : out) t.prob /= total;
  return true;
}

int32_t draw(std::span<const TokenProb> dist, double u) {
  if (dist.empty()) return -1;
  double cum = 0;
  for (const TokenProb& t : dist) {
    cum += t.prob;
    if (u < cum) return t.token;
  }
  return dist.back().token;
}

RawLogprobs raw_logprobs(std::span<const float> logits, int32_t token, int32_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : logits) m = std::max(m, v);
  double s = 0;
  for (float v : logits) s += std::exp(v - m);
  const double lse = static_cast<double>(m) + std::log(s);

  RawLogprobs r;
  if (token >= 0 && static_cast<size_t>(token) < logits.size())
    r.chosen = static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)]) - lse);
  if (n > 0) {
    // A short list kept sorted (n <= 20): one pass over the row, an insertion only when a
    // value beats the current n-th.
    std::vector<Candidate> best;
    best.reserve(static_cast<size_t>(n) + 1);
    for (size_t i = 0; i < logits.size(); ++i) {
      const Candidate c{static_cast<int32_t>(i), logits[i]};
      if (best.size() == static_cast<size_t>(n) && !before(c, best.back())) continue;
      best.insert(std::upper_bound(best.begin(), best.end(), c, before), c);
      if (best.size() > static_cast<size_t>(n)) best.pop_back();
    }
    for (const Candidate& c : best)
      r.top.push_back({c.token, static_cast<float>(static_cast<double>(c.logit) - lse)});
  }
  return r;
}

}  // namespace ds::kernels::cpu

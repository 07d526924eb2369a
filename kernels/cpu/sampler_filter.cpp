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

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
  int32_t best = -1;
  float best_v = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) return -1;
    if (v > best_v) {
      best_v = v;
      best = static_cast<int32_t>(i);
    }
  }
  return std::isfinite(best_v) ? best : -1;
}

bool filtered_distribution(std::span<const float> logits, const SamplingParams& params,
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
  cand.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i] / temperature;
    if (x != -std::numeric_limits<float>::infinity() && static_cast<double>(x) >= threshold)
      cand.push_back({static_cast<int32_t>(i), x});
  }
  if (cand.empty()) return false;  // cannot happen: the maximum always passes

  bool sorted = false;
  if (params.top_k > 0 && cand.size() > static_cast<size_t>(params.top_k)) {
    const auto k = static_cast<size_t>(params.top_k);
    std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(k), cand.end(), before);
    cand.resize(k);
    std::sort(cand.begin(), cand.end(), before);
    sorted = true;
  }

  if (params.top_p < 1.0f) {
    double z = 0;
    for (const Candidate& c : cand) z += std::exp(static_cast<double>(c.logit) - m);
    const double target = static_cast<double>(params.top_p) * z;
    // Sort only as long a prefix of the largest logits as the mass needs: a peaked
    // distribution reaches top_p within the first few hundred of 248k tokens.
    size_t n = sorted ? cand.size() : std::min<size_t>(cand.size(), 1024);
    size_t keep = cand.size();
    for (;;) {
      if (!sorted) {
        if (n < cand.size())
          std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(), before);
        std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), before);
      }
      double cum = 0;
      size_t j = 0;
      for (; j < n; ++j) {
        cum += std::exp(static_cast<double>(cand[j].logit) - m);
        if (cum >= target) break;
      }
      if (j < n) {
        keep = j + 1;
        break;
      }
      if (n == cand.size()) break;  // rounding: the whole list is the nucleus
      n = std::min(cand.size(), n * 8);
    }
    cand.resize(keep);
  }

  double total = 0;
  out.reserve(cand.size());
  for (const Candidate& c : cand) {
    const double w = std::exp(static_cast<double>(c.logit) - m);
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
  for (float v : logits) s += std::exp(static_cast<double>(v) - m);
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

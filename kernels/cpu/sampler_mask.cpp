// Step 0 of sampling on the host: a row's token bitmask (structured outputs; see
// kernels/sampler.h). Whole words are copied or filled at once, so an unconstrained stretch of
// the vocabulary costs a copy and a forbidden one a fill.
#include <algorithm>
#include <limits>

#include "kernels/cpu/sampler.h"

namespace ds::kernels::cpu {

void apply_token_mask(std::span<const float> logits, std::span<const uint32_t> allowed, std::vector<float>& out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  out.resize(n);
  for (size_t w = 0, base = 0; base < n; ++w, base += 32) {
    const size_t len = std::min<size_t>(32, n - base);
    const uint32_t bits = w < allowed.size() ? allowed[w] : 0u;
    if (bits == ~0u) {
      std::copy_n(logits.data() + base, len, out.data() + base);
    } else if (bits == 0) {
      std::fill_n(out.data() + base, len, kNegInf);
    } else {
      for (size_t i = 0; i < len; ++i) out[base + i] = (bits >> i) & 1u ? logits[base + i] : kNegInf;
    }
  }
}

}  // namespace ds::kernels::cpu

// The Sampler contract (sampler.h), checked once for every sampler.
#include "kernels/sampler.h"

#include <stdexcept>
#include <string>

namespace ds::kernels {

void Sampler::sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out) {
  if (rows.empty()) return;
  if (out.size() != rows.size())
    throw std::invalid_argument("sampler: " + std::to_string(out.size()) + " outputs for " +
                                std::to_string(rows.size()) + " rows");
  if (logits.dtype() != DType::f32 || logits.rank() != 2 || logits.dim(0) != static_cast<int64_t>(rows.size()) ||
      logits.dim(1) <= 0)
    throw std::invalid_argument("sampler: logits " + logits.shape().str() + " do not hold " +
                                std::to_string(rows.size()) + " f32 rows");
  for (const SampleRow& row : rows)
    if (!row.settings || !row.rng) throw std::invalid_argument("sampler: row without settings or generator");
  do_sample(logits, rows, out);
}

}  // namespace ds::kernels

// How the engine tests compare a run with an HF reference's greedy tokens, and two runs of one
// request with each other, on the backend under test (tests/test_backend.h).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/qwen35/reference_file.h"
#include "tests/test_backend.h"

namespace ds::test {

// Whether tokens are the reference's greedy tokens `want`. On the CPU backend: exactly. On CUDA
// (bf16 K/V, and bf16 weights in the production mode) a run may also leave the reference at a
// step where the reference itself is a near-tie -- its logit for our token within tie * (std of
// the row) of its own choice, in the rows of `logits_key` -- after which the rest is another,
// equally valid, continuation. A departure at a clear margin fails. `what` names the case in
// the warning.
inline bool follows_greedy(const std::vector<int32_t>& tokens, const std::vector<int32_t>& want,
                           const qwen35::ReferenceFile& ref, const std::string& logits_key, const std::string& what) {
  if (tokens.size() != want.size()) return false;
  size_t s = 0;
  while (s < tokens.size() && tokens[s] == want[s]) ++s;
  if (s == tokens.size()) return true;
  const std::string be = test::test_backend_name();
  if (be == "cpu") return false;
  const double tie = be == "cuda" ? 0.02 : 0.002;
  const std::vector<float> row = ref.matrix(logits_key).row(static_cast<int64_t>(s));
  double mean = 0, var = 0;
  for (float x : row) mean += x;
  mean /= static_cast<double>(row.size());
  for (float x : row) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / static_cast<double>(row.size()));
  const double gap = row[static_cast<size_t>(want[s])] - row[static_cast<size_t>(tokens[s])];
  WARN(what << " leaves the reference at step " << s << ": reference gap " << gap / sd << " std (tie <= " << tie
            << ")");
  return gap <= tie * sd;
}

// Whether two greedy runs of one request agree: exactly, except on the bf16 backend, which is
// not bitwise batch-invariant (cuBLAS picks other kernels for other batch sizes), where only
// the first token (the prefill's argmax) is compared; its runs are checked against the
// reference (follows_greedy) wherever one exists.
inline bool same_greedy_run(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  if (!test::test_backend_is_bf16()) return a == b;
  return a.size() == b.size() && (a.empty() || a[0] == b[0]);
}

}  // namespace ds::test

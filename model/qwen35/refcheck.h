// refcheck: run a model against a reference file (reference_file.h) the way the engine runs
// it, through real paging, and report how far its logits are from the oracle.
//
// For every prompt two sequences run side by side in the same batches: A is prefilled (in
// chunks of `chunk` tokens, or whole) with logits at every prompt position, then
// teacher-forced over greedy_tokens; B is prefilled the same way and then decodes freely,
// taking the argmax each step. A's rows are compared with prefill_logits and greedy_logits
// (relative L2 error per row) and A's argmax at each teacher-forced step with greedy_tokens
// (agreement); B's tokens must equal greedy_tokens, or, for a reduced-precision engine
// (min_agreement < 1), the teacher-forced agreement over all prompts must reach
// min_agreement instead (a bf16 engine may legitimately flip a near-tie and then wander
// off in free running). The K/V blocks come from a
// kvcache::BlockPool in shuffled order and the state slots from a kvcache::StatePool, so the
// paged paths are the ones under test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/qwen35/model.h"
#include "model/qwen35/reference_file.h"

namespace ds::qwen35 {

struct RefcheckOptions {
  int64_t chunk = 0;         // prefill chunk size; 0 = the whole prompt in one step
  double tolerance = 1e-4;   // max relative L2 error per logits row
  int32_t block_size = 8;    // small, so that prompts span many blocks
  uint64_t seed = 1;         // order in which blocks are handed out
  // 1 = free-running greedy tokens must equal the reference exactly; below 1 = the fraction of
  // teacher-forced steps whose argmax must equal the reference token (over all prompts).
  double min_agreement = 1.0;
};

struct PromptCheck {
  int index = 0;
  int64_t prompt_len = 0;
  double prefill_max_rel = 0;  // over every prompt position
  double decode_max_rel = 0;   // over the greedy_logits rows (teacher-forced)
  int64_t greedy_matched = 0;  // leading free-running tokens equal to greedy_tokens
  int64_t greedy_total = 0;
  int64_t agree = 0;           // teacher-forced steps whose argmax is the reference token
  bool pass = false;
};

struct RefcheckReport {
  std::vector<PromptCheck> prompts;
  double max_rel = 0;
  int passed = 0;
  int64_t agree = 0, steps = 0;  // teacher-forced argmax agreement over all prompts
  double min_agreement = 1.0;
  bool pass() const {
    return !prompts.empty() && passed == static_cast<int>(prompts.size()) &&
           static_cast<double>(agree) >= min_agreement * static_cast<double>(steps);
  }
};

// Relative L2 error ||a - b|| / ||b|| (absolute when b is zero), in double.
double relative_error(std::span<const float> a, std::span<const float> b);
// Index of the first maximum (torch.argmax's choice on ties).
int32_t argmax(std::span<const float> row);

// Allocates the model's cache for the reference's longest prompt and checks every prompt,
// calling on_prompt after each. Throws std::runtime_error when the reference does not fit
// the model (vocabulary, shapes).
RefcheckReport run_refcheck(Model& model, const ReferenceFile& ref, const RefcheckOptions& options,
                            const std::function<void(const PromptCheck&)>& on_prompt = {});

// "p3: 63 tokens, prefill max rel err 1.2e-06, decode max rel err 2.0e-06, greedy 24/24,
// teacher-forced argmax 24/24, PASS"
std::string format_prompt(const PromptCheck& p);
// "teacher-forced argmax 192/192\nrefcheck: PASS 8/8 prompts, max rel err 3.1e-06"
std::string format_summary(const RefcheckReport& r);

}  // namespace ds::qwen35

#include "model/qwen35/refcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "model/qwen35/refcheck_pools.h"

namespace ds::qwen35 {

double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    diff += d * d;
    ref += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  if (std::isnan(diff)) return INFINITY;
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

namespace {

struct PromptRef {
  std::vector<int32_t> prompt, greedy;
  RefMatrix prefill, greedy_logits;
};

PromptRef read_prompt(const ReferenceFile& ref, int i, int64_t vocab) {
  PromptRef r{ref.ints(prompt_tensor(i, "prompt")), ref.ints(prompt_tensor(i, "greedy_tokens")),
              ref.matrix(prompt_tensor(i, "prefill_logits")), ref.matrix(prompt_tensor(i, "greedy_logits"))};
  auto bad = [&](const std::string& what) {
    throw std::runtime_error(ref.path().string() + ": prompt " + std::to_string(i) + ": " + what);
  };
  if (r.prompt.empty()) bad("empty prompt");
  if (r.greedy.empty()) bad("no greedy tokens");
  if (r.prefill.cols() != vocab || r.greedy_logits.cols() != vocab)
    bad("logits have " + std::to_string(r.prefill.cols()) + " columns, the model's vocabulary " +
        std::to_string(vocab));
  if (r.prefill.rows() != static_cast<int64_t>(r.prompt.size())) bad("prefill_logits rows differ from the prompt length");
  if (r.greedy_logits.rows() != static_cast<int64_t>(r.greedy.size())) bad("greedy_logits rows differ from greedy_tokens");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= vocab) bad("prompt token " + std::to_string(t) + " outside the vocabulary");
  for (int32_t t : r.greedy)
    if (t < 0 || t >= vocab) bad("greedy token " + std::to_string(t) + " outside the vocabulary");
  return r;
}

}  // namespace

RefcheckReport run_refcheck(Model& model, const ReferenceFile& ref, const RefcheckOptions& opt,
                            const std::function<void(const PromptCheck&)>& on_prompt) {
  if (opt.chunk < 0) throw std::invalid_argument("refcheck: chunk must be positive");
  if (opt.block_size <= 0) throw std::invalid_argument("refcheck: block size must be positive");
  const int64_t vocab = model.config().vocab_size;
  const int32_t bs = opt.block_size;

  int64_t longest = 0;
  for (int i = 0; i < ref.num_prompts(); ++i) {
    const PromptRef r = read_prompt(ref, i, vocab);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size() + r.greedy.size()));
  }
  const kvcache::PoolSizes sizes = RefcheckPools::sizes(longest, bs);
  model.allocate_cache(sizes);

  std::mt19937_64 rng(opt.seed);
  RefcheckReport report;
  report.min_agreement = opt.min_agreement;
  std::vector<float> row(static_cast<size_t>(vocab)), want(static_cast<size_t>(vocab));
  for (int i = 0; i < ref.num_prompts(); ++i) {
    const PromptRef r = read_prompt(ref, i, vocab);
    const auto L = static_cast<int64_t>(r.prompt.size());
    const auto G = static_cast<int64_t>(r.greedy.size());

    RefcheckPools pools(sizes, model, rng);
    const kvcache::SlotId slot_a = pools.slot_a(), slot_b = pools.slot_b();
    kvcache::BlockTable ta(bs), tb(bs);

    PromptCheck pc;
    pc.index = i;
    pc.prompt_len = L;
    pc.greedy_total = G;
    std::vector<int32_t> generated;

    // Prefill, chunk by chunk, both sequences in each step.
    for (int64_t pos = 0; pos < L;) {
      const int64_t n = opt.chunk > 0 ? std::min(opt.chunk, L - pos) : L - pos;
      const bool last = pos + n == L;
      pools.grow(ta, n);
      pools.grow(tb, n);
      const std::span<const int32_t> chunk(r.prompt.data() + pos, static_cast<size_t>(n));
      ForwardBatch batch;
      batch.seqs.push_back({chunk, pos, ta.block_ids(), slot_a, static_cast<int32_t>(n)});
      batch.seqs.push_back({chunk, pos, tb.block_ids(), slot_b, last ? 1 : 0});
      const Logits& logits = model.forward(batch);
      for (int64_t t = 0; t < n; ++t) {
        logits.copy_row(t, row);
        r.prefill.row(pos + t, want);
        pc.prefill_max_rel = std::max(pc.prefill_max_rel, relative_error(row, want));
      }
      if (last) {
        logits.copy_row(n - 1, row);  // A's last position = greedy_logits row 0
        r.greedy_logits.row(0, want);
        pc.decode_max_rel = std::max(pc.decode_max_rel, relative_error(row, want));
        pc.agree += argmax(row) == r.greedy[0];
        logits.copy_row(n, row);  // B's only row
        generated.push_back(argmax(row));
      }
      ta.append_tokens(n);
      tb.append_tokens(n);
      pos += n;
    }
    // Decode: A teacher-forced over greedy_tokens, B free-running, one batch per step.
    for (int64_t s = 1; s < G; ++s) {
      pools.grow(ta, 1);
      pools.grow(tb, 1);
      ForwardBatch batch;
      batch.seqs.push_back({std::span<const int32_t>(&r.greedy[static_cast<size_t>(s - 1)], 1),
                            ta.num_tokens(), ta.block_ids(), slot_a, 1});
      batch.seqs.push_back({std::span<const int32_t>(&generated[static_cast<size_t>(s - 1)], 1),
                            tb.num_tokens(), tb.block_ids(), slot_b, 1});
      const Logits& logits = model.forward(batch);
      logits.copy_row(0, row);
      r.greedy_logits.row(s, want);
      pc.decode_max_rel = std::max(pc.decode_max_rel, relative_error(row, want));
      pc.agree += argmax(row) == r.greedy[static_cast<size_t>(s)];
      logits.copy_row(1, row);
      generated.push_back(argmax(row));
      ta.append_tokens(1);
      tb.append_tokens(1);
    }
    while (pc.greedy_matched < G &&
           generated[static_cast<size_t>(pc.greedy_matched)] == r.greedy[static_cast<size_t>(pc.greedy_matched)])
      ++pc.greedy_matched;
    pc.pass = pc.prefill_max_rel <= opt.tolerance && pc.decode_max_rel <= opt.tolerance &&
              (pc.greedy_matched == G || opt.min_agreement < 1.0);
    report.agree += pc.agree;
    report.steps += G;
    report.max_rel = std::max({report.max_rel, pc.prefill_max_rel, pc.decode_max_rel});
    report.passed += pc.pass;
    report.prompts.push_back(pc);
    if (on_prompt) on_prompt(pc);
  }
  return report;
}

std::string format_prompt(const PromptCheck& p) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "p%d: %lld tokens, prefill max rel err %.3g, decode max rel err %.3g, greedy %lld/%lld, "
                "teacher-forced argmax %lld/%lld, %s",
                p.index, static_cast<long long>(p.prompt_len), p.prefill_max_rel, p.decode_max_rel,
                static_cast<long long>(p.greedy_matched), static_cast<long long>(p.greedy_total),
                static_cast<long long>(p.agree), static_cast<long long>(p.greedy_total), p.pass ? "PASS" : "FAIL");
  return buf;
}

std::string format_summary(const RefcheckReport& r) {
  char buf[220];
  // Two lines: the teacher-forced agreement first, so that the last line is exactly the
  // "refcheck: PASS|FAIL <k>/<n> prompts, max rel err <x>" that scripts parse.
  std::snprintf(buf, sizeof buf, "teacher-forced argmax %lld/%lld\nrefcheck: %s %d/%zu prompts, max rel err %.3g",
                static_cast<long long>(r.agree), static_cast<long long>(r.steps), r.pass() ? "PASS" : "FAIL",
                r.passed, r.prompts.size(), r.max_rel);
  return buf;
}

}  // namespace ds::qwen35

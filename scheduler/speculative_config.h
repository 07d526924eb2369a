// SpeculativeConfig: how the engine drafts tokens for speculative decoding (engine.h), what
// `serve --speculative-config '{"method": ..., "num_speculative_tokens": K}'` sets.
//
// Methods (scheduler/drafter.h):
//  * "ngram": prompt lookup. The last n tokens (n from prompt_lookup_max down to
//    prompt_lookup_min) are looked for earlier in the prompt and output; the tokens that
//    followed their latest occurrence are the draft. No weights.
//  * "mtp": the checkpoint's multi-token-prediction module (scheduler/mtp_drafter.h,
//    model/qwen35/mtp.h) drafts from the target's hidden states: one module step per drafted
//    token. The model must have been loaded with it (qwen35::LoadOptions::mtp).
// An engine handed its drafter by its composition root (the benchmarks' controlled-acceptance
// drafters: programs/serve_bench) takes the method as that drafter's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::scheduler {

struct SpeculativeConfig {
  std::string method;                  // "" = off, "ngram", "mtp" (or a handed drafter's name)
  int32_t num_speculative_tokens = 0;  // K: drafted tokens verified per step (1..kMaxSpeculativeTokens)
  int32_t prompt_lookup_min = 1;       // ngram: shortest and longest suffix matched
  int32_t prompt_lookup_max = 4;
  // No drafts while more than this many sequences run (0: always draft), vLLM's
  // disable_by_batch_size: large verify steps are GEMM-bound.
  int32_t disable_by_batch_size = 0;
  // mtp: the module proposes only among token ids [0, draft_vocab_size) (0: every token), so
  // its lm_head reads that many rows instead of the whole vocabulary: the drafter's pruned
  // vocabulary of SGLang's and EAGLE's token maps, taken as a prefix because byte-level BPE
  // numbers tokens in merge order, roughly most frequent first. Verification still judges
  // drafts against the full distribution, so outputs do not change; a token past the prefix
  // is just never drafted, so the share of the traffic's tokens below N caps what acceptance
  // keeps (bench/tools/draft_vocab_coverage.py measures it; bench-log 2026-12-07, "How much
  // of a text a pruned drafting vocabulary covers"). The model rounds it up to its lm_head's
  // row blocks (qwen35::Model::mtp_vocab).
  int32_t draft_vocab_size = 0;
  // mtp: the token ids the module proposes among instead of a prefix (a token map: serve's
  // draft_token_map, a file the server reads; bench/tools/make_draft_token_map.py counts a
  // corpus's tokens into one), each once; the model gathers their lm_head rows at load
  // (qwen35::LoadOptions::mtp_draft_tokens). Empty: none.
  std::vector<int32_t> draft_tokens;

  static constexpr int32_t kMaxSpeculativeTokens = 8;

  bool enabled() const { return !method.empty(); }
  // Empty when usable, otherwise a message naming the field. handed_drafter: the engine is
  // given its drafter, so the method is only its name.
  std::string validate(bool handed_drafter = false) const {
    if (method.empty()) return {};
    if (!handed_drafter && method != "ngram" && method != "mtp")
      return "speculative method must be \"ngram\" or \"mtp\", not \"" + method + "\"";
    if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens)
      return "num_speculative_tokens must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "]";
    if (prompt_lookup_min < 1 || prompt_lookup_max < prompt_lookup_min)
      return "prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= max";
    if (disable_by_batch_size < 0) return "disable_by_batch_size must be >= 0";
    if (draft_vocab_size < 0) return "draft_vocab_size must be >= 0";
    if (draft_vocab_size > 0 && method != "mtp") return "draft_vocab_size applies to the mtp method only";
    if (!draft_tokens.empty() && method != "mtp") return "draft_token_map applies to the mtp method only";
    if (!draft_tokens.empty() && draft_vocab_size > 0) return "draft_token_map and draft_vocab_size exclude each other";
    return {};
  }
};

}  // namespace ds::scheduler

// compile() and the per-state mask precomputation (compiler.h).
#include "model/grammar/compiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "model/grammar/trie_walk.h"

namespace ds::grammar {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Setting bits one by one costs about what OR-ing a whole bitmask costs once the list is a
// quarter as long as the bitmask has words.
StateMask make_mask(std::vector<int32_t>& accepted, const TokenVocabulary& vocab) {
  StateMask m;
  const size_t a = accepted.size();
  const size_t r = static_cast<size_t>(vocab.num_text_tokens()) - a;
  const size_t list_limit = static_cast<size_t>(vocab.mask_words()) / 4;
  if (a <= r && a <= list_limit) {
    m.kind = StateMask::Kind::accept_list;
    m.tokens = std::move(accepted);
  } else if (r < a && r <= list_limit) {
    m.kind = StateMask::Kind::reject_list;
    std::vector<uint32_t> bits(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t t : accepted) bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
    const std::vector<uint32_t>& text = vocab.text_mask();
    for (size_t w = 0; w < bits.size(); ++w) {
      uint32_t rejected = text[w] & ~bits[w];
      while (rejected) {
        const int b = __builtin_ctz(rejected);
        m.tokens.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(b)));
        rejected &= rejected - 1;
      }
    }
  } else {
    m.kind = StateMask::Kind::bitmask;
    m.bits.assign(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t t : accepted) m.bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  }
  return m;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                               const CompileOptions& options) {
  CompileBudget budget(options.limits, options.cancel);
  return compile(grammar, std::move(vocab), options, budget);
}

std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                               const CompileOptions& options, CompileBudget& budget) {
  if (!vocab) throw GrammarError("grammar: no vocabulary");
  auto out = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  const auto t0 = std::chrono::steady_clock::now();
  out->pda_ = build_pda(grammar, budget);
  out->vocab_ = std::move(vocab);
  const Pda& pda = out->pda_;
  const TokenTrie& trie = out->vocab_->trie();
  out->stats_.pda_seconds = since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  // Escapes from the root rule lead to the end of the grammar, where nothing can follow,
  // unless something calls the root.
  bool root_called = false;
  for (const PdaCall& c : pda.calls) root_called = root_called || c.rule == pda.root;

  // One mask per class of states that read (mask_classes), and per whether its escapes
  // matter: states of one class may sit in rules that differ in that.
  const std::vector<int32_t> cls = mask_classes(pda, trie.max_depth + 1, budget);
  int32_t num_cls = 0;
  for (int32_t c : cls) num_cls = std::max(num_cls, c + 1);
  std::vector<int32_t> mask_of_class(2 * static_cast<size_t>(num_cls), -1);
  struct Job {
    int32_t state;
    bool keep_escapes;
  };
  std::vector<Job> jobs;
  out->mask_of_.assign(pda.num_states(), -1);
  for (size_t s = 0; s < pda.num_states(); ++s) {
    const PdaState& st = pda.states[s];
    if (!st.reads) continue;
    ++out->stats_.reading_states;
    const bool keep_escapes = st.rule != pda.root || root_called;
    int32_t& shared = mask_of_class[2 * static_cast<size_t>(cls[s]) + (keep_escapes ? 1 : 0)];
    if (shared < 0) {
      shared = static_cast<int32_t>(jobs.size());
      jobs.push_back({static_cast<int32_t>(s), keep_escapes});
    }
    out->mask_of_[s] = shared;
  }
  // Each mask is a walk of the whole vocabulary trie (about 1 ms at 248K tokens).
  if (jobs.size() > static_cast<size_t>(options.limits.max_masks))
    CompileBudget::too_large(CompileStage::masks, "distinct token masks (it needs " + std::to_string(jobs.size()) + ")",
                             options.limits.max_masks);
  out->masks_.resize(jobs.size());

  // Each worker walks the whole trie from one state at a time, with its own walker.
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    try {
      TrieWalker walker(pda, trie);
      FramePool pool;
      std::vector<int32_t> accepted, escapes;
      uint32_t visits = 0;
      for (size_t j = next++; j < jobs.size(); j = next++) {
        budget.check(CompileStage::masks);
        accepted.clear();
        escapes.clear();
        pool.clear();
        const Top start{jobs[j].state, 0};
        const bool keep = jobs[j].keep_escapes;
        walker.walk(
            0, trie.size(), 0, std::span<const Top>(&start, 1), pool,
            [&](int32_t node) {
              if ((++visits & 0xFFFF) == 0) budget.check(CompileStage::masks);
              for (int32_t k = trie.first[static_cast<size_t>(node)]; k < trie.first[static_cast<size_t>(node) + 1]; ++k)
                accepted.push_back(trie.ids[static_cast<size_t>(k)]);
            },
            [&](int32_t node) {
              if ((++visits & 0xFFFF) == 0) budget.check(CompileStage::masks);
              if (keep) escapes.push_back(node);
            });
        StateMask m = make_mask(accepted, *out->vocab_);
        m.escapes = escapes;
        budget.charge(static_cast<int64_t>((m.tokens.size() + m.escapes.size() + m.bits.size()) * 4 + 64),
                      CompileStage::masks);
        out->masks_[j] = std::move(m);
      }
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
      next = jobs.size();
    }
  };
  int32_t threads = options.threads > 0 ? options.threads
                                        : static_cast<int32_t>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  threads = std::max(1, std::min<int32_t>(threads, static_cast<int32_t>(jobs.size() / 4) + 1));
  std::vector<std::thread> pool_threads;
  for (int32_t i = 1; i < threads; ++i) pool_threads.emplace_back(work);
  work();
  for (std::thread& t : pool_threads) t.join();
  if (error) std::rethrow_exception(error);

  for (const StateMask& m : out->masks_) {
    out->stats_.escape_nodes += static_cast<int64_t>(m.escapes.size());
    out->stats_.mask_bytes += static_cast<int64_t>((m.tokens.size() + m.escapes.size()) * sizeof(int32_t) +
                                                   m.bits.size() * sizeof(uint32_t));
  }
  out->stats_.bytes = out->stats_.mask_bytes +
                      static_cast<int64_t>(pda.next.size() * sizeof(int32_t) + pda.states.size() * sizeof(PdaState) +
                                           pda.calls.size() * sizeof(PdaCall) + out->mask_of_.size() * sizeof(int32_t));
  out->stats_.budget_bytes = budget.bytes();
  out->stats_.rules = static_cast<int32_t>(pda.rule_start.size());
  out->stats_.states = static_cast<int32_t>(pda.num_states());
  out->stats_.masks = static_cast<int32_t>(out->masks_.size());
  out->stats_.mask_seconds = since(t1);
  return out;
}

}  // namespace ds::grammar

// bench_cpu_model: prefill and decode throughput of the CPU engine on a checkpoint
// (default: the bundled tiny model). Not a test: it prints tokens/s for docs/bench-log.
//
//   bench_cpu_model [--model DIR] [--prompt-len N] [--decode-steps N] [--batch B ...]
//                   [--threads T] [--repeat R]
//
// Prefill: one sequence, the whole prompt in one forward (logits of the last token only),
// best of R runs. Decode: B sequences prefilled with 16 tokens, then `decode-steps` steps of
// one token per sequence in one batch, feeding back each sequence's argmax; best of R runs.
// Block size 16, blocks handed out by a real BlockPool.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/model.h"
#include "model/qwen35/refcheck.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace q = ds::qwen35;
namespace kv = ds::kvcache;

struct Sequence {
  explicit Sequence(int32_t bs) : table(bs) {}
  kv::BlockTable table;
  kv::SlotHandle slot;
  int32_t next = 0;
};

void grow(kv::BlockPool& pool, kv::BlockTable& t, int64_t n) {
  auto r = pool.reserve(t.blocks_needed(n));
  if (!r) throw std::runtime_error("bench: out of K/V blocks");
  pool.commit(*r, t);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode tokens/s of the CPU engine."};
  std::string model_dir = DELTASERVE_DEFAULT_MODEL;
  int64_t prompt_len = 512, steps = 128;
  int repeat = 3, threads = 0;
  std::vector<int> batches = {1, 8};
  app.add_option("--model", model_dir, "checkpoint directory");
  app.add_option("--prompt-len", prompt_len, "prefill length")->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", steps, "decode steps per run")->check(CLI::PositiveNumber);
  app.add_option("--batch", batches, "decode batch sizes")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads (0 = all cores)");
  app.add_option("--repeat", repeat, "runs per measurement (best is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    auto be = ds::kernels::cpu::make_cpu_backend({threads});
    auto model = q::Model::load(*be, model_dir);
    const auto& c = model->config();
    const int32_t bs = 16, prefix = 16;
    const int max_batch = *std::max_element(batches.begin(), batches.end());
    const int64_t per_seq = std::max(prompt_len, prefix + steps);
    kv::PoolSizes sizes;
    sizes.block_size = bs;
    sizes.num_slots = max_batch;
    sizes.num_blocks = static_cast<int32_t>(max_batch * ((per_seq + bs - 1) / bs));
    model->allocate_cache(sizes);
    const std::string thread_text = threads > 0 ? std::to_string(threads) + " threads" : "all cores";
    std::printf("bench_cpu_model: %s (%lld layers, hidden %lld, vocab %lld), %s\n", model_dir.c_str(),
                static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.vocab_size), thread_text.c_str());

    std::mt19937 rng(1);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (auto& t : prompt) t = tok(rng);

    double best = 1e30;
    for (int r = 0; r < repeat; ++r) {
      kv::BlockPool pool(sizes.num_blocks, bs);
      kv::StatePool slots(sizes.num_slots, model->cache_geometry().state, model->state_zero_fn());
      Sequence s(bs);
      s.slot = *slots.acquire();
      grow(pool, s.table, prompt_len);
      q::ForwardBatch batch;
      batch.seqs.push_back({prompt, 0, &s.table, s.slot.id, 1});
      const auto t0 = Clock::now();
      model->forward(batch);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("prefill: %lld tokens in one step: %.4f s -> %.0f tokens/s (best of %d)\n",
                static_cast<long long>(prompt_len), best, static_cast<double>(prompt_len) / best, repeat);

    std::vector<float> row(static_cast<size_t>(c.vocab_size));
    std::vector<int32_t> starts(prefix + 4);  // sequence i starts at starts[i % 4]
    for (auto& t : starts) t = tok(rng);
    for (int b : batches) {
      double best_decode = 1e30;
      for (int r = 0; r < repeat; ++r) {
        kv::BlockPool pool(sizes.num_blocks, bs);
        kv::StatePool slots(sizes.num_slots, model->cache_geometry().state, model->state_zero_fn());
        std::vector<Sequence> seqs;
        seqs.reserve(static_cast<size_t>(b));
        q::ForwardBatch pre;
        for (int i = 0; i < b; ++i) {
          seqs.emplace_back(bs);
          seqs.back().slot = *slots.acquire();
          grow(pool, seqs.back().table, prefix);
        }
        for (int i = 0; i < b; ++i)
          pre.seqs.push_back({std::span<const int32_t>(starts.data() + i % 4, prefix), 0, &seqs[static_cast<size_t>(i)].table,
                              seqs[static_cast<size_t>(i)].slot.id, 1});
        const auto& first = model->forward(pre);
        for (int i = 0; i < b; ++i) {
          first.copy_row(i, row);
          seqs[static_cast<size_t>(i)].next = q::argmax(row);
          seqs[static_cast<size_t>(i)].table.append_tokens(prefix);
        }
        const auto t0 = Clock::now();
        for (int64_t step = 0; step < steps; ++step) {
          q::ForwardBatch batch;
          for (auto& s : seqs) {
            grow(pool, s.table, 1);
            batch.seqs.push_back({std::span<const int32_t>(&s.next, 1), s.table.num_tokens(), &s.table, s.slot.id, 1});
          }
          const auto& logits = model->forward(batch);
          for (int i = 0; i < b; ++i) {
            logits.copy_row(i, row);
            seqs[static_cast<size_t>(i)].next = q::argmax(row);
            seqs[static_cast<size_t>(i)].table.append_tokens(1);
          }
        }
        best_decode = std::min(best_decode, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      std::printf("decode: batch %d, %lld steps: %.4f s -> %.0f tokens/s, %.2f ms/step (best of %d)\n", b,
                  static_cast<long long>(steps), best_decode, static_cast<double>(b * steps) / best_decode,
                  1e3 * best_decode / static_cast<double>(steps), repeat);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_model: error: %s\n", e.what());
    return 1;
  }
}

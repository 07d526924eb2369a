// bench_scheduler: what the engine costs per iteration besides the model (docs/bench-log,
// "## Scheduler"). Not a test; it prints timings.
//
//   bench_scheduler [--seqs 256] [--prompt-len 128] [--iterations 2000] [--block-size 16]
//                   [--vocab 1024] [--sampler-vocab 248320] [--repeat 3]
//
// 1. policy: the Scheduler alone with --seqs sequences all decoding: schedule(), the
//    ForwardBatch the engine would build, and update() with one sampled token per sequence
//    per step. No model, no sampling, no threads. Best of --repeat runs, with per-iteration percentiles.
// 2. engine: a whole Engine over a model that costs nothing (forward returns a fixed logits
//    tensor of --vocab columns), --seqs greedy requests decoding, a client thread draining
//    every stream: wall time per iteration and the engine's own split (schedule / forward /
//    sample+bookkeeping), over the steady-state window after every request is decoding.
// 3. sampler: the CPU sampler's cost per row at --sampler-vocab (a real vocabulary), for
//    greedy, temperature + top_p 0.9, and top_k 50, on normal(0, 2) logits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/sampler.h"
#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/forward_batch.h"
#include "scheduler/engine.h"
#include "scheduler/scheduler.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace ds;
using namespace ds::scheduler;

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

struct PolicyResult {
  double mean_us = 0, p50_us = 0, p99_us = 0;
};

PolicyResult bench_policy(int seqs, int prompt_len, int iterations, int block_size) {
  const int64_t tokens_per_seq = prompt_len + iterations + 2;
  const int32_t blocks = static_cast<int32_t>(seqs * ((tokens_per_seq + block_size - 1) / block_size) + seqs);
  kvcache::BlockPool pool(blocks, block_size);
  kvcache::StatePool slots(seqs, kvcache::StateLayout{});
  Scheduler sched({seqs, 1 << 30}, pool, slots);
  FinishCriteria f;
  f.max_tokens = 1 << 30;
  f.max_ctx = 1 << 30;
  f.stop_ids = {1, 2};
  for (int i = 0; i < seqs; ++i)
    sched.add(static_cast<RequestId>(i + 1), std::vector<int32_t>(static_cast<size_t>(prompt_len), 7), f);

  qwen35::ForwardBatch batch;
  std::vector<kernels::SampledToken> sampled;
  auto step = [&] {
    const StepPlan& plan = sched.schedule();
    batch.seqs.assign(plan.chunks.begin(), plan.chunks.end());
    sampled.resize(static_cast<size_t>(plan.num_logit_rows()));
    for (kernels::SampledToken& t : sampled) t.token = 5;
    sched.update(plan, sampled);
    return plan.num_decodes;
  };
  step();  // every prompt in one step: all are decoding from here on
  std::vector<double> per_iter;
  per_iter.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto t = Clock::now();
    const int64_t decodes = step();
    per_iter.push_back(us_since(t));
    if (decodes != seqs) {
      std::fprintf(stderr, "bench_scheduler: expected %d decodes, got %lld\n", seqs, static_cast<long long>(decodes));
      std::exit(1);
    }
  }
  PolicyResult r;
  double sum = 0;
  for (double v : per_iter) sum += v;
  r.mean_us = sum / static_cast<double>(per_iter.size());
  r.p50_us = percentile(per_iter, 0.5);
  r.p99_us = percentile(per_iter, 0.99);
  return r;
}

// 4. pressure: the Scheduler alone on prompts that do not all fit the K/V pool together (an
//    agent workload's turn: --pressure-sessions prompts of --pressure-min..max tokens, all at
//    once, 64 tokens out each, a pool of --pressure-pool tokens, no prefix cache). Steps are
//    timed by a cost model (8 ms a step plus 12 us a token: a 9B on an H100, roughly), which
//    turns the plan into a simulated TTFT; the policy's cost is the preemptions and the
//    prompt tokens computed more than once.
struct PressureResult {
  int64_t steps = 0, preemptions = 0, computed = 0, prompt = 0;
  double makespan_s = 0, ttft_mean_s = 0, ttft_p50_s = 0;
};

PressureResult bench_pressure(int sessions, int64_t min_len, int64_t max_len, int64_t pool_tokens, int block_size) {
  kvcache::BlockPool pool(static_cast<int32_t>(pool_tokens / block_size), block_size);
  kvcache::StatePool slots(sessions, kvcache::StateLayout{});
  Scheduler sched({sessions, 2048}, pool, slots);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> len(min_len, max_len);
  FinishCriteria f;
  f.max_tokens = 64;
  f.max_ctx = 1 << 30;
  PressureResult r;
  for (int i = 0; i < sessions; ++i) {
    const int64_t n = len(rng);
    r.prompt += n;
    sched.add(static_cast<RequestId>(i + 1), std::vector<int32_t>(static_cast<size_t>(n), 7), f);
  }
  std::vector<double> first(static_cast<size_t>(sessions) + 1, -1.0);
  std::vector<kernels::SampledToken> sampled;
  double t = 0;
  while (sched.has_work()) {
    const StepPlan& plan = sched.schedule();
    if (plan.empty()) {
      std::fprintf(stderr, "bench_scheduler: the pressure workload stalled\n");
      std::exit(1);
    }
    t += 8e-3 + 12e-6 * static_cast<double>(plan.num_tokens);
    ++r.steps;
    r.preemptions += static_cast<int64_t>(plan.preempted.size());
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const auto id = static_cast<size_t>(plan.sequences[i]->id);
      if (plan.chunks[i].logit_rows > 0 && first[id] < 0) first[id] = t;
    }
    r.computed += plan.num_tokens - plan.num_decodes;
    sampled.assign(static_cast<size_t>(plan.num_logit_rows()), kernels::SampledToken{});
    for (kernels::SampledToken& s : sampled) s.token = 5;
    sched.update(plan, sampled);
  }
  std::vector<double> ttft(first.begin() + 1, first.end());
  double sum = 0;
  for (double v : ttft) sum += v;
  r.makespan_s = t;
  r.ttft_mean_s = sum / static_cast<double>(ttft.size());
  r.ttft_p50_s = percentile(ttft, 0.5);
  return r;
}

// A model that costs nothing: fixed logits, no caches.
class NullModel final : public ForwardModel {
 public:
  NullModel(int64_t vocab, int64_t max_rows) : vocab_(vocab), data_(static_cast<size_t>(vocab * max_rows)) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (auto& v : data_) v = nd(rng);
  }
  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> eos_token_ids() const override { return {}; }
  kvcache::CacheGeometry cache_geometry() const override {
    kvcache::CacheGeometry g;
    g.n_attention_layers = g.n_kv_heads = g.head_dim = 1;
    g.state.n_layers = g.state.conv_dim = g.state.conv_taps = 1;
    g.state.value_heads = g.state.key_dim = g.state.value_dim = 1;
    return g;
  }
  void allocate_cache(const kvcache::PoolSizes&) override {}
  kvcache::StatePool::ZeroFn state_zero_fn() override { return [](kvcache::SlotId) {}; }
  void copy_state(kvcache::SlotId, kvcache::SlotId) override {}
  const kernels::Tensor& forward(const qwen35::ForwardBatch& b) override {
    tensor_ = kernels::Tensor(nullptr, data_.data(), DType::f32, kernels::Shape{b.num_logit_rows(), vocab_});
    return tensor_;
  }

 private:
  int64_t vocab_;
  std::vector<float> data_;
  kernels::Tensor tensor_;
};

struct EngineResult {
  double wall_us = 0, schedule_us = 0, forward_us = 0, sample_us = 0;
  int64_t iterations = 0;
};

EngineResult bench_engine(int seqs, int prompt_len, int iterations, int block_size, int64_t vocab) {
  NullModel model(vocab, seqs);
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = seqs;
  cfg.scheduler.max_num_batched_tokens = static_cast<int64_t>(seqs) * prompt_len;
  cfg.block_size = block_size;
  const int64_t tokens_per_seq = prompt_len + iterations * 2 + 16;
  cfg.num_blocks = static_cast<int32_t>(seqs * ((tokens_per_seq + block_size - 1) / block_size) + seqs);
  cfg.max_ctx = tokens_per_seq;
  cfg.max_queue = seqs;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  std::vector<RequestHandle> hs;
  for (int i = 0; i < seqs; ++i) {
    Request r(std::vector<int32_t>(static_cast<size_t>(prompt_len), 7));
    r.max_tokens = 1 << 30;
    r.sampling.temperature = 0;
    auto s = engine.submit(r);
    if (!s.ok()) {
      std::fprintf(stderr, "bench_scheduler: submit failed: %s\n", s.message.c_str());
      std::exit(1);
    }
    hs.push_back(std::move(s.handle));
  }
  std::atomic<bool> stop{false};
  std::thread client([&] {
    while (!stop) {
      for (auto& h : hs) h.drain();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  auto wait_iterations = [&](int64_t n) {
    while (engine.stats().iterations_total < n) std::this_thread::sleep_for(std::chrono::microseconds(100));
  };
  wait_iterations(10);  // prompts done, everyone decoding
  const EngineStats a = engine.stats();
  const auto t0 = Clock::now();
  wait_iterations(a.iterations_total + iterations);
  const EngineStats b = engine.stats();
  const double wall = us_since(t0);
  stop = true;
  client.join();
  engine.shutdown();
  EngineResult r;
  r.iterations = b.iterations_total - a.iterations_total;
  const double n = static_cast<double>(r.iterations);
  r.wall_us = wall / n;
  r.schedule_us = (b.schedule_seconds_total - a.schedule_seconds_total) * 1e6 / n;
  r.forward_us = (b.forward_seconds_total - a.forward_seconds_total) * 1e6 / n;
  r.sample_us = (b.sample_seconds_total - a.sample_seconds_total) * 1e6 / n;
  if (b.last_batch_seqs != seqs) std::fprintf(stderr, "bench_scheduler: warning: last batch had %d sequences\n", b.last_batch_seqs);
  return r;
}

double bench_sampler_row(int64_t vocab, const kernels::SamplerSettings& p, int rows) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocab * rows));
  for (auto& v : logits) v = nd(rng);
  auto sampler = kernels::cpu::make_cpu_sampler();
  kernels::Tensor t(nullptr, logits.data(), DType::f32, kernels::Shape{rows, vocab});
  std::vector<kernels::SamplerRng> rngs(static_cast<size_t>(rows), kernels::SamplerRng(3));
  std::vector<kernels::SampleRow> rs;
  for (int i = 0; i < rows; ++i) rs.push_back({&p, {}, {}, &rngs[static_cast<size_t>(i)]});
  std::vector<kernels::SampledToken> out(static_cast<size_t>(rows));
  sampler->sample(t, rs, out);  // warm-up
  const auto t0 = Clock::now();
  sampler->sample(t, rs, out);
  return us_since(t0) / rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_scheduler: per-iteration engine overhead without the model"};
  int seqs = 256, prompt_len = 128, iterations = 2000, block_size = 16, repeat = 3, sampler_rows = 16;
  int64_t vocab = 1024, sampler_vocab = 248320;
  app.add_option("--seqs", seqs, "running sequences")->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", prompt_len, "prompt tokens per sequence")->check(CLI::PositiveNumber);
  app.add_option("--iterations", iterations, "timed iterations")->check(CLI::PositiveNumber);
  app.add_option("--block-size", block_size, "K/V block size")->check(CLI::PositiveNumber);
  app.add_option("--vocab", vocab, "vocabulary of the engine benchmark's null model")->check(CLI::PositiveNumber);
  app.add_option("--sampler-vocab", sampler_vocab, "vocabulary of the sampler benchmark")->check(CLI::PositiveNumber);
  app.add_option("--sampler-rows", sampler_rows, "rows per sampler call")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "runs of the policy benchmark (best is kept)")->check(CLI::PositiveNumber);
  int pressure_sessions = 0;
  int64_t pressure_min = 6000, pressure_max = 37000, pressure_pool = 96304;
  app.add_option("--pressure-sessions", pressure_sessions, "run only the pressure workload, of this many prompts");
  app.add_option("--pressure-min", pressure_min, "shortest prompt of the pressure workload");
  app.add_option("--pressure-max", pressure_max, "longest prompt of the pressure workload");
  app.add_option("--pressure-pool", pressure_pool, "K/V pool of the pressure workload, in tokens");
  CLI11_PARSE(app, argc, argv);
  if (pressure_sessions > 0) {
    const PressureResult r = bench_pressure(pressure_sessions, pressure_min, pressure_max, pressure_pool, block_size);
    std::printf("pressure %d prompts of %lld-%lld tokens (%lld in all), pool %lld tokens: %lld steps, %lld preemptions, "
                "%lld prompt tokens computed (%.2fx), simulated makespan %.1f s, TTFT mean %.2f s, p50 %.2f s\n",
                pressure_sessions, static_cast<long long>(pressure_min), static_cast<long long>(pressure_max),
                static_cast<long long>(r.prompt), static_cast<long long>(pressure_pool), static_cast<long long>(r.steps),
                static_cast<long long>(r.preemptions), static_cast<long long>(r.computed),
                static_cast<double>(r.computed) / static_cast<double>(r.prompt), r.makespan_s, r.ttft_mean_s,
                r.ttft_p50_s);
    return 0;
  }

  PolicyResult best;
  best.mean_us = 1e30;
  for (int i = 0; i < repeat; ++i) {
    PolicyResult r = bench_policy(seqs, prompt_len, iterations, block_size);
    if (r.mean_us < best.mean_us) best = r;
  }
  std::printf("policy  %d running sequences, %d iterations: %.1f us/iteration (p50 %.1f, p99 %.1f), %.3f us/sequence\n",
              seqs, iterations, best.mean_us, best.p50_us, best.p99_us, best.mean_us / seqs);

  EngineResult e = bench_engine(seqs, prompt_len, iterations, block_size, vocab);
  std::printf("engine  %d running sequences, vocab %lld, %lld iterations: %.1f us/iteration wall "
              "(schedule %.1f, null forward %.1f, sample + bookkeeping %.1f)\n",
              seqs, static_cast<long long>(vocab), static_cast<long long>(e.iterations), e.wall_us, e.schedule_us,
              e.forward_us, e.sample_us);

  kernels::SamplerSettings greedy;
  greedy.temperature = 0;
  kernels::SamplerSettings top_p;
  top_p.temperature = 0.8f;
  top_p.top_p = 0.9f;
  kernels::SamplerSettings top_k;
  top_k.temperature = 0.8f;
  top_k.top_k = 50;
  std::printf("sampler vocab %lld, per row: greedy %.1f us, temperature + top_p 0.9 %.1f us, top_k 50 %.1f us\n",
              static_cast<long long>(sampler_vocab), bench_sampler_row(sampler_vocab, greedy, sampler_rows),
              bench_sampler_row(sampler_vocab, top_p, sampler_rows), bench_sampler_row(sampler_vocab, top_k, sampler_rows));
  return 0;
}

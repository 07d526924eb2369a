// The scheduling policy alone: no model, no threads, just the Scheduler over real pools.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "scheduler/scheduler.h"

using namespace ds;
using namespace ds::scheduler;

namespace {

struct Fixture {
  Fixture(int32_t blocks, int32_t block_size, int32_t slots, SchedulerConfig cfg)
      : block_pool(blocks, block_size), slot_pool(slots, kvcache::StateLayout{}, [this](kvcache::SlotId) { ++zeroed; }),
        sched(cfg, block_pool, slot_pool) {}

  Sequence& add(RequestId id, int64_t prompt_len, int64_t max_tokens = 1000, int64_t max_ctx = 1 << 20) {
    FinishCriteria f;
    f.max_tokens = max_tokens;
    f.max_ctx = max_ctx;
    return sched.add(id, std::vector<int32_t>(static_cast<size_t>(prompt_len), 3), f);
  }

  // Settles the plan as the engine would, with token 7 sampled at every sampling row.
  // Returns the ids that finished.
  std::vector<RequestId> finish_step(const StepPlan& plan) {
    std::vector<kernels::SampledToken> sampled(static_cast<size_t>(plan.num_logit_rows()));
    for (auto& t : sampled) t.token = 7;
    std::vector<RequestId> done;
    for (const auto& seq : sched.update(plan, sampled).ended) done.push_back(seq->id);
    sched.check_invariants();
    return done;
  }

  kvcache::BlockPool block_pool;
  kvcache::StatePool slot_pool;
  int zeroed = 0;
  Scheduler sched;
};

std::vector<std::pair<RequestId, int64_t>> shape(const StepPlan& p) {
  std::vector<std::pair<RequestId, int64_t>> out;
  for (size_t i = 0; i < p.chunks.size(); ++i) out.push_back({p.sequences[i]->id, p.chunks[i].n_tokens()});
  return out;
}

}  // namespace

TEST_CASE("decodes come first, then prefill chunks in order, within the token budget", "[scheduler]") {
  Fixture f(100, 4, 8, {4, 10});
  f.add(1, 3);
  f.add(2, 20);
  f.add(3, 5);
  const StepPlan& p1 = f.sched.schedule();
  CHECK(shape(p1) == std::vector<std::pair<RequestId, int64_t>>{{1, 3}, {2, 7}});
  CHECK(samples(p1.chunks[0]));
  CHECK_FALSE(samples(p1.chunks[1]));
  CHECK(p1.num_tokens == 10);
  f.finish_step(p1);

  // 1 decodes first; 2 continues its prompt with what is left; 3 waits for budget.
  const StepPlan& p2 = f.sched.schedule();
  CHECK(shape(p2) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 9}});
  CHECK(p2.num_decodes == 1);
  f.finish_step(p2);

  const StepPlan& p3 = f.sched.schedule();
  CHECK(shape(p3) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 4}, {3, 5}});
  CHECK(samples(p3.chunks[1]));
  CHECK(samples(p3.chunks[2]));
  f.finish_step(p3);

  const StepPlan& p4 = f.sched.schedule();
  CHECK(shape(p4) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 1}, {3, 1}});
  CHECK(p4.num_decodes == 3);
  CHECK(f.zeroed == 3);  // one zeroed slot per admission
}

TEST_CASE("max_num_seqs bounds the running set and admission never overtakes", "[scheduler]") {
  Fixture f(10, 4, 8, {2, 100});
  f.add(1, 2);
  f.add(2, 2);
  f.add(3, 2);
  const StepPlan& p1 = f.sched.schedule();
  CHECK(p1.chunks.size() == 2);
  CHECK(f.sched.num_running() == 2);
  CHECK(f.sched.num_waiting() == 1);
  f.finish_step(p1);

  // A head that does not fit blocks the small one behind it.
  Fixture g(10, 4, 8, {8, 100});
  g.add(1, 4);
  g.add(2, 40);  // 10 blocks, 9 free
  g.add(3, 1);
  const StepPlan& q1 = g.sched.schedule();
  CHECK(shape(q1) == std::vector<std::pair<RequestId, int64_t>>{{1, 4}});
  CHECK(g.sched.waiting().front()->id == 2);
}

TEST_CASE("admission takes blocks and a slot together or neither", "[scheduler]") {
  Fixture f(10, 4, 1, {4, 100});
  f.add(1, 4);
  f.add(2, 4);
  const StepPlan& p = f.sched.schedule();
  CHECK(shape(p) == std::vector<std::pair<RequestId, int64_t>>{{1, 4}});
  // Request 2 found blocks but no slot: its reservation was rolled back.
  CHECK(f.block_pool.num_used() == 1);
  CHECK(f.block_pool.num_reserved() == 0);
  CHECK(f.slot_pool.num_used() == 1);
  f.finish_step(p);
  f.sched.check_invariants();
}

TEST_CASE("a decode without a free block preempts the most recently admitted sequence", "[scheduler]") {
  // 4 blocks of 4 tokens. Three sequences of 4, 4 and 4 tokens (+1 sampled each) fill 3
  // blocks; their first decodes need a second block each.
  Fixture f(4, 4, 8, {8, 100});
  f.add(1, 4);
  f.add(2, 4);
  f.add(3, 4);
  f.finish_step(f.sched.schedule());
  REQUIRE(f.block_pool.num_free() == 1);
  REQUIRE(f.zeroed == 3);

  const StepPlan& p = f.sched.schedule();
  // 1 takes the last free block; 2 needs one, so 3 (the newest) is preempted and 2 gets its
  // blocks; 3 goes back to the head of the queue with its sampled token kept.
  CHECK(shape(p) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 1}});
  CHECK(p.preempted == std::vector<RequestId>{3});
  CHECK(p.admitted.empty());  // no admission in a step that preempted
  CHECK(f.sched.num_preemptions() == 1);
  Sequence* s3 = f.sched.find(3);
  REQUIRE(s3);
  CHECK(s3->state == SeqState::waiting);
  CHECK(s3->num_computed == 0);
  CHECK(s3->num_tokens() == 5);
  CHECK(s3->num_generated() == 1);
  CHECK(s3->num_preemptions == 1);
  CHECK(f.sched.waiting().front() == s3);
  f.finish_step(p);

  // When 1 finishes, 3 is re-admitted with all 5 tokens as its prompt and a zeroed slot.
  f.sched.finish(*f.sched.find(1));
  const StepPlan& q = f.sched.schedule();
  CHECK(shape(q) == std::vector<std::pair<RequestId, int64_t>>{{2, 1}, {3, 5}});
  CHECK(samples(q.chunks[1]));
  CHECK(f.zeroed == 4);
  f.finish_step(q);
}

TEST_CASE("the newest sequence preempts itself when it is the one short of a block", "[scheduler]") {
  Fixture f(3, 4, 8, {8, 100});
  f.add(1, 8);  // 2 blocks
  f.add(2, 4);  // 1 block
  f.finish_step(f.sched.schedule());
  REQUIRE(f.block_pool.num_free() == 0);
  // 1 decodes into its second block (room for token 9? its 9th token needs a 3rd block).
  const StepPlan& p = f.sched.schedule();
  // 1 needs a block: 2 is preempted. Then nothing else runs.
  CHECK(shape(p) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}});
  CHECK(p.preempted == std::vector<RequestId>{2});
  f.finish_step(p);

  Fixture g(2, 4, 8, {8, 100});
  g.add(1, 4);
  g.add(2, 4);
  g.finish_step(g.sched.schedule());
  // Both need a second block and there are none: 1 preempts 2; then 2 is gone.
  const StepPlan& q = g.sched.schedule();
  CHECK(q.preempted == std::vector<RequestId>{2});
  CHECK(shape(q) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}});

  // A single sequence that cannot grow preempts itself (the pool is smaller than it).
  Fixture h(1, 4, 8, {8, 100});
  h.add(1, 4);
  h.finish_step(h.sched.schedule());
  const StepPlan& r = h.sched.schedule();
  CHECK(r.preempted == std::vector<RequestId>{1});
  CHECK(r.empty());
}

TEST_CASE("a prompt is admitted only when all of it fits beside the running prefills", "[scheduler]") {
  // 5 blocks of 16, budget 40. 1 takes 2 blocks; 2 (60 tokens) needs 4 of the 3 left: it waits
  // rather than start on its first chunk, and 3 (one block) does not overtake it.
  Fixture f(5, 16, 8, {8, 40});
  f.add(1, 30, 2);
  f.add(2, 60);
  f.add(3, 10);
  const StepPlan& p1 = f.sched.schedule();
  CHECK(shape(p1) == std::vector<std::pair<RequestId, int64_t>>{{1, 30}});
  CHECK(f.sched.waiting().front()->id == 2);
  CHECK(f.block_pool.num_used() == 2);
  f.finish_step(p1);
  // 1 finishes after its second token; then 2 starts on the whole budget.
  const StepPlan& p2 = f.sched.schedule();
  CHECK(shape(p2) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}});
  CHECK(f.finish_step(p2) == std::vector<RequestId>{1});
  const StepPlan& p3 = f.sched.schedule();
  CHECK(shape(p3) == std::vector<std::pair<RequestId, int64_t>>{{2, 40}});
  CHECK(f.sched.waiting().front()->id == 3);
  f.finish_step(p3);
  // 2 owes one block for the rest of its prompt and 3 needs one: both fit the two left.
  const StepPlan& p4 = f.sched.schedule();
  CHECK(shape(p4) == std::vector<std::pair<RequestId, int64_t>>{{2, 20}, {3, 10}});
  CHECK(f.sched.num_preemptions() == 0);
  f.finish_step(p4);
}

TEST_CASE("a running prefill is shrunk to the free blocks and waits when there are none", "[scheduler]") {
  // 5 blocks of 16, budget 40: 1 (32 tokens, 2 blocks) and 2 (40 tokens, 3 blocks) fit together,
  // so 2 starts on the 8 tokens of budget left. 1's decodes then take a block 2 counted on.
  Fixture f(5, 16, 8, {8, 40});
  f.add(1, 32);
  f.add(2, 40);
  const StepPlan& p1 = f.sched.schedule();
  CHECK(shape(p1) == std::vector<std::pair<RequestId, int64_t>>{{1, 32}, {2, 8}});
  f.finish_step(p1);
  // 1's decode takes a third block; 2 wants 32 tokens, 24 fit (8 left in its block + 1 free).
  const StepPlan& p2 = f.sched.schedule();
  CHECK(shape(p2) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 24}});
  f.finish_step(p2);
  // No room and no one newer to preempt: 2 skips steps while 1 decodes through its block.
  for (int step = 0; step < 15; ++step) {  // positions 33..47
    const StepPlan& p = f.sched.schedule();
    CHECK(shape(p) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}});
    CHECK(p.preempted.empty());
    f.finish_step(p);
  }
  // 1 crosses into a new block: 2, the newest, is preempted for it.
  const StepPlan& p4 = f.sched.schedule();
  CHECK(shape(p4) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}});
  CHECK(p4.preempted == std::vector<RequestId>{2});
  f.finish_step(p4);
}

TEST_CASE("finish reasons: stop tokens first, then max_tokens and max_ctx", "[scheduler]") {
  FinishCriteria c;
  c.max_tokens = 3;
  c.max_ctx = 6;
  c.stop_ids = {5, 9};
  // reason(the token just appended, generated tokens, all tokens)
  CHECK_FALSE(c.reason(4, 1, 4).has_value());
  CHECK(c.reason(9, 2, 5) == FinishReason::stop);
  CHECK(c.reason(4, 3, 6) == FinishReason::length);  // max_tokens (and max_ctx)
  CHECK(c.reason(1, 2, 6) == FinishReason::length);  // max_ctx 6
  CHECK(c.reason(5, 1, 6) == FinishReason::stop);    // both: stop wins
  CHECK(c.tokens_left(1, 4) == 2);
  CHECK(c.tokens_left(1, 5) == 1);

  // Through a step: a sequence whose sampled token is a stop id ends, and is handed back.
  Fixture f(100, 4, 8, {8, 100});
  f.sched.add(1, {1, 2, 3}, c);
  const StepPlan& p = f.sched.schedule();
  std::vector<kernels::SampledToken> sampled(1);
  sampled[0].token = 9;
  const StepOutcome& o = f.sched.update(p, sampled);
  REQUIRE(o.updates.size() == 1);
  CHECK(o.updates[0].finish == FinishReason::stop);
  CHECK(o.updates[0].num_tokens == 1);
  REQUIRE(o.ended.size() == 1);
  CHECK(o.ended[0]->tokens == std::vector<int32_t>{1, 2, 3, 9});
  CHECK_FALSE(f.sched.has_work());
  CHECK(f.block_pool.num_used() == 0);
  CHECK(f.slot_pool.num_used() == 0);

  // A row with no token (a request the engine could not sample) ends its sequence as an error.
  f.sched.add(2, {1, 2, 3}, c);
  const StepPlan& q = f.sched.schedule();
  sampled[0].token = -1;
  const StepOutcome& e = f.sched.update(q, sampled);
  REQUIRE(e.updates.size() == 1);
  CHECK(e.updates[0].finish == FinishReason::error);
  CHECK(e.updates[0].num_tokens == 0);
  REQUIRE(e.ended.size() == 1);
  CHECK(e.ended[0]->tokens == std::vector<int32_t>{1, 2, 3});
  CHECK(f.block_pool.num_used() == 0);
  CHECK(f.slot_pool.num_used() == 0);
}

TEST_CASE("finishing running or waiting sequences gives everything back", "[scheduler]") {
  Fixture f(20, 4, 3, {3, 9});
  for (RequestId id = 1; id <= 6; ++id) f.add(id, 6);
  f.finish_step(f.sched.schedule());
  CHECK(f.sched.num_running() > 0);
  CHECK(f.sched.num_waiting() > 0);
  f.sched.finish(*f.sched.waiting().back());
  f.sched.finish(*f.sched.running().front());
  f.sched.check_invariants();
  while (f.sched.has_work()) {
    Sequence* s = f.sched.running().empty() ? f.sched.waiting().front() : f.sched.running().back();
    f.sched.finish(*s);
    f.sched.check_invariants();
  }
  CHECK(f.block_pool.num_used() == 0);
  CHECK(f.slot_pool.num_used() == 0);
}

TEST_CASE("randomized policy run: invariants every step, progress, everything finishes", "[scheduler]") {
  std::mt19937 rng(2024);
  for (int round = 0; round < 20; ++round) {
    const int32_t block_size = 1 << std::uniform_int_distribution<int>(0, 4)(rng);
    const int64_t max_ctx = std::uniform_int_distribution<int64_t>(8, 200)(rng);
    const int32_t min_blocks = static_cast<int32_t>((max_ctx + block_size - 1) / block_size);
    const int32_t blocks = min_blocks + std::uniform_int_distribution<int32_t>(0, 3 * min_blocks)(rng);
    const int32_t slots = std::uniform_int_distribution<int32_t>(1, 12)(rng);
    SchedulerConfig cfg{std::uniform_int_distribution<int32_t>(1, 16)(rng),
                        std::uniform_int_distribution<int64_t>(1, 96)(rng)};
    Fixture f(blocks, block_size, slots, cfg);
    RequestId next = 1;
    int64_t finished = 0, cancelled = 0, steps = 0;
    std::vector<RequestId> ids;
    const int total = 150;
    while (next <= total || f.sched.has_work()) {
      if (next <= total && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
        const int64_t len = std::uniform_int_distribution<int64_t>(1, max_ctx)(rng);
        f.add(next, len, std::uniform_int_distribution<int64_t>(1, 40)(rng), max_ctx);
        ids.push_back(next++);
      }
      if (!ids.empty() && std::uniform_int_distribution<int>(0, 30)(rng) == 0) {
        const RequestId victim = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        if (Sequence* s = f.sched.find(victim)) {
          f.sched.finish(*s);
          ++cancelled;
        }
      }
      if (!f.sched.has_work()) continue;
      const StepPlan& p = f.sched.schedule();
      REQUIRE_FALSE(p.empty());  // work pending always means a step
      REQUIRE(p.num_tokens <= cfg.max_num_batched_tokens);
      REQUIRE(static_cast<int32_t>(p.chunks.size()) <= cfg.max_num_seqs);
      finished += static_cast<int64_t>(f.finish_step(p).size());
      REQUIRE(++steps < 200000);
    }
    CHECK(finished + cancelled == total);
    CHECK(f.block_pool.num_used() == 0);
    CHECK(f.slot_pool.num_used() == 0);
  }
}

TEST_CASE("LoRA slots: pinned while running, loaded on a miss, waited for in order", "[scheduler][lora]") {
  SchedulerConfig cfg{8, 100};
  cfg.max_loras = 1;
  Fixture f(100, 4, 8, cfg);
  FinishCriteria fin;
  fin.max_tokens = 2;
  // A, A, B, then the base: B finds the one slot pinned by the two A and waits; the base
  // request behind it waits too (nothing overtakes).
  f.sched.add(1, std::vector<int32_t>(5, 3), fin, {}, {}, 11);
  f.sched.add(2, std::vector<int32_t>(5, 3), fin, {}, {}, 11);
  f.sched.add(3, std::vector<int32_t>(5, 3), fin, {}, {}, 12);
  f.sched.add(4, std::vector<int32_t>(5, 3), fin);
  const StepPlan& p1 = f.sched.schedule();
  REQUIRE(shape(p1) == std::vector<std::pair<RequestId, int64_t>>{{1, 5}, {2, 5}});
  REQUIRE(p1.lora_loads.size() == 1);  // the slot gets A once
  CHECK(p1.lora_loads[0].slot == 0);
  CHECK(p1.chunks[0].lora_slot == 0);
  CHECK(p1.chunks[1].lora_slot == 0);
  CHECK(f.sched.lora_residency().pins(0) == 2);
  f.finish_step(p1);
  const StepPlan& p2 = f.sched.schedule();  // the A decode; B still waits
  REQUIRE(shape(p2) == std::vector<std::pair<RequestId, int64_t>>{{1, 1}, {2, 1}});
  CHECK(f.finish_step(p2).size() == 2);
  CHECK(f.sched.lora_residency().pins(0) == 0);
  const StepPlan& p3 = f.sched.schedule();  // B takes the slot (a load), then the base
  REQUIRE(shape(p3) == std::vector<std::pair<RequestId, int64_t>>{{3, 5}, {4, 5}});
  REQUIRE(p3.lora_loads.size() == 1);
  CHECK(p3.lora_loads[0].seq->id == 3);
  CHECK(p3.chunks[1].lora_slot == -1);
  f.finish_step(p3);
  // B's prefix keys are rooted in its adapter: not the base's for the same tokens.
  CHECK(f.sched.find(3)->key_root != 0);
  CHECK(f.sched.find(4)->key_root == 0);
  f.finish_step(f.sched.schedule());
  CHECK(!f.sched.has_work());
  CHECK(f.sched.lora_residency().num_pinned() == 0);
  // An adapter without slots is refused.
  Fixture g(100, 4, 8, {8, 100});
  CHECK_THROWS_AS(g.sched.add(1, std::vector<int32_t>(5, 3), fin, {}, {}, 11), std::invalid_argument);
}

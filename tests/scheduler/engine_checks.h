// Catch2 steps the engine tests share: submit a batch at once and collect every request, and
// check that an idle engine holds no block or slot and broke no invariant.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "engine_test_util.h"
#include "scheduler/engine.h"

namespace ds::test {

inline std::vector<Outcome> run_together(scheduler::Engine& engine, const std::vector<scheduler::Request>& reqs) {
  std::vector<scheduler::RequestHandle> hs;
  for (const scheduler::Request& r : reqs) {
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    hs.push_back(std::move(s.handle));
  }
  std::vector<Outcome> out;
  for (auto& h : hs) out.push_back(collect(h));
  return out;
}

inline void check_pools_free(const scheduler::Engine& e) {
  REQUIRE(wait_stats(e, [](const scheduler::EngineStats& s) { return s.running == 0 && s.waiting == 0; }));
  const scheduler::EngineStats s = e.stats();
  CHECK(s.blocks_used == 0);
  CHECK(s.slots_used == 0);
  CHECK(s.invariant_violations == 0);
}

}  // namespace ds::test

#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using ds::kernels::cpu::ThreadPool;

TEST_CASE("thread pool: every item is done exactly once", "[thread_pool]") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (int64_t n : {0, 1, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        for (int rep = 0; rep < 3; ++rep)
          pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
            REQUIRE(b < e);
            REQUIRE((e - b <= grain || threads == 1));  // one thread: the whole loop inline
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          });
        for (auto& h : hits) REQUIRE(h.load() == 3);
      }
    }
  }
}

TEST_CASE("thread pool: a loop inside a loop runs inline", "[thread_pool]") {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  CHECK(total == 80);
}

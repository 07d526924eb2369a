// GrammarCache (server/grammar_cache.h) alone: requests for one constraint share a compile, a
// full queue is refused, a waiter whose client left is released at once and its compile
// cancelled, and a refusal is remembered.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "model/grammar/regex.h"
#include "model/tokenizer/tokenizer.h"
#include "server/grammar_cache.h"
#include "tests/test_paths.h"

using namespace ds;

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<const grammar::TokenVocabulary> vocab() {
  static const auto v = [] {
    const auto tok = tok::Tokenizer::load(test::data_path("tiny-qwen35"));
    return grammar::TokenVocabulary::from_tokenizer(tok, 1024);
  }();
  return v;
}

server::GrammarCache::Build regex(const std::string& re) {
  return [re](const grammar::CompileBudget&) {
    grammar::Grammar g;
    g.set_root(g.add_rule("root", grammar::regex_expr(re, grammar::RegexMode::whole_text)));
    return g;
  };
}

// Determinising it takes about a second (131,072 states).
const std::string kSlow = "[ab]*a[ab]{16}";

}  // namespace

TEST_CASE("grammar cache: one compile per key, a bounded queue, cancellation, remembered refusals", "[grammar_cache]") {
  server::GrammarCacheOptions o;
  o.concurrency = 1;
  o.max_waiting = 1;
  o.limits.max_bytes = int64_t{1} << 30;
  server::GrammarCache cache(vocab(), o);
  std::atomic<bool> gone_a{false}, a_running{false};
  std::atomic<int> cancelled{0};
  // A compiles; C queues behind it; a third finds the queue full.
  auto wait_for = [&](const std::string& re, std::atomic<bool>* gone) {
    try {
      cache.get("k" + re, [&a_running, re](const grammar::CompileBudget& budget) {
        if (re == kSlow) a_running = true;  // on the worker: A left the queue
        return regex(re)(budget);
      }, [gone] { return gone && gone->load(); });
    } catch (const grammar::CompileCancelled&) {
      ++cancelled;
    }
  };
  std::thread a(wait_for, kSlow, &gone_a);
  while (!a_running) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread c(wait_for, std::string("x{1,3}"), nullptr);
  while (cache.compiles_in_flight() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK_THROWS_AS(cache.get("other", regex("x")), server::GrammarBusy);
  // A's client leaves: A returns at once, and its compile (nobody else waits) stops.
  const auto t0 = Clock::now();
  gone_a = true;
  a.join();
  CHECK(cancelled == 1);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 0.5);
  c.join();  // C then compiles
  CHECK(cancelled == 1);
  CHECK(cache.compiles_in_flight() == 0);
  CHECK(cache.size() == 1);  // C; A's cancellation is not remembered
  // A refusal is remembered: the second ask does not compile.
  CHECK_THROWS_AS(cache.get("bad", regex("(a")), grammar::GrammarError);
  CHECK_THROWS_AS(cache.get("bad", [](const grammar::CompileBudget&) -> grammar::Grammar {
    FAIL("compiled again");
    return {};
  }), grammar::GrammarError);
  // Two waiters of one key share its compile.
  std::atomic<int> builds{0};
  auto counted = [&](const grammar::CompileBudget& budget) {
    ++builds;
    return regex("[ab]*a[ab]{12}")(budget);
  };
  auto ask = [&] {
    try {
      cache.get("shared", counted);
    } catch (const grammar::GrammarError&) {
    }
  };
  std::thread d(ask);
  std::thread e(ask);
  d.join();
  e.join();
  CHECK(builds == 1);
}

TEST_CASE("grammar cache: a failure that is not the grammar's reaches each waiter and is not remembered", "[grammar_cache]") {
  server::GrammarCacheOptions o;
  o.concurrency = 1;
  server::GrammarCache cache(vocab(), o);
  std::atomic<int> builds{0};
  std::atomic<bool> release{false};
  auto failing = [&](const grammar::CompileBudget&) -> grammar::Grammar {
    ++builds;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    throw std::runtime_error("out of something");
  };
  // Each waiter gets an exception of its own (no object shared between threads), as a plain
  // runtime_error with the message: not a GrammarError, which the API would call a bad request.
  std::string said[2];
  bool grammar_error[2] = {false, false};
  auto ask = [&](int i) {
    try {
      cache.get("boom", failing);
    } catch (const std::runtime_error& e) {
      said[i] = e.what();
      grammar_error[i] = dynamic_cast<const grammar::GrammarError*>(&e) != nullptr;
    }
  };
  std::thread a(ask, 0);
  while (builds == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread b(ask, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // b joins the compile under way
  release = true;
  a.join();
  b.join();
  CHECK(builds == 1);
  for (int i = 0; i < 2; ++i) {
    CHECK(said[i] == "out of something");
    CHECK_FALSE(grammar_error[i]);
  }
  // Not remembered: the next ask compiles again, and succeeds.
  CHECK(cache.get("boom", regex("x")) != nullptr);
  CHECK(builds == 1);
  CHECK(cache.size() == 1);
}

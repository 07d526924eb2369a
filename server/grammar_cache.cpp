// GrammarCache (grammar_cache.h).
#include "server/grammar_cache.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

namespace ds::server {

namespace {

using Clock = std::chrono::steady_clock;

// A waiting request looks at its client this often.
constexpr std::chrono::milliseconds kPollClient{25};
// A compile that failed on its time limit may succeed on a quieter machine.
constexpr std::chrono::seconds kForgetTimeout{60};
// Compiles that held more than this return their memory to the system when they end.
constexpr int64_t kTrimAbove = int64_t{32} << 20;
// The grammar front ends and the NFA builder recurse with bounded depth (model/grammar/); this
// much stack holds their bounds with room to spare, whatever the process's default.
constexpr size_t kWorkerStack = size_t{32} << 20;

bool is_time_limit(const std::string& message) { return message.find("took longer than the limit") != std::string::npos; }

}  // namespace

enum class GrammarCache::Failure { none, grammar, cancelled, other };

struct GrammarCache::Job {
  std::string key;
  Build build;
  std::atomic<bool> cancel{false};
  // Under mu_:
  int waiters = 0;
  bool running = false;
  bool done = false;
  std::shared_ptr<const grammar::CompiledGrammar> result;
  // A failed compile, as data: each waiter throws its own exception from it. Handing the
  // worker's exception object to several threads (an exception_ptr rethrown by each) would
  // share it, and its last release could fall on any of them.
  Failure failure = Failure::none;
  std::string error;
};

GrammarCache::GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocab, GrammarCacheOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  options_.capacity = std::max<size_t>(1, options_.capacity);
  options_.concurrency = std::max(1, options_.concurrency);
  options_.max_waiting = std::max(0, options_.max_waiting);
  if (options_.mask_threads <= 0)
    options_.mask_threads = std::clamp(static_cast<int32_t>(std::thread::hardware_concurrency()) / options_.concurrency, 1, 16);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWorkerStack);
  for (int32_t i = 0; i < options_.concurrency; ++i) {
    pthread_t t;
    const int rc = pthread_create(
        &t, &attr,
        [](void* self) -> void* {
          static_cast<GrammarCache*>(self)->work();
          return nullptr;
        },
        this);
    if (rc != 0) {
      pthread_attr_destroy(&attr);
      {
        std::lock_guard lock(mu_);
        stopping_ = true;
      }
      work_cv_.notify_all();
      for (pthread_t w : workers_) pthread_join(w, nullptr);
      throw std::runtime_error("grammar cache: cannot start a compile thread");
    }
    workers_.push_back(t);
  }
  pthread_attr_destroy(&attr);
}

GrammarCache::~GrammarCache() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [key, job] : in_flight_) job->cancel = true;
  }
  work_cv_.notify_all();
  for (pthread_t t : workers_) pthread_join(t, nullptr);
}

std::shared_ptr<const grammar::CompiledGrammar> GrammarCache::get(const std::string& key, Build build,
                                                                  const Gone& gone) {
  std::unique_lock lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    if (it->second->compiled || Clock::now() < it->second->expires) {
      lru_.splice(lru_.begin(), lru_, it->second);
      if (it->second->compiled) return it->second->compiled;
      throw grammar::GrammarError(it->second->error);
    }
    cached_bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  std::shared_ptr<Job> job;
  if (auto it = in_flight_.find(key); it != in_flight_.end()) {
    job = it->second;
  } else {
    if (queue_.size() >= static_cast<size_t>(options_.max_waiting)) throw GrammarBusy();
    job = std::make_shared<Job>();
    job->key = key;
    job->build = std::move(build);
    in_flight_.emplace(key, job);
    queue_.push_back(job);
    work_cv_.notify_one();
  }
  ++job->waiters;
  while (!job->done) {
    done_cv_.wait_for(lock, kPollClient);
    if (job->done || !gone || !gone()) continue;
    // The client left: stop waiting, and stop the compile if nobody else waits for it.
    if (--job->waiters == 0) {
      job->cancel = true;
      // A later request for the key starts afresh rather than join a compile being cancelled.
      in_flight_.erase(job->key);
      if (!job->running) queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    }
    throw grammar::CompileCancelled();
  }
  --job->waiters;
  switch (job->failure) {
    case Failure::none: return job->result;
    case Failure::grammar: throw grammar::GrammarError(job->error);
    case Failure::cancelled: throw grammar::CompileCancelled();
    case Failure::other: break;
  }
  throw std::runtime_error(job->error);
}

void GrammarCache::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      job->running = true;
    }
    grammar::CompileOptions co;
    co.threads = options_.mask_threads;
    co.limits = options_.limits;
    co.cancel = &job->cancel;
    const auto t0 = Clock::now();
    int64_t held = 0;
    try {
      grammar::CompileBudget budget(co.limits, co.cancel);
      const grammar::Grammar g = job->build(budget);
      job->result = grammar::compile(g, vocab_, co, budget);
      held = job->result->stats().bytes;
    } catch (const grammar::CompileCancelled&) {
      job->failure = Failure::cancelled;
    } catch (const grammar::GrammarError& e) {
      job->failure = Failure::grammar;
      job->error = e.what();
    } catch (const std::exception& e) {
      job->failure = Failure::other;
      job->error = e.what();
    } catch (...) {
      job->failure = Failure::other;
      job->error = "grammar compile failed";
    }
    if (job->failure != Failure::none) held = kTrimAbove + 1;  // a failed compile may have held up to its budget
    job->build = nullptr;  // what it captured (the request's schema) goes now
    if (held > kTrimAbove) {
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
    }
    spdlog::debug("grammar compile {} in {:.1f} ms", job->result ? "done" : "failed",
                  std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    finish(job);
  }
}

void GrammarCache::finish(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mu_);
    job->done = true;
    if (auto it = in_flight_.find(job->key); it != in_flight_.end() && it->second == job) in_flight_.erase(it);
    if (job->result) {
      remember({job->key, job->result, {}, Clock::time_point::max(), job->result->stats().bytes});
    } else if (job->failure == Failure::grammar) {
      remember({job->key, nullptr, job->error,
                is_time_limit(job->error) ? Clock::now() + kForgetTimeout : Clock::time_point::max(), 0});
    }  // cancelled, or not the grammar's fault: nothing to remember
  }
  done_cv_.notify_all();
}

void GrammarCache::remember(Entry e) {
  if (auto it = index_.find(e.key); it != index_.end()) {
    cached_bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  cached_bytes_ += e.bytes;
  lru_.push_front(std::move(e));
  index_.emplace(lru_.front().key, lru_.begin());
  while (lru_.size() > 1 && (lru_.size() > options_.capacity || cached_bytes_ > options_.max_cache_bytes)) {
    cached_bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

size_t GrammarCache::compiles_in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_.size();
}

}  // namespace ds::server

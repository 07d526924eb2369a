// ActiveJobs: the generation requests in flight, so shutdown can count them and a second
// SIGINT/SIGTERM can cancel them all. A handler holds a Registration for as long as it
// serves a generation; the registry only keeps engine request ids (cancelling an id that
// already finished is a no-op for the engine).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "scheduler/engine.h"

namespace ds::server {

class ActiveJobs {
 public:
  class Registration {
   public:
    Registration() = default;
    Registration(ActiveJobs* owner, uint64_t key) : owner_(owner), key_(key) {}
    Registration(Registration&& o) noexcept : owner_(o.owner_), key_(o.key_) { o.owner_ = nullptr; }
    Registration& operator=(Registration&& o) noexcept;
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() { release(); }
    void release();

   private:
    ActiveJobs* owner_ = nullptr;
    uint64_t key_ = 0;
  };

  Registration add(scheduler::Engine* engine, std::vector<scheduler::RequestId> ids);
  void cancel_all();
  size_t size() const;

 private:
  struct Entry {
    scheduler::Engine* engine;
    std::vector<scheduler::RequestId> ids;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_ = 1;
};

}  // namespace ds::server

#include "server/active_jobs.h"

namespace ds::server {

ActiveJobs::Registration& ActiveJobs::Registration::operator=(Registration&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    key_ = o.key_;
    o.owner_ = nullptr;
  }
  return *this;
}

void ActiveJobs::Registration::release() {
  if (!owner_) return;
  std::lock_guard lock(owner_->mu_);
  owner_->entries_.erase(key_);
  owner_ = nullptr;
}

ActiveJobs::Registration ActiveJobs::add(scheduler::Engine* engine, std::vector<scheduler::RequestId> ids) {
  std::lock_guard lock(mu_);
  const uint64_t key = next_++;
  entries_.emplace(key, Entry{engine, std::move(ids)});
  return Registration(this, key);
}

void ActiveJobs::cancel_all() {
  std::lock_guard lock(mu_);
  for (auto& [key, e] : entries_)
    for (auto id : e.ids) e.engine->cancel(id);
}

size_t ActiveJobs::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace ds::server

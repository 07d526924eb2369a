#include "scheduler/request_stream.h"

#include <stdexcept>

namespace ds::scheduler {

void RequestStream::push(RequestEvent event) {
  {
    std::lock_guard lock(mu_);
    if (final_pushed_) throw std::logic_error("RequestStream: event after the final one");
    final_pushed_ = event.is_final();
    queue_.push_back(std::move(event));
  }
  cv_.notify_all();
}

std::optional<RequestEvent> RequestStream::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || final_taken_; });
  if (queue_.empty()) return std::nullopt;
  RequestEvent e = std::move(queue_.front());
  queue_.pop_front();
  if (e.is_final()) final_taken_ = true;
  return e;
}

std::optional<RequestEvent> RequestStream::try_next() {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return std::nullopt;
  RequestEvent e = std::move(queue_.front());
  queue_.pop_front();
  if (e.is_final()) final_taken_ = true;
  return e;
}

bool RequestStream::wait_for(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || final_taken_; });
}

std::vector<RequestEvent> RequestStream::drain() {
  std::lock_guard lock(mu_);
  std::vector<RequestEvent> out;
  out.reserve(queue_.size());
  for (auto& e : queue_) {
    if (e.is_final()) final_taken_ = true;
    out.push_back(std::move(e));
  }
  queue_.clear();
  return out;
}

bool RequestStream::ended() const {
  std::lock_guard lock(mu_);
  return final_pushed_;
}

bool RequestStream::consumed() const {
  std::lock_guard lock(mu_);
  return final_taken_;
}

RequestHandle& RequestHandle::operator=(RequestHandle&& other) noexcept {
  if (this != &other) {
    cancel_if_unfinished();
    id_ = other.id_;
    stream_ = std::move(other.stream_);
    sink_ = std::move(other.sink_);
  }
  return *this;
}

RequestHandle::~RequestHandle() { cancel_if_unfinished(); }

void RequestHandle::cancel_if_unfinished() {
  if (stream_ && !stream_->ended()) cancel();
}

void RequestHandle::cancel() {
  if (auto sink = sink_.lock()) sink->cancel(id_);
}

std::vector<RequestEvent> RequestHandle::collect() {
  std::vector<RequestEvent> out;
  while (auto e = stream_->next()) out.push_back(std::move(*e));
  return out;
}

}  // namespace ds::scheduler

// RequestStream and RequestHandle: how a request's events travel from the engine thread to
// whoever submitted it.
//
// The engine pushes events into the request's RequestStream (a small locked queue); the
// submitter holds a RequestHandle and pops them, blocking (next), polling (try_next) or
// waiting with a timeout (wait_for). Events are never dropped or merged; the last one is
// final (RequestEvent::is_final) and after it next() returns nullopt.
//
// Dropping a handle before its final event cancels the request, so a client that goes away
// can never leave a request generating for nobody; detach() opts out. A handle outliving the
// engine stays valid: shutdown ends every request with a final event first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "scheduler/request.h"

namespace ds::scheduler {

class RequestStream {
 public:
  // Engine side.
  void push(RequestEvent event);

  // Consumer side. next() blocks until an event comes; nullopt once the final event has
  // been taken.
  std::optional<RequestEvent> next();
  std::optional<RequestEvent> try_next();
  // True when an event is ready or the stream is over, false on timeout.
  bool wait_for(std::chrono::nanoseconds timeout);
  // Every event already queued (possibly none), without blocking.
  std::vector<RequestEvent> drain();
  // The final event has been pushed (the request is over for the engine).
  bool ended() const;
  // The final event has been taken by the consumer.
  bool consumed() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> queue_;
  bool final_pushed_ = false;
  bool final_taken_ = false;
};

// Where a handle sends its cancellation (the engine); held weakly by handles.
class CancelSink {
 public:
  virtual ~CancelSink() = default;
  virtual void cancel(RequestId id) = 0;
};

class RequestHandle {
 public:
  RequestHandle() = default;
  RequestHandle(RequestId id, std::shared_ptr<RequestStream> stream, std::weak_ptr<CancelSink> sink)
      : id_(id), stream_(std::move(stream)), sink_(std::move(sink)) {}
  RequestHandle(RequestHandle&&) noexcept = default;
  RequestHandle& operator=(RequestHandle&& other) noexcept;
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle();

  bool valid() const { return stream_ != nullptr; }
  RequestId id() const { return id_; }

  std::optional<RequestEvent> next() { return stream_->next(); }
  std::optional<RequestEvent> try_next() { return stream_->try_next(); }
  bool wait_for(std::chrono::nanoseconds timeout) { return stream_->wait_for(timeout); }
  std::vector<RequestEvent> drain() { return stream_->drain(); }
  bool ended() const { return stream_->ended(); }
  // Blocks until the final event and returns every remaining event, the final one last.
  std::vector<RequestEvent> collect();

  // Asks the engine to cancel (a no-op once the request has ended); the final event, with
  // reason cancelled unless it finished first, still arrives on the stream.
  void cancel();
  // Keeps the request running when the handle is dropped.
  void detach() { sink_.reset(); }

 private:
  void cancel_if_unfinished();

  RequestId id_ = 0;
  std::shared_ptr<RequestStream> stream_;
  std::weak_ptr<CancelSink> sink_;
};

}  // namespace ds::scheduler

// ProgressLine: the live status line bench_serve keeps on stderr while a run goes on
// (requests done / failed / in flight, elapsed time), redrawn four times a second, only when
// stderr is a terminal; and the one place that prints notes (the first error) during a run,
// so they do not collide with the line.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ds::bench {

class ProgressLine {
 public:
  // enabled is ANDed with "stderr is a terminal".
  ProgressLine(const std::string& title, size_t total, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void started() { ++in_flight_; }
  void finished(bool success) {
    --in_flight_;
    ++done_;
    if (!success) ++failed_;
  }
  // A request counted as failed without being sent.
  void skipped() {
    ++done_;
    ++failed_;
  }
  // Prints `text` on its own line (above the progress line).
  void note(const std::string& text);

 private:
  void draw();
  void loop();

  std::string title_;
  size_t total_;
  bool live_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<size_t> done_{0}, failed_{0};
  std::atomic<long> in_flight_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ds::bench

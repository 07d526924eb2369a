#include "programs/bench_serve/progress_line.h"

#include <unistd.h>

#include <cstdio>

namespace ds::bench {

ProgressLine::ProgressLine(const std::string& title, size_t total, bool enabled)
    : title_(title), total_(total), live_(enabled && ::isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {
  if (live_) thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() {
  if (!live_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  draw();
  std::fputc('\n', stderr);
}

void ProgressLine::note(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  std::fprintf(stderr, "%s%s\n", live_ ? "\r\033[K" : "", text.c_str());
  if (live_) draw();
}

void ProgressLine::draw() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r\033[K%s: %zu/%zu done, %zu failed, %ld in flight, %.1f s", title_.c_str(), done_.load(),
               total_, failed_.load(), in_flight_.load(), elapsed);
  std::fflush(stderr);
}

void ProgressLine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    draw();
    cv_.wait_for(lock, std::chrono::milliseconds(250));
  }
}

}  // namespace ds::bench

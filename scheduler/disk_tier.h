// DiskTier: the host tier's entries as files (serve --kv-offload-dir), so that a restarted
// server finds the prefixes it had: every K/V block and DeltaNet snapshot the device evicts to
// the host tier is also written to the directory, behind the steps, by a thread of its own
// (and when the engine stops, what the device cache still holds goes down the same way); at
// start-up the files of this model are read back into the host tier (the newest last, so they
// are the ones it keeps). It adds persistence, not capacity: the directory holds at most what
// the host tier does, and a running server never reads it.
//
// Files (kvcache/disk_entry.h) are named by the model's fingerprint and the entry's content
// (chain key and check), and are untrusted input when read: a file that is truncated,
// corrupt, of another format, renamed, or written for this fingerprint by anything else is
// refused (logged and removed); files of other fingerprints (other models sharing the
// directory) are left alone and never read. Sizes are bounded: no file is read past the
// largest this model writes, and the directory holds at most max_bytes of this model's
// files, the oldest removed first (a file is written under a temporary name and renamed, so a
// crash leaves no partial file under an entry's name; leftovers are removed at start-up).
//
// The engine keeps an entry pinned in the host tier from its offload until it is written
// (its slot is read by the writer thread, through read_host, which must touch host memory
// only). A write that fails is logged and counted; the engine goes on without it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kvcache/disk_entry.h"

namespace ds::scheduler {

class DiskTier {
 public:
  struct Options {
    std::filesystem::path dir;
    kvcache::DiskEntryExpect expect;  // this model's fingerprint, block size and payload sizes
    int64_t max_bytes = 0;            // this model's files together, at most
  };
  using ReadHost = std::function<void(kvcache::DiskEntryKind kind, int32_t host_id, std::span<uint8_t> out)>;
  struct Job {
    kvcache::DiskEntry entry;  // without its payload (read from the host slot when written)
    int32_t host_id = -1;
  };
  struct Stats {
    int64_t files_written = 0;
    int64_t bytes_written = 0;
    int64_t write_failures = 0;
    int64_t files_loaded = 0;
    int64_t files_refused = 0;
    int64_t bytes_on_disk = 0;
  };

  // Creates the directory if needed; throws std::runtime_error when it cannot.
  DiskTier(Options options, ReadHost read_host);
  ~DiskTier();  // finishes the queued writes
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Start-up: this model's valid entries, oldest first, each handed to take.
  void load(const std::function<void(kvcache::DiskEntry&&)>& take);
  // Queues writes; take_done() gives them back once written (or failed).
  void write(std::vector<Job> jobs);
  std::vector<Job> take_done();
  // Waits until every queued write is done.
  void drain();
  Stats stats() const;

 private:
  void run();
  void write_one(const Job& job);
  void account(const std::string& name, int64_t bytes);  // under mu_

  Options o_;
  ReadHost read_host_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<Job> done_;
  bool busy_ = false, stopping_ = false;
  std::deque<std::pair<std::string, int64_t>> files_;  // oldest first
  std::set<std::string> names_;
  Stats stats_;
  std::thread thread_;
};

}  // namespace ds::scheduler

#include "scheduler/disk_tier.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace ds::scheduler {

namespace fs = std::filesystem;
using kvcache::DiskEntry;
using kvcache::DiskEntryKind;

DiskTier::DiskTier(Options options, ReadHost read_host) : o_(std::move(options)), read_host_(std::move(read_host)) {
  std::error_code ec;
  fs::create_directories(o_.dir, ec);
  if (!fs::is_directory(o_.dir))
    throw std::runtime_error("disk tier: cannot use " + o_.dir.string() + " as a directory" +
                             (ec ? ": " + ec.message() : std::string()));
  thread_ = std::thread([this] { run(); });
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DiskTier::load(const std::function<void(DiskEntry&&)>& take) {
  char prefix[24];
  std::snprintf(prefix, sizeof(prefix), "%016llx-", static_cast<unsigned long long>(o_.expect.fingerprint));
  struct Found {
    fs::path path;
    fs::file_time_type time;
    int64_t bytes;
  };
  std::vector<Found> ours;
  std::error_code ec;
  int64_t foreign = 0;
  for (const fs::directory_entry& d : fs::directory_iterator(o_.dir, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind(prefix, 0) != 0) {
      ++foreign;  // another model's, or not ours at all: never read
      continue;
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      fs::remove(d.path(), ec);  // a write that did not finish
      continue;
    }
    std::error_code e2;
    if (!d.is_regular_file(e2)) continue;
    ours.push_back({d.path(), d.last_write_time(e2), static_cast<int64_t>(d.file_size(e2))});
  }
  if (ec) spdlog::warn("disk tier: listing {}: {}", o_.dir.string(), ec.message());
  if (foreign > 0) spdlog::info("disk tier: {} files in {} are not this model's: left alone", foreign, o_.dir.string());
  std::sort(ours.begin(), ours.end(), [](const Found& a, const Found& b) { return a.time < b.time; });
  const int64_t limit = o_.expect.max_file_bytes();
  auto refuse = [&](const Found& f, const std::string& why) {
    spdlog::warn("disk tier: {} refused ({}); removed", f.path.string(), why);
    {
      std::lock_guard lock(mu_);
      ++stats_.files_refused;
    }
    std::error_code e;
    fs::remove(f.path, e);
  };
  // Oldest first; those beyond the budget (counted from the newest) are removed unread.
  int64_t newest = 0;
  size_t first = ours.size();
  while (first > 0 && newest + ours[first - 1].bytes <= o_.max_bytes) newest += ours[--first].bytes;
  for (size_t i = 0; i < first; ++i) fs::remove(ours[i].path, ec);
  for (size_t i = first; i < ours.size(); ++i) {
    const Found& f = ours[i];
    if (f.bytes > limit) {
      refuse(f, "larger than any entry of this model");
      continue;
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(f.bytes));
    std::ifstream in(f.path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
      refuse(f, "unreadable");
      continue;
    }
    std::string why;
    std::optional<DiskEntry> e = kvcache::decode_disk_entry(bytes, o_.expect, why);
    if (e && kvcache::disk_entry_name(*e) != f.path.filename().string()) {
      e.reset();
      why = "named for other content";
    }
    if (!e) {
      refuse(f, why);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      account(f.path.filename().string(), f.bytes);
      ++stats_.files_loaded;
    }
    take(std::move(*e));
  }
}

void DiskTier::write(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (Job& j : jobs) queue_.push_back(std::move(j));
  }
  cv_.notify_all();
}

std::vector<DiskTier::Job> DiskTier::take_done() {
  std::lock_guard lock(mu_);
  return std::exchange(done_, {});
}

void DiskTier::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

DiskTier::Stats DiskTier::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void DiskTier::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    write_one(job);
    lock.lock();
    busy_ = false;
    done_.push_back(std::move(job));
    cv_.notify_all();
  }
}

void DiskTier::write_one(const Job& job) {
  DiskEntry e = job.entry;
  const std::string name = kvcache::disk_entry_name(e);
  {
    std::lock_guard lock(mu_);
    if (names_.count(name)) return;  // this content is on disk already
  }
  try {
    e.payload.resize(static_cast<size_t>(e.kind == DiskEntryKind::block ? o_.expect.block_bytes : o_.expect.state_bytes));
    read_host_(e.kind, job.host_id, e.payload);
    const std::vector<uint8_t> bytes = kvcache::encode_disk_entry(e);
    const fs::path tmp = o_.dir / (name + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      out.flush();
      if (!out) throw std::runtime_error("cannot write " + tmp.string());
    }
    fs::rename(tmp, o_.dir / name);
    std::lock_guard lock(mu_);
    account(name, static_cast<int64_t>(bytes.size()));
    ++stats_.files_written;
    stats_.bytes_written += static_cast<int64_t>(bytes.size());
  } catch (const std::exception& ex) {
    std::error_code ec;
    fs::remove(o_.dir / (name + ".tmp"), ec);
    std::lock_guard lock(mu_);
    if (stats_.write_failures++ == 0) spdlog::warn("disk tier: writing {} failed: {}", name, ex.what());
  }
}

void DiskTier::account(const std::string& name, int64_t bytes) {
  if (!names_.insert(name).second) return;
  files_.emplace_back(name, bytes);
  stats_.bytes_on_disk += bytes;
  while (stats_.bytes_on_disk > o_.max_bytes && files_.size() > 1) {
    const auto [old, size] = files_.front();
    files_.pop_front();
    names_.erase(old);
    stats_.bytes_on_disk -= size;
    std::error_code ec;
    fs::remove(o_.dir / old, ec);
  }
}

}  // namespace ds::scheduler

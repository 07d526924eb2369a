// LoraRegistry: the LoRA adapters a server serves by name (serve --lora-modules, and
// POST /v1/load_lora_adapter with --allow-runtime-lora), and their host copies.
//
// Each name maps to an adapter directory and an id that is never reused (a name unloaded and
// loaded again gets a new id, so the engine never mistakes the old weights in a slot for the
// new ones: scheduler/lora_residency.h). An adapter is read and checked when it is added
// (qwen35::load_lora_adapter: a bad one is refused then, not at its first request). Host
// copies are kept for at most max_cpu_loras adapters, least recently used evicted; a request
// for an evicted one reads it from its directory again (requests in flight keep theirs).
//
// Thread-safe: request handlers look names up while others are added and removed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/qwen35/config.h"
#include "model/qwen35/lora_adapter.h"

namespace ds::server {

struct LoraChoice {
  uint64_t id = 0;  // 0: the base model
  std::shared_ptr<const qwen35::LoraAdapter> adapter;
  std::string name;  // the adapter's name (what replies report as their model)
};

class LoraRegistry {
 public:
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxPathBytes = 4096;
  static constexpr size_t kMaxAdapters = 4096;

  LoraRegistry(qwen35::ModelConfig config, qwen35::LoraLimits limits, int32_t max_cpu_loras, std::string base_name);

  // Reads and adds an adapter. std::invalid_argument for a bad or taken name, a path that is not
  // a local directory, too many adapters; std::runtime_error from reading the adapter.
  void add(const std::string& name, const std::string& path);
  // false when no adapter has that name.
  bool remove(const std::string& name);
  // The adapter called name with its host copy (read again if it was evicted); nullopt when
  // there is none. std::runtime_error when its files no longer read.
  std::optional<LoraChoice> find(const std::string& name);

  struct Info {
    std::string name;
    uint64_t id = 0;
    int64_t rank = 0;
  };
  std::vector<Info> list() const;  // by name
  const std::string& base_name() const { return base_; }
  int64_t max_rank() const { return limits_.max_rank; }
  // Adapters whose host copies are held now (tests).
  size_t host_copies() const;

 private:
  struct Entry {
    uint64_t id = 0;
    std::filesystem::path dir;
    int64_t rank = 0;
    std::weak_ptr<const qwen35::LoraAdapter> live;  // held by requests, cached or not
  };
  void keep(const std::string& name, std::shared_ptr<const qwen35::LoraAdapter> a);

  const qwen35::ModelConfig config_;
  const qwen35::LoraLimits limits_;
  const size_t max_cpu_;
  const std::string base_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  uint64_t next_id_ = 1;
  // The host copies kept: most recently used at the back.
  std::list<std::pair<std::string, std::shared_ptr<const qwen35::LoraAdapter>>> lru_;
};

}  // namespace ds::server

#include "server/lora_registry.h"

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace ds::server {

LoraRegistry::LoraRegistry(qwen35::ModelConfig config, qwen35::LoraLimits limits, int32_t max_cpu_loras,
                           std::string base_name)
    : config_(std::move(config)), limits_(limits), max_cpu_(static_cast<size_t>(std::max(1, max_cpu_loras))),
      base_(std::move(base_name)) {}

void LoraRegistry::add(const std::string& name, const std::string& path) {
  if (name.empty() || name.size() > kMaxNameBytes)
    throw std::invalid_argument("a LoRA adapter's name must have 1 to " + std::to_string(kMaxNameBytes) + " bytes");
  if (name == base_) throw std::invalid_argument("'" + name + "' is the base model's name");
  if (path.empty() || path.size() > kMaxPathBytes || path.find("://") != std::string::npos)
    throw std::invalid_argument("lora_path must be a local directory (no URLs, at most " +
                                std::to_string(kMaxPathBytes) + " bytes)");
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    throw std::invalid_argument("lora_path '" + path + "' is not a local directory");
  {
    std::lock_guard lock(mu_);
    if (entries_.count(name)) throw std::invalid_argument("the LoRA adapter '" + name + "' has already been loaded");
    if (entries_.size() >= kMaxAdapters)
      throw std::invalid_argument("this server holds " + std::to_string(kMaxAdapters) + " adapters already");
  }
  // Read outside the lock: a large adapter takes a while.
  auto a = std::make_shared<const qwen35::LoraAdapter>(qwen35::load_lora_adapter(path, config_, limits_));
  if (const std::string left_out = a->ignored(); !left_out.empty())
    spdlog::warn("LoRA adapter '{}': {}", name, left_out);
  std::lock_guard lock(mu_);
  if (entries_.count(name)) throw std::invalid_argument("the LoRA adapter '" + name + "' has already been loaded");
  Entry e;
  e.id = next_id_++;
  e.dir = path;
  e.rank = a->config.rank;
  e.live = a;
  entries_.emplace(name, std::move(e));
  keep(name, std::move(a));
}

bool LoraRegistry::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  if (!entries_.erase(name)) return false;
  lru_.remove_if([&](const auto& p) { return p.first == name; });
  return true;
}

void LoraRegistry::keep(const std::string& name, std::shared_ptr<const qwen35::LoraAdapter> a) {
  lru_.remove_if([&](const auto& p) { return p.first == name; });
  lru_.emplace_back(name, std::move(a));
  while (lru_.size() > max_cpu_) lru_.pop_front();
}

std::optional<LoraChoice> LoraRegistry::find(const std::string& name) {
  std::filesystem::path dir;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    if (auto a = it->second.live.lock()) {
      keep(name, a);
      return LoraChoice{it->second.id, std::move(a), name};
    }
    dir = it->second.dir;
    id = it->second.id;
  }
  auto a = std::make_shared<const qwen35::LoraAdapter>(qwen35::load_lora_adapter(dir, config_, limits_));
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  // Unloaded (or replaced under a new id) while it was read: the request gets what it asked for
  // when it asked, as one already in flight would.
  if (it != entries_.end() && it->second.id == id) {
    if (auto live = it->second.live.lock()) return LoraChoice{id, std::move(live), name};
    it->second.live = a;
    keep(name, a);
  }
  return LoraChoice{id, std::move(a), name};
}

std::vector<LoraRegistry::Info> LoraRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<Info> out;
  for (const auto& [name, e] : entries_) out.push_back({name, e.id, e.rank});
  return out;
}

size_t LoraRegistry::host_copies() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace ds::server

#include "model/qwen35/checkpoint.h"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ds::qwen35 {

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A shard name from the index must name a file inside the checkpoint directory.
bool safe_relative(const std::string& name) {
  const std::filesystem::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

}  // namespace

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error(dir.string() + ": not a checkpoint directory");
  const auto single = dir / "model.safetensors";
  const auto index = dir / "model.safetensors.index.json";
  auto add = [&](const SafetensorsFile& f, const std::string& name, const SafetensorsFile::TensorInfo& info) {
    if (!tensors_.emplace(name, Entry{&f, &info}).second)
      throw std::runtime_error(f.path().string() + ": tensor " + name + " is also in " +
                               tensors_.at(name).file->file_name());
  };

  if (std::filesystem::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& [name, info] : files_.back()->tensors()) add(*files_.back(), name, info);
    return;
  }
  if (!std::filesystem::exists(index))
    throw std::runtime_error(dir.string() + ": no model.safetensors or model.safetensors.index.json");

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(index));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(index.string() + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw std::runtime_error(index.string() + ": no weight_map object");
  std::map<std::string, std::string> weight_map;
  std::map<std::string, SafetensorsFile*> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw std::runtime_error(index.string() + ": weight_map entry " + it.key() + " is not a file name");
    const std::string shard = it.value().get<std::string>();
    if (!safe_relative(shard))
      throw std::runtime_error(index.string() + ": weight_map entry " + it.key() + " names " + shard +
                               ", which is outside the checkpoint directory");
    weight_map[it.key()] = shard;
    if (!shards.count(shard)) {
      files_.push_back(std::make_unique<SafetensorsFile>(dir / shard));
      shards[shard] = files_.back().get();
    }
  }
  for (const auto& [name, shard] : weight_map) {
    const SafetensorsFile& f = *shards.at(shard);
    const auto* info = f.find(name);
    if (!info)
      throw std::runtime_error(f.path().string() + ": tensor " + name +
                               " is listed in model.safetensors.index.json but not in this shard");
    add(f, name, *info);
  }
  for (const auto& [shard, f] : shards)
    for (const auto& [name, info] : f->tensors()) {
      auto it = weight_map.find(name);
      if (it == weight_map.end() || it->second != shard)
        throw std::runtime_error(f->path().string() + ": tensor " + name +
                                 " is not listed for this shard in model.safetensors.index.json");
    }
}

const Checkpoint::Entry* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> Checkpoint::file_names() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->file_name());
  return out;
}

}  // namespace ds::qwen35

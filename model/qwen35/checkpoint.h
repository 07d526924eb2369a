// Checkpoint: the safetensors files of a HF checkpoint directory, mapped and indexed by name.
//
// A directory holds either model.safetensors or model.safetensors.index.json whose
// weight_map names the shard of every tensor. Each file is mapped read-only and its header
// validated (safetensors_file.h); with an index, every listed tensor must be in the shard it
// names and every tensor of a shard must be listed. Names appearing twice are refused.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/qwen35/safetensors_file.h"

namespace ds::qwen35 {

class Checkpoint {
 public:
  // Throws std::runtime_error naming the file at fault.
  explicit Checkpoint(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  // The tensor called name and the file it is in; nullptr when absent.
  struct Entry {
    const SafetensorsFile* file;
    const SafetensorsFile::TensorInfo* info;
  };
  const Entry* find(const std::string& name) const;
  const std::map<std::string, Entry>& tensors() const { return tensors_; }
  // Files, as named in messages ("model.safetensors" or the shard names).
  std::vector<std::string> file_names() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace ds::qwen35

// Test helpers that write safetensors checkpoints: the bundled tiny checkpoint re-written with
// renamed keys, split into shards, with tensors dropped, added, retyped or reshaped, and raw
// (corrupt) files. Everything goes into a TempDir that is removed afterwards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ds::test {

struct StTensor {
  std::string dtype;  // "BF16", "F32", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// Ordered by name, as the writer lays them out.
using StTensors = std::map<std::string, StTensor>;

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Every tensor of a safetensors file.
StTensors read_safetensors(const std::filesystem::path& path);
// A valid file holding tensors (8-byte aligned header, data back to back).
void write_safetensors(const std::filesystem::path& path, const StTensors& tensors);
// A file with exactly this length field, header text and data (for corrupt cases).
void write_raw_safetensors(const std::filesystem::path& path, uint64_t header_len, const std::string& header,
                           const std::vector<uint8_t>& data);
void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

// The tensor with bf16 values widened to f32 (exactly) or narrowed to f16 (exact for the
// fixture's small-magnitude values; checked).
StTensor bf16_to(const StTensor& t, const std::string& dtype);

// A copy of the bundled tiny checkpoint's config files into dir.
void copy_tiny_configs(const std::filesystem::path& dir);
std::filesystem::path tiny_dir();

}  // namespace ds::test

// SafetensorsFile: one .safetensors file, mapped read-only, with a validated header.
//
// Format: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data;
// offsets are relative to the end of the header. Before anything is read through it the
// header is checked: N within the file and below a size bound, valid JSON, a known dtype,
// non-negative shapes whose byte size equals end - begin (without overflow), every range
// inside the file, and no two ranges overlapping. Any violation is a std::runtime_error that
// names the file (and the tensor), so a truncated or corrupt download fails cleanly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ds::qwen35 {

// f8_e4m3: float8_e4m3fn, the codes of FP8 checkpoints (model/qwen35/fp8.h).
enum class StDType : uint8_t { f64, f32, f16, bf16, f8_e4m3, i64, i32, i16, i8, u8, boolean };

class SafetensorsFile {
 public:
  // Headers above this are refused (the format's own bound is 100 MB).
  static constexpr uint64_t kMaxHeaderBytes = 100u * 1024u * 1024u;

  struct TensorInfo {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    const void* data;  // inside the mapping
    uint64_t bytes;
    int64_t numel() const;
  };

  // Headers nesting deeper than this are refused before parsing (a valid one nests 3 deep).
  static constexpr size_t kMaxHeaderDepth = 8;

  explicit SafetensorsFile(const std::filesystem::path& path);
  // A file's bytes already in memory (fuzzing, tests), checked the same way; `name` stands for
  // the path in messages.
  static std::unique_ptr<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, const std::string& name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file_name() const { return path_.filename().string(); }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  // Validates the header of the size_ bytes at base and indexes the tensors.
  void parse(const unsigned char* base);

  std::filesystem::path path_;
  std::vector<uint8_t> owned_;  // from_bytes
  void* map_ = nullptr;
  uint64_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

const char* dtype_name(StDType t);
int64_t dtype_size(StDType t);
// "[1024, 128]"
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace ds::qwen35

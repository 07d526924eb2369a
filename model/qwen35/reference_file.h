// ReferenceFile: the oracle a checkpoint is checked against (reference.safetensors, written
// by HF transformers; format in shared/fixtures/README.md). For prompt i:
//   p{i}.prompt int32 [L], p{i}.prefill_logits f32 [L, V], p{i}.greedy_tokens int32 [G],
//   p{i}.greedy_logits f32 [G, V] (row 0 = logits at the last prompt position, row s = after
//   feeding greedy_tokens[s-1]); optionally p{i}.hidden_states f32 [layers + 1, L, H].
// Or (and) image cases c{i}.* (the vision-language fixture; vision_refcheck.h).
// Rows are read on demand from the mapped file, so a 248k-vocabulary reference does not
// have to fit in memory twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "model/qwen35/safetensors_file.h"

namespace ds::qwen35 {

// A float32 tensor of the file viewed as [rows, cols] (every dim but the last folded in rows).
class RefMatrix {
 public:
  RefMatrix(const SafetensorsFile::TensorInfo& info);
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  void row(int64_t r, std::span<float> dst) const;  // dst.size() == cols()
  std::vector<float> row(int64_t r) const;

 private:
  const unsigned char* data_;
  int64_t rows_, cols_;
  std::vector<int64_t> shape_;
};

// "p{i}.{field}"
std::string prompt_tensor(int i, const char* field);

class ReferenceFile {
 public:
  explicit ReferenceFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  // Prompts p0 .. p{n-1} (consecutive from 0).
  int num_prompts() const { return num_prompts_; }
  // Image cases c0 .. c{n-1} (vision_refcheck.h).
  int num_cases() const { return num_cases_; }
  bool has(const std::string& name) const { return file_.find(name) != nullptr; }
  // An int32 or int64 tensor, flattened.
  std::vector<int32_t> ints(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;
  RefMatrix matrix(const std::string& name) const;

 private:
  const SafetensorsFile::TensorInfo& get(const std::string& name) const;
  SafetensorsFile file_;
  int num_prompts_ = 0;
  int num_cases_ = 0;
};

}  // namespace ds::qwen35

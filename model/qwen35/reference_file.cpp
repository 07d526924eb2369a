#include "model/qwen35/reference_file.h"

#include <cstring>
#include <stdexcept>

namespace ds::qwen35 {

std::string prompt_tensor(int i, const char* field) {
  std::string name = "p";
  name += std::to_string(i);
  name += '.';
  name += field;
  return name;
}

RefMatrix::RefMatrix(const SafetensorsFile::TensorInfo& info)
    : data_(static_cast<const unsigned char*>(info.data)), shape_(info.shape) {
  if (info.dtype != StDType::f32 || info.shape.empty())
    throw std::runtime_error("reference tensor " + info.name + " must be a float32 array, got " +
                             dtype_name(info.dtype) + " " + shape_str(info.shape));
  cols_ = info.shape.back();
  rows_ = cols_ > 0 ? info.numel() / cols_ : 0;
}

void RefMatrix::row(int64_t r, std::span<float> dst) const {
  if (r < 0 || r >= rows_ || static_cast<int64_t>(dst.size()) != cols_)
    throw std::out_of_range("reference row outside the tensor");
  std::memcpy(dst.data(), data_ + r * cols_ * 4, static_cast<size_t>(cols_) * 4);
}

std::vector<float> RefMatrix::row(int64_t r) const {
  std::vector<float> out(static_cast<size_t>(cols_));
  row(r, out);
  return out;
}

ReferenceFile::ReferenceFile(const std::filesystem::path& path) : file_(path) {
  while (has(prompt_tensor(num_prompts_, "prompt"))) ++num_prompts_;
  while (has("c" + std::to_string(num_cases_) + ".input_ids")) ++num_cases_;
  if (num_prompts_ == 0 && num_cases_ == 0)
    throw std::runtime_error(path.string() + ": no prompts (p0.prompt missing) and no image cases (c0.input_ids)");
}

const SafetensorsFile::TensorInfo& ReferenceFile::get(const std::string& name) const {
  const auto* info = file_.find(name);
  if (!info) throw std::runtime_error(path().string() + ": tensor " + name + " is missing");
  return *info;
}

std::vector<int32_t> ReferenceFile::ints(const std::string& name) const {
  const auto& info = get(name);
  if (info.shape.empty() || (info.dtype != StDType::i32 && info.dtype != StDType::i64))
    throw std::runtime_error(path().string() + ": tensor " + name + " must be an int32/int64 array, got " +
                             dtype_name(info.dtype) + " " + shape_str(info.shape));
  std::vector<int32_t> out(static_cast<size_t>(info.numel()));
  const auto* p = static_cast<const unsigned char*>(info.data);
  for (size_t i = 0; i < out.size(); ++i) {
    if (info.dtype == StDType::i32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      if (v < INT32_MIN || v > INT32_MAX)
        throw std::runtime_error(path().string() + ": tensor " + name + " holds an id beyond int32");
      out[i] = static_cast<int32_t>(v);
    }
  }
  return out;
}

std::vector<int64_t> ReferenceFile::shape(const std::string& name) const { return get(name).shape; }

RefMatrix ReferenceFile::matrix(const std::string& name) const {
  const auto& info = get(name);
  try {
    return RefMatrix(info);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path().string() + ": " + e.what());
  }
}

}  // namespace ds::qwen35

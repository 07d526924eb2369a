#include "tests/model/st_writer.h"

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kernels/common/half.h"
#include "model/qwen35/safetensors_file.h"
#include "tests/test_paths.h"

namespace ds::test {

TempDir::TempDir() {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = std::filesystem::temp_directory_path() / ("ds_model_test_" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("TempDir: cannot create a directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

StTensors read_safetensors(const std::filesystem::path& path) {
  const qwen35::SafetensorsFile f(path);
  StTensors out;
  for (const auto& [name, info] : f.tensors()) {
    StTensor t;
    t.dtype = qwen35::dtype_name(info.dtype);
    t.shape = info.shape;
    const auto* p = static_cast<const uint8_t*>(info.data);
    t.bytes.assign(p, p + info.bytes);
    out[name] = std::move(t);
  }
  return out;
}

void write_raw_safetensors(const std::filesystem::path& path, uint64_t header_len, const std::string& header,
                           const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header_len >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_safetensors(const std::filesystem::path& path, const StTensors& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text += ' ';
  write_raw_safetensors(path, text.size(), text, data);
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

StTensor bf16_to(const StTensor& t, const std::string& dtype) {
  if (t.dtype != "BF16") throw std::invalid_argument("bf16_to: tensor is " + t.dtype);
  StTensor out{dtype, t.shape, {}};
  const size_t n = t.bytes.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, t.bytes.data() + 2 * i, 2);
    const float f = bf16_to_f32(h);
    if (dtype == "F32") {
      uint8_t b[4];
      std::memcpy(b, &f, 4);
      out.bytes.insert(out.bytes.end(), b, b + 4);
    } else if (dtype == "F16") {
      const uint16_t x = f32_to_f16(f);
      if (f16_to_f32(x) != f) throw std::invalid_argument("bf16_to: value not exact in f16");
      uint8_t b[2];
      std::memcpy(b, &x, 2);
      out.bytes.insert(out.bytes.end(), b, b + 2);
    } else {
      throw std::invalid_argument("bf16_to: unsupported dtype " + dtype);
    }
  }
  return out;
}

std::filesystem::path tiny_dir() { return data_path("tiny-qwen35"); }

void copy_tiny_configs(const std::filesystem::path& dir) {
  for (const char* f : {"config.json", "generation_config.json"})
    std::filesystem::copy_file(tiny_dir() / f, dir / f, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace ds::test

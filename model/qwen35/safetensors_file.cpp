#include "model/qwen35/safetensors_file.h"

#include "model/grammar/json_nesting.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace ds::qwen35 {

namespace {

struct DTypeEntry {
  const char* name;
  StDType dtype;
};
constexpr DTypeEntry kDTypes[] = {
    {"F64", StDType::f64}, {"F32", StDType::f32}, {"F16", StDType::f16},   {"BF16", StDType::bf16},
    {"F8_E4M3", StDType::f8_e4m3}, {"I64", StDType::i64}, {"I32", StDType::i32}, {"I16", StDType::i16},   {"I8", StDType::i8},
    {"U8", StDType::u8},   {"BOOL", StDType::boolean}};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error(path.string() + ": " + what);
}

}  // namespace

const char* dtype_name(StDType t) {
  for (const auto& e : kDTypes)
    if (e.dtype == t) return e.name;
  return "?";
}

int64_t dtype_size(StDType t) {
  switch (t) {
    case StDType::f64:
    case StDType::i64: return 8;
    case StDType::f32:
    case StDType::i32: return 4;
    case StDType::f16:
    case StDType::bf16:
    case StDType::i16: return 2;
    case StDType::f8_e4m3:
    case StDType::i8:
    case StDType::u8:
    case StDType::boolean: return 1;
  }
  return 1;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t SafetensorsFile::TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(path, "file of " + std::to_string(size_) + " bytes is too short for a safetensors header");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(path, std::string("cannot map: ") + std::strerror(map_err));
  }
  try {
    parse(static_cast<const unsigned char*>(map_));
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

void SafetensorsFile::parse(const unsigned char* base) {
  const std::filesystem::path& path = path_;
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > size_ - 8)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                   std::to_string(size_) + " bytes; truncated?)");
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " is above the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");
  const char* text = reinterpret_cast<const char*>(base + 8);
  if (grammar::json_nests_deeper(std::string_view(text, header_len), kMaxHeaderDepth))
    fail(path, "header nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
  const uint64_t data_size = size_ - 8 - header_len;

  // Duplicate top-level names would silently shadow each other in the parsed object.
  std::set<std::string> seen;
  std::string duplicate;
  nlohmann::json::parser_callback_t on_key = [&](int depth, nlohmann::json::parse_event_t event,
                                                 nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + header_len, on_key);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) fail(path, "tensor " + duplicate + " appears twice in the header");
  if (!header.is_object()) fail(path, "header is not a JSON object");

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<std::string> range_names;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const auto& e = it.value();
    auto bad = [&](const std::string& what) { fail(path, "tensor " + name + ": " + what); };
    if (!e.is_object()) bad("header entry is not an object");
    if (!e.contains("dtype") || !e["dtype"].is_string()) bad("no dtype");
    if (!e.contains("shape") || !e["shape"].is_array()) bad("no shape");
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      bad("data_offsets must be [begin, end]");
    TensorInfo info;
    info.name = name;
    const std::string dt = e["dtype"].get<std::string>();
    const auto* found = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                     [&](const DTypeEntry& d) { return dt == d.name; });
    if (found == std::end(kDTypes)) bad("unsupported dtype " + dt);
    info.dtype = found->dtype;
    // Elements stay below 2^62 / 8 so every byte count below fits in 64 bits.
    const uint64_t limit = (uint64_t{1} << 62) / 8;
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) bad("shape " + e["shape"].dump() + " has a non-integer or negative dimension");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > limit / v) bad("shape " + e["shape"].dump() + " is too large");
      numel *= v;
      info.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets must be non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end) bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] are reversed");
    if (end > data_size)
      bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
          "] run past the end of the data (" + std::to_string(data_size) + " bytes; truncated?)");
    const uint64_t want = numel * static_cast<uint64_t>(dtype_size(info.dtype));
    if (end - begin != want)
      bad("holds " + std::to_string(end - begin) + " bytes but " + dt + " " + shape_str(info.shape) +
          " needs " + std::to_string(want));
    info.data = base + 8 + header_len + begin;
    info.bytes = want;
    if (want > 0) {
      ranges.emplace_back(begin, end);
      range_names.push_back(name);
    }
    tensors_.emplace(name, std::move(info));
  }
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  for (size_t i = 1; i < order.size(); ++i)
    if (ranges[order[i]].first < ranges[order[i - 1]].second)
      fail(path, "tensors " + range_names[order[i - 1]] + " and " + range_names[order[i]] +
                     " overlap in the data");
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->size_ = f->owned_.size();
  if (f->size_ < 8)
    fail(f->path_, "file of " + std::to_string(f->size_) + " bytes is too short for a safetensors header");
  f->parse(f->owned_.data());
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const SafetensorsFile::TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace ds::qwen35

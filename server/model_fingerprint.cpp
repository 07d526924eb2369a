#include "server/model_fingerprint.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "kvcache/disk_entry.h"

namespace ds::server {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxHashed = uint64_t{64} << 20;  // of one file: a safetensors header is far smaller

uint64_t add(uint64_t h, const void* data, size_t n) {
  return kvcache::disk_checksum(std::span<const uint8_t>(static_cast<const uint8_t*>(data), n), h);
}
uint64_t add(uint64_t h, const std::string& s) { return add(h, s.data(), s.size()); }

std::vector<uint8_t> read_prefix(const fs::path& p, uint64_t n) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("fingerprint: cannot read " + p.string());
  std::vector<uint8_t> b(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
  b.resize(static_cast<size_t>(in.gcount()));
  return b;
}

}  // namespace

uint64_t model_fingerprint(const fs::path& dir, const std::string& cache_layout) {
  uint64_t h = add(0, cache_layout);
  const std::vector<uint8_t> config = read_prefix(dir / "config.json", kMaxHashed);
  h = add(h, config.data(), config.size());
  std::vector<fs::path> shards;
  for (const fs::directory_entry& d : fs::directory_iterator(dir))
    if (d.path().extension() == ".safetensors" && d.path().filename() != "reference.safetensors") shards.push_back(d.path());
  std::sort(shards.begin(), shards.end());
  for (const fs::path& p : shards) {
    h = add(h, p.filename().string());
    const uint64_t size = fs::file_size(p);
    h = add(h, &size, sizeof(size));
    const std::vector<uint8_t> len = read_prefix(p, 8);
    uint64_t header = 0;
    if (len.size() == 8) std::memcpy(&header, len.data(), 8);
    const std::vector<uint8_t> head = read_prefix(p, 8 + std::min(header, kMaxHashed));
    h = add(h, head.data(), head.size());
  }
  return h;
}

}  // namespace ds::server

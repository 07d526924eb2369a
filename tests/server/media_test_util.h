// Helpers of the image and video HTTP tests: a fixture file's bytes as a data: URL (through a
// base64 encoder of the tests' own, independent of server/base64), and one /metrics sample.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/server/server_fixture.h"

namespace ds::test {

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string base64(const std::string& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += a[(n >> (6 * k)) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t n = uint8_t(in[i]) << 16;
    out += std::string{a[(n >> 18) & 63], a[(n >> 12) & 63]} + "==";
  } else if (i + 2 == in.size()) {
    const uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += std::string{a[(n >> 18) & 63], a[(n >> 12) & 63], a[(n >> 6) & 63]} + "=";
  }
  return out;
}

// data:TYPE;base64,... of the file at path.
inline std::string file_data_url(const std::filesystem::path& path, const std::string& type) {
  return "data:" + type + ";base64," + base64(file_bytes(path));
}

// The value of the first sample of metric `name` (with labels) on /metrics; -1 when absent.
inline double metric(TestServer& srv, const std::string& name) {
  const std::string text = srv.get("/metrics").text;
  const size_t at = text.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(text.find('}', at) + 2));
}

}  // namespace ds::test

// Paths the tests read: the bundled model and fixtures under tests/data/ (of the source tree
// the test was built from, or DELTASERVE_TEST_DATA_DIR: a test binary carried to another
// machine reads them from a copy there), and where they write scratch files (the system's
// temporary directory: TMPDIR, else the platform's).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ds::test {

inline std::string data_dir() {
  const char* v = std::getenv("DELTASERVE_TEST_DATA_DIR");
  return v && *v ? std::string(v) : std::string(DELTASERVE_TEST_DATA);
}
inline std::string data_path(const std::string& rel) { return data_dir() + "/" + rel; }
inline std::string source_dir() { return DELTASERVE_SOURCE_DIR; }
inline std::string temp_path(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

}  // namespace ds::test

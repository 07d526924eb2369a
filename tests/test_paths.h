// Paths the tests read: the bundled model and fixtures under tests/data/.
#pragma once
#include <string>

namespace ds::test {

inline std::string data_dir() { return DELTASERVE_TEST_DATA; }
inline std::string data_path(const std::string& rel) { return data_dir() + "/" + rel; }
inline std::string source_dir() { return DELTASERVE_SOURCE_DIR; }

}  // namespace ds::test

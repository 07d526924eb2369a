// Shared fixtures of the tokenizer tests: the two real tokenizers, loaded once per process.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/tokenizer/tokenizer.h"
#include "tests/test_paths.h"

namespace ds::test {

// The real Qwen3 tokenizer (151,643 BPE + 26 added tokens), unpacked into the build tree.
inline const tok::Tokenizer& qwen3_tokenizer() {
  static const tok::Tokenizer t = tok::Tokenizer::load(DS_QWEN3_TOKENIZER_DIR);
  return t;
}

// The bundled tiny Qwen3.5 checkpoint's tokenizer (1,004 BPE + 20 added, the \p{M} regex).
inline const tok::Tokenizer& tiny_tokenizer() {
  static const tok::Tokenizer t = tok::Tokenizer::load(data_path("tiny-qwen35"));
  return t;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

}  // namespace ds::test

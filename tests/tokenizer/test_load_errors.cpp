// Loading failures give a TokenizerError whose message names the file and the problem.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/tokenizer/tokenizer.h"
#include "tests/test_paths.h"

using ds::tok::Tokenizer;
using ds::tok::TokenizerError;
using Catch::Matchers::Contains;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("ds_tok_test_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + "_" +
            std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string load_error(const std::string& path) {
  try {
    Tokenizer::load(path);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "no error";
}

// The tiny tokenizer.json with one field replaced.
std::string tiny_with(const std::string& pointer, const nlohmann::json& value) {
  std::ifstream in(ds::test::data_path("tiny-qwen35/tokenizer.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j[nlohmann::json::json_pointer(pointer)] = value;
  return j.dump();
}

}  // namespace

TEST_CASE("tokenizer load errors name the file", "[tokenizer][errors]") {
  TempDir dir;
  CHECK_THAT(load_error((dir.path / "nope").string()), Contains("not found") && Contains("nope"));
  CHECK_THAT(load_error(dir.path.string()), Contains("tokenizer.json") && Contains("not found"));

  const std::string bad_json = dir.write("bad.json", "{\"model\": [1, 2");
  CHECK_THAT(load_error(bad_json), Contains("bad.json") && Contains("invalid JSON"));

  const std::string word_piece = dir.write(
      "wp.json", tiny_with("/model/type", "WordPiece"));
  CHECK_THAT(load_error(word_piece), Contains("wp.json") && Contains("WordPiece"));

  const std::string lowercase = dir.write(
      "lc.json", tiny_with("/normalizer", {{"type", "Lowercase"}}));
  CHECK_THAT(load_error(lowercase), Contains("lc.json") && Contains("Lowercase"));

  const std::string metaspace = dir.write(
      "ms.json", tiny_with("/decoder", {{"type", "Metaspace"}}));
  CHECK_THAT(load_error(metaspace), Contains("ms.json") && Contains("Metaspace"));

  const std::string bad_regex = dir.write(
      "re.json", tiny_with("/pre_tokenizer/pretokenizers/0/pattern/Regex", "(\\p{L}"));
  CHECK_THAT(load_error(bad_regex), Contains("re.json") && Contains("regex"));

  const std::string bad_merge = dir.write(
      "merge.json", tiny_with("/model/merges/0", nlohmann::json::array({"Ġ", "nonexistent"})));
  CHECK_THAT(load_error(bad_merge), Contains("merge.json") && Contains("merges[0]"));

  const std::string not_object = dir.write("arr.json", "[]");
  CHECK_THAT(load_error(not_object), Contains("arr.json"));
}

TEST_CASE("from_json_text names its origin", "[tokenizer][errors]") {
  try {
    Tokenizer::from_json_text("{}", "inline-config");
    FAIL("expected an error");
  } catch (const TokenizerError& e) {
    CHECK_THAT(e.what(), Contains("inline-config") && Contains("model"));
  }
}

// tokenize: encode or decode JSON lines with a tokenizer.json, for scripts and checks.
//
//   tokenize --tokenizer DIR            {"text": "..."} per line  ->  {"ids": [...]}
//   tokenize --tokenizer DIR --decode   {"ids": [...]} per line   ->  {"text": "..."}
//
// Every input line gets exactly one output line; a line that cannot be processed gets
// {"error": "..."} and the next line is read.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "model/tokenizer/tokenizer.h"

namespace {

nlohmann::json process(const ds::tok::Tokenizer& tok, const std::string& line, bool decode,
                       bool skip_special, bool allow_special) {
  const nlohmann::json in = nlohmann::json::parse(line);
  if (!in.is_object()) throw std::runtime_error("expected a JSON object");
  if (decode) {
    if (!in.contains("ids") || !in["ids"].is_array())
      throw std::runtime_error("expected {\"ids\": [...]}");
    std::vector<int32_t> ids;
    for (const auto& v : in["ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        throw std::runtime_error("ids must be non-negative 32-bit integers");
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    return {{"text", tok.decode(ids, skip_special)}};
  }
  if (!in.contains("text") || !in["text"].is_string())
    throw std::runtime_error("expected {\"text\": \"...\"}");
  return {{"ids", tok.encode(in["text"].get<std::string>(), allow_special)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encode {\"text\"} or decode {\"ids\"} JSON lines with an HF tokenizer.json"};
  std::string path;
  bool decode = false, skip_special = false, no_special = false;
  app.add_option("--tokenizer", path, "model directory or tokenizer.json")->required();
  app.add_flag("--decode", decode, "read {\"ids\": [...]} lines and write {\"text\": ...}");
  app.add_flag("--skip-special", skip_special, "decode: drop special tokens");
  app.add_flag("--no-special", no_special, "encode: treat special-token text as plain text");
  CLI11_PARSE(app, argc, argv);

  std::optional<ds::tok::Tokenizer> tok;
  try {
    tok.emplace(ds::tok::Tokenizer::load(path));
  } catch (const std::exception& e) {
    std::cerr << "tokenize: " << e.what() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json out;
    try {
      out = process(*tok, line, decode, skip_special, !no_special);
    } catch (const std::exception& e) {
      out = {{"error", e.what()}};
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  return 0;
}

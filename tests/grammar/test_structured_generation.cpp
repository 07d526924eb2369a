// The structured-output acceptance suite (issue 23): for every schema of JSON-Schema-Test-Suite
// (Debian's json-schema-test-suite, drafts 4, 6 and 7) that the compiler supports, and for the
// OpenAI-style tool schemas of tests/data/grammar/tool_schemas.json (tuples in the draft 7 form,
// items + additionalItems, which valijson reads), the random tiny model
// generates under the schema's grammar through the engine (CPU backend, or DELTASERVE_TEST_BACKEND
// with its sampler: on cuda / cuda-f32 the masks are applied by the CUDA sampler; temperature 1,
// three seeds); every output that ends by itself must parse and validate against the schema with an
// independent validator (valijson). Outputs cut by max_tokens are counted, not judged.
//
// A random model at temperature 1 picks among the allowed tokens nearly uniformly, so inside
// a string it would almost never pick one of the few tokens that close it. The requests add a
// logit_bias to the tokens that contain JSON structure characters (still temperature 1, still
// any allowed token), so that most values end within max_tokens and the check has substance.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "model/grammar/json_schema.h"
#include "model/qwen35/model.h"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/scheduler/engine_test_util.h"
#include "tests/test_backend.h"

using namespace ds;

namespace {

struct Case {
  std::string origin;  // file and index, or the tool's name
  nlohmann::json schema;
  valijson::SchemaParser::Version draft;
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
};

std::vector<Case> suite_cases(int& unsupported, std::vector<std::string>& reasons) {
  std::vector<Case> out;
  std::set<std::string> seen;
  const char* env = std::getenv("JSON_SCHEMA_TEST_SUITE_DIR");  // a copy, on a machine without the package
  const std::filesystem::path root = env && *env ? env : JSON_SCHEMA_TEST_SUITE_DIR;
  for (const char* draft : {"draft4", "draft6", "draft7"}) {
    std::vector<std::filesystem::path> files;
    for (const auto& f : std::filesystem::directory_iterator(root / draft))
      if (f.path().extension() == ".json") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f);
      const nlohmann::json groups = nlohmann::json::parse(in);
      for (size_t i = 0; i < groups.size(); ++i) {
        const nlohmann::json& schema = groups[i]["schema"];
        if (!seen.insert(schema.dump()).second) continue;
        Case c{f.filename().string() + "#" + std::to_string(i) + " (" + draft + ")", schema,
               std::string(draft) == "draft4" ? valijson::SchemaParser::kDraft4 : valijson::SchemaParser::kDraft7,
               nullptr};
        try {
          c.compiled = grammar::compile(grammar::json_schema_grammar(grammar::OrderedJson::parse(schema.dump())),
                                        test::tiny_vocab());
        } catch (const grammar::GrammarError& e) {
          ++unsupported;
          reasons.push_back(c.origin + ": " + e.what());
          continue;
        }
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

std::vector<Case> tool_cases() {
  std::ifstream in(test::data_path("grammar/tool_schemas.json"));
  const nlohmann::json tools = nlohmann::json::parse(in);
  std::vector<Case> out;
  for (const nlohmann::json& t : tools) {
    Case c{"tool " + t["function"]["name"].get<std::string>(), t["function"]["parameters"],
           valijson::SchemaParser::kDraft7, nullptr};
    INFO(c.origin);
    REQUIRE_NOTHROW(c.compiled = grammar::compile(
                        grammar::json_schema_grammar(grammar::OrderedJson::parse(c.schema.dump())), test::tiny_vocab()));
    out.push_back(std::move(c));
  }
  return out;
}

// Empty when `text` is JSON valid under the schema; otherwise what is wrong.
std::string validate(const Case& c, const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return std::string("not JSON: ") + e.what();
  }
  valijson::Schema schema;
  valijson::SchemaParser parser(c.draft);
  valijson::adapters::NlohmannJsonAdapter schema_adapter(c.schema);
  parser.populateSchema(schema_adapter, schema);
  valijson::Validator validator;
  valijson::adapters::NlohmannJsonAdapter target(doc);
  valijson::ValidationResults results;
  if (validator.validate(schema, target, &results)) return {};
  std::string why;
  valijson::ValidationResults::Error err;
  while (results.popError(err)) {
    std::string ctx;
    for (const std::string& p : err.context) ctx += p;
    why += ctx + ": " + err.description + "; ";
  }
  return why;
}

}  // namespace

TEST_CASE("structured generation: every completed output validates against its schema", "[grammar][generation]") {
  int unsupported = 0;
  std::vector<std::string> reasons;
  std::vector<Case> cases = suite_cases(unsupported, reasons);
  const size_t from_suite = cases.size();
  for (Case& c : tool_cases()) cases.push_back(std::move(c));
  INFO("schemas: " << from_suite << " from JSON-Schema-Test-Suite (" << unsupported << " unsupported), "
                   << cases.size() - from_suite << " tool schemas");
  REQUIRE(cases.size() >= 100);

  auto backend = test::make_test_backend();  // DELTASERVE_TEST_BACKEND (tests/test_backend.h)
  auto model = qwen35::Model::load(*backend, test::data_path("tiny-qwen35"));
  scheduler::Qwen35ForwardModel forward(*model, /*logits_in_place=*/test::test_sampler_on_device());
  scheduler::EngineConfig config;
  config.scheduler.max_num_seqs = 128;
  config.scheduler.max_num_batched_tokens = 2048;
  config.num_blocks = 128 * 24;
  config.max_ctx = 384;
  scheduler::Engine engine(forward, config, test::make_test_sampler(*backend));

  const tok::Tokenizer& tok = test::grammar_tiny_tokenizer();
  const std::vector<int32_t> prompt = tok.encode("Reply with one JSON value:");
  std::vector<kernels::LogitBias> bias;
  for (int32_t t = 0; t < tok.vocab_size(); ++t) {
    const std::string_view b = tok.token_bytes(t);
    if (!tok.is_special(t) && b.find_first_of("\"{}[],") != std::string_view::npos) bias.push_back({t, 3.0f});
  }
  constexpr int kSeeds = 3;
  std::vector<scheduler::RequestHandle> handles;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int s = 0; s < kSeeds; ++s) {
      scheduler::Request r(prompt);
      r.max_tokens = 256;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 1000 * i + static_cast<uint64_t>(s);
      r.sampling.logit_bias = bias;
      r.grammar = cases[i].compiled;
      auto sub = engine.submit(std::move(r));
      REQUIRE(sub.ok());
      handles.push_back(std::move(sub.handle));
    }
  }
  int completed = 0, cut = 0;
  for (size_t k = 0; k < handles.size(); ++k) {
    const Case& c = cases[k / kSeeds];
    const test::Outcome o = test::collect(handles[k], std::chrono::seconds(600));
    REQUIRE(o.finish.has_value());
    INFO(c.origin << " seed " << k % kSeeds << ": " << c.schema.dump() << " error: " << o.last.error);
    REQUIRE(*o.finish != scheduler::FinishReason::error);
    if (*o.finish == scheduler::FinishReason::length) {
      ++cut;
      continue;
    }
    REQUIRE(*o.finish == scheduler::FinishReason::stop);
    const std::string text = tok.decode(o.tokens, /*skip_special=*/true);
    INFO("output: " << text);
    CHECK(validate(c, text) == "");
    ++completed;
  }
  WARN("structured generation: " << cases.size() << " schemas (" << from_suite << " from the test suite, "
                                 << unsupported << " of its schemas unsupported), " << completed
                                 << " outputs completed and validated, " << cut << " cut by max_tokens");
  // Most outputs must end by themselves, or the check above says little.
  CHECK(completed >= static_cast<int>(handles.size() * 3 / 4));
}

// The HF oracle for chat templates: every case of the three fixtures, rendered exactly, and
// for the bundled model the rendered prompt tokenized to HF's prompt ids.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/test_paths.h"

using ds::chat::ChatTemplate;
using ds::test::data_path;
using ordered_json = nlohmann::ordered_json;

namespace {

ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return ordered_json::parse(in);
}

}  // namespace

TEST_CASE("qwen35_style.jinja: all 42 HF renders", "[chat][fixture]") {
  const auto ref = read_json(data_path("chat-templates/reference.json"));
  const auto tmpl = ChatTemplate::from_file(data_path("chat-templates/" + ref.at("template_file").get<std::string>()));
  const auto& cases = ref.at("cases");
  REQUIRE(cases.size() == 42);
  int errors = 0;
  for (const auto& c : cases) {
    INFO("case: " << c.dump().substr(0, 400));
    const auto& expected = c.at("rendered");
    if (expected.is_object()) {  // the template raised for this input in HF
      ++errors;
      CHECK_THROWS_AS(tmpl.render(c.at("messages"), c.at("kwargs"), c.at("add_generation_prompt").get<bool>()),
                      ds::chat::TemplateError);
      continue;
    }
    CHECK(tmpl.render(c.at("messages"), c.at("kwargs"), c.at("add_generation_prompt").get<bool>()) ==
          expected.get<std::string>());
  }
  INFO("error cases in the fixture: " << errors);
}

TEST_CASE("qwen3 chat template from tokenizer_config.json: all HF renders", "[chat][fixture]") {
  const auto ref = read_json(data_path("qwen3-tokenizer-ref/reference.json"));
  const auto tmpl = ChatTemplate::from_model_dir(data_path("qwen3-tokenizer-ref"));
  CHECK(tmpl.special_tokens().at("eos_token") == "<|im_end|>");
  CHECK(tmpl.special_tokens().at("pad_token") == "<|endoftext|>");
  CHECK_FALSE(tmpl.special_tokens().contains("bos_token"));  // null in the config
  const auto& cases = ref.at("chat_template_cases");
  REQUIRE(cases.size() == 10);
  for (const auto& c : cases) {
    INFO("case: " << c.dump().substr(0, 400));
    CHECK(tmpl.render(c.at("messages"), c.at("kwargs"), c.at("add_generation_prompt").get<bool>()) ==
          c.at("rendered").get<std::string>());
  }
}

TEST_CASE("tiny-qwen35: chat_template.jinja renders and tokenizes to HF's prompt ids",
          "[chat][fixture]") {
  const auto ref = read_json(data_path("tiny-qwen35/reference.json"));
  const auto tmpl = ChatTemplate::from_model_dir(data_path("tiny-qwen35"));
  const auto tok = ds::tok::Tokenizer::load(data_path("tiny-qwen35"));
  const auto& chats = ref.at("chat");
  REQUIRE(chats.size() == 3);
  for (const auto& c : chats) {
    const std::string rendered = tmpl.render(c.at("messages"), ordered_json::object(), true);
    CHECK(rendered == c.at("rendered").get<std::string>());
    CHECK(tok.encode(rendered) == c.at("prompt_ids").get<std::vector<int32_t>>());
  }
}

TEST_CASE("an override file replaces the model's template", "[chat]") {
  const auto tmpl = ChatTemplate::from_model_dir(data_path("tiny-qwen35"),
                                                 data_path("chat-templates/qwen35_style.jinja"));
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": " hi "}])");
  CHECK(tmpl.render(messages, ordered_json::object(), true) ==
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  CHECK(tmpl.special_tokens().at("eos_token") == "<|im_end|>");
}

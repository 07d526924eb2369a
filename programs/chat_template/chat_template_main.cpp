// chat-template: render chat prompts from JSON lines, for scripts and checks.
//
//   chat-template --template FILE        (or --model DIR [--template FILE])
//   stdin:  {"messages": [...], "kwargs": {...}, "add_generation_prompt": true}   per line
//   stdout: {"rendered": "..."}  or  {"error": "...", "kind": "raised|runtime|input"}
//
// Every input line gets exactly one output line; a bad line does not stop the run.
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/chat_template.h"

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json process(const ds::chat::ChatTemplate& tmpl, const std::string& line) {
  ordered_json in;
  try {
    in = ordered_json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return {{"error", std::string("invalid JSON: ") + e.what()}, {"kind", "input"}};
  }
  if (!in.is_object() || !in.contains("messages"))
    return {{"error", "expected {\"messages\": [...], \"kwargs\": {...}, \"add_generation_prompt\": bool}"},
            {"kind", "input"}};
  const ordered_json kwargs = in.value("kwargs", ordered_json::object());
  const bool add = in.contains("add_generation_prompt") && in["add_generation_prompt"].is_boolean() &&
                   in["add_generation_prompt"].get<bool>();
  try {
    return {{"rendered", tmpl.render(in["messages"], kwargs, add)}};
  } catch (const ds::chat::TemplateRaisedError& e) {
    return {{"error", e.what()}, {"kind", "raised"}};
  } catch (const ds::chat::TemplateError& e) {
    return {{"error", e.what()}, {"kind", "runtime"}};
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Render HF chat templates for JSON lines of messages"};
  std::string template_file, model_dir;
  app.add_option("--template", template_file, "chat template file (.jinja)");
  app.add_option("--model", model_dir, "model directory (template and special tokens)");
  CLI11_PARSE(app, argc, argv);
  if (template_file.empty() && model_dir.empty()) {
    std::cerr << "chat-template: give --template FILE or --model DIR\n";
    return 2;
  }
  std::optional<ds::chat::ChatTemplate> tmpl;
  try {
    if (!model_dir.empty())
      tmpl.emplace(ds::chat::ChatTemplate::from_model_dir(
          model_dir, template_file.empty() ? std::nullopt : std::optional<std::string>(template_file)));
    else
      tmpl.emplace(ds::chat::ChatTemplate::from_file(template_file));
  } catch (const std::exception& e) {
    std::cerr << "chat-template: " << e.what() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    std::cout << process(*tmpl, line).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
  }
  return 0;
}

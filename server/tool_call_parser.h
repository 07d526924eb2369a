// ToolCallParser: turns the tool calls a Qwen model writes into OpenAI `tool_calls`, while
// the text streams.
//
// Qwen3.5 / Qwen3.6 (and Qwen3-Coder) write XML:
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// Older Qwen templates (Qwen3, Qwen2.5: the bundled tiny model's) write JSON inside the same
// tags: <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>.
// Both are recognised per call.
//
// Output is a stream of deltas with a stable index and id, as OpenAI streams them: a call's
// first delta carries index, id ("call_..."), the function name and empty arguments; later
// deltas carry argument fragments that concatenate to the call's JSON arguments (compact
// JSON, one fragment per XML parameter as soon as it is complete). Parameter values are
// typed by the request's tool schema (integer/number/boolean/object/array are parsed from
// the text; strings and unknown parameters stay strings), as vLLM's qwen3_coder parser does.
//
// Text before a call is content; whitespace between and after calls is dropped. Text that
// opens a <tool_call> but is not a recognisable call is given back as content. At the end
// (flush) an XML call cut short by max_tokens is closed with the parameters it has.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/json.h"

namespace ds::server {

// The type a tool parameter's value is read as: the schema's "type" (the first one that is
// not "null" when it lists several), or "" when it gives none (the value stays a string).
std::string tool_parameter_type(const Json& property_schema);

struct ToolCallDelta {
  int index = 0;
  bool opens = false;     // the call's first delta: id and name are set
  std::string id;
  std::string name;
  std::string arguments;  // a fragment of the call's JSON arguments
};

class ToolCallParser {
 public:
  // tools: the request's `tools` array (used for parameter types); may be null.
  explicit ToolCallParser(Json tools = nullptr);

  struct Output {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  Output push(std::string_view text);
  Output flush();

  // Calls that have been opened (named) so far.
  int num_calls() const { return next_index_; }

 private:
  struct Call {
    int index = -1;  // -1 until named
    std::string id;
    std::string function;
    size_t params_sent = 0;
    bool args_closed = false;
  };
  void emit_content(Output& out, std::string_view text);
  // Advances the current call over its text so far; `complete` when the closing tag (or the
  // end of the generation) has been seen.
  void progress_call(Output& out, std::string_view body, bool complete, bool closing_tag);
  Json typed_value(const std::string& function, const std::string& key,
                             std::string raw) const;
  void open_call(Output& out, std::string name);

  Json tools_;
  bool in_call_ = false;
  bool after_call_ = false;
  std::string held_;  // content: a partial "<tool_call>"
  std::string call_;  // in a call: the text after "<tool_call>"
  Call cur_;
  int next_index_ = 0;
};

}  // namespace ds::server

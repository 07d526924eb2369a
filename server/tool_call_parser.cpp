#include "server/tool_call_parser.h"

#include <cctype>

#include "server/partial_match.h"
#include "server/random_id.h"

namespace ds::server {

namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string tool_parameter_type(const Json& prop) {
  if (!prop.is_object()) return {};
  auto it = prop.find("type");
  if (it == prop.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array())
    for (const auto& t : *it)
      if (t.is_string() && t.get<std::string>() != "null") return t.get<std::string>();
  return {};
}

ToolCallParser::ToolCallParser(Json tools) : tools_(std::move(tools)) {}

void ToolCallParser::emit_content(Output& out, std::string_view text) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  out.content.append(text);
}

void ToolCallParser::open_call(Output& out, std::string name) {
  cur_.index = next_index_++;
  cur_.id = random_id("call_");
  cur_.function = name;
  ToolCallDelta d;
  d.index = cur_.index;
  d.opens = true;
  d.id = cur_.id;
  d.name = std::move(name);
  out.calls.push_back(std::move(d));
}

Json ToolCallParser::typed_value(const std::string& function, const std::string& key,
                                           std::string raw) const {
  // The model writes "\nVALUE\n" between the tags.
  if (!raw.empty() && raw.front() == '\n') raw.erase(0, 1);
  if (!raw.empty() && raw.back() == '\n') raw.pop_back();

  std::string type;
  if (tools_.is_array()) {
    for (const auto& t : tools_) {
      const auto* fn = t.is_object() && t.contains("function") ? &t["function"] : &t;
      if (!fn->is_object() || fn->value("name", "") != function) continue;
      const auto params = fn->value("parameters", Json::object());
      if (params.is_object() && params.contains("properties") && params["properties"].is_object() &&
          params["properties"].contains(key))
        type = tool_parameter_type(params["properties"][key]);
      break;
    }
  }
  if (type.empty() || type == "string") return raw;
  const std::string_view v = trim(raw);
  if (type == "boolean") {
    std::string lower(v);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == "true") return true;
    if (lower == "false") return false;
    return raw;
  }
  auto parsed = parse_json(v);
  if (parsed.is_discarded()) return raw;
  if ((type == "integer" || type == "number") && parsed.is_number()) return parsed;
  if (type == "object" && parsed.is_object()) return parsed;
  if (type == "array" && parsed.is_array()) return parsed;
  if (type == "null" && parsed.is_null()) return parsed;
  return raw;
}

void ToolCallParser::progress_call(Output& out, std::string_view body, bool complete, bool closing_tag) {
  const std::string_view lead = trim(body);
  const size_t fpos = body.find(kFunctionOpen);
  const bool xml = fpos != std::string_view::npos && trim(body.substr(0, fpos)).empty();

  if (!xml) {
    if (!complete) return;  // JSON calls (and undecided text) are judged whole
    if (cur_.index < 0 && !lead.empty() && lead.front() == '{') {
      auto j = parse_json(lead);
      if (j.is_object() && j.contains("name") && j["name"].is_string()) {
        open_call(out, j["name"].get<std::string>());
        std::string args = "{}";
        if (j.contains("arguments")) {
          const auto& a = j["arguments"];
          args = a.is_string() ? a.get<std::string>() : dump(a);
        } else if (j.contains("parameters")) {
          args = dump(j["parameters"]);
        }
        out.calls.push_back(ToolCallDelta{cur_.index, false, {}, {}, std::move(args)});
        cur_.args_closed = true;
        return;
      }
    }
    if (cur_.index < 0) {
      // Not a call after all: give the text back.
      std::string text(kCallOpen);
      text.append(body);
      if (closing_tag) text.append(kCallClose);
      after_call_ = false;
      out.content.append(text);
    }
    return;
  }

  // <function=NAME>
  const size_t name_start = fpos + kFunctionOpen.size();
  const size_t gt = body.find('>', name_start);
  if (gt == std::string_view::npos) {
    if (!complete) return;
  }
  if (cur_.index < 0) {
    if (gt == std::string_view::npos) {
      std::string text(kCallOpen);
      text.append(body);
      if (closing_tag) text.append(kCallClose);
      out.content.append(text);
      return;
    }
    open_call(out, std::string(trim(body.substr(name_start, gt - name_start))));
  }
  if (gt == std::string_view::npos) return;

  // <parameter=KEY>VALUE</parameter> ..., each complete one sent once, in order.
  size_t pos = gt + 1;
  size_t seen = 0;
  bool function_closed = false;
  for (;;) {
    const size_t popen = body.find(kParamOpen, pos);
    const size_t fclose = body.find(kFunctionClose, pos);
    if (fclose != std::string_view::npos && (popen == std::string_view::npos || fclose < popen)) {
      function_closed = true;
      break;
    }
    if (popen == std::string_view::npos) break;
    const size_t key_start = popen + kParamOpen.size();
    const size_t key_end = body.find('>', key_start);
    if (key_end == std::string_view::npos) break;
    const size_t vstart = key_end + 1;
    size_t vend = std::string_view::npos;
    size_t next = std::string_view::npos;
    for (std::string_view t : {kParamClose, kParamOpen, kFunctionClose}) {
      const size_t p = body.find(t, vstart);
      if (p < vend) {
        vend = p;
        next = t == kParamClose ? p + t.size() : p;
      }
    }
    if (vend == std::string_view::npos) {
      if (!complete) break;
      vend = body.size();  // cut short: take what was written
      next = body.size();
    }
    if (seen >= cur_.params_sent) {
      const std::string key(trim(body.substr(key_start, key_end - key_start)));
      std::string frag = cur_.params_sent == 0 ? "{" : ",";
      frag += dump(key) + ":" + dump(typed_value(cur_.function, key, std::string(body.substr(vstart, vend - vstart))));
      out.calls.push_back(ToolCallDelta{cur_.index, false, {}, {}, std::move(frag)});
      ++cur_.params_sent;
    }
    ++seen;
    pos = next;
  }
  if ((function_closed || complete) && !cur_.args_closed) {
    out.calls.push_back(ToolCallDelta{cur_.index, false, {}, {}, cur_.params_sent == 0 ? "{}" : "}"});
    cur_.args_closed = true;
  }
}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(text);
  std::string_view rest = buf;
  for (;;) {
    if (!in_call_) {
      const size_t p = rest.find(kCallOpen);
      if (p == std::string_view::npos) {
        const size_t hold = partial_tag_tail(rest, kCallOpen);
        emit_content(out, rest.substr(0, rest.size() - hold));
        held_.assign(rest.substr(rest.size() - hold));
        break;
      }
      emit_content(out, rest.substr(0, p));
      rest.remove_prefix(p + kCallOpen.size());
      in_call_ = true;
      call_.clear();
      cur_ = Call{};
      continue;
    }
    call_.append(rest);
    rest = {};
    const size_t e = call_.find(kCallClose);
    if (e == std::string::npos) {
      progress_call(out, call_, false, false);
      break;
    }
    const std::string tail = call_.substr(e + kCallClose.size());
    progress_call(out, std::string_view(call_).substr(0, e), true, true);
    in_call_ = false;
    after_call_ = cur_.index >= 0;  // text that only looked like a call keeps its spacing
    call_.clear();
    buf = tail;  // continue with the text after the call
    rest = buf;
  }
  return out;
}

ToolCallParser::Output ToolCallParser::flush() {
  Output out;
  if (in_call_) {
    progress_call(out, call_, true, false);
    in_call_ = false;
    call_.clear();
  } else {
    std::string tail = std::move(held_);
    held_.clear();
    emit_content(out, tail);
  }
  return out;
}

}  // namespace ds::server

#include "programs/bench_serve/stream_reader.h"

#include "programs/bench_serve/bench_json.h"

namespace ds::bench {

namespace {

double seconds(StreamReader::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool non_empty_string(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

std::string clip(std::string_view s) {
  constexpr size_t kMax = 400;
  return s.size() <= kMax ? std::string(s) : std::string(s.substr(0, kMax)) + "...";
}

}  // namespace

std::string error_message(std::string_view body) {
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const Json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return clip(e["message"].get<std::string>());
    if (e.is_string()) return clip(e.get<std::string>());
  }
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return clip(j["message"].get<std::string>());
  return clip(body);
}

void StreamReader::fail(std::string error) {
  if (r_.error.empty()) r_.error = std::move(error);
}

void StreamReader::on_event(std::string_view data, Clock::time_point t) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const Json j = Json::parse(data, nullptr, false);
  if (!j.is_object()) {
    fail("malformed stream event: " + clip(data));
    return;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    fail("error in the stream: " + error_message(data));
    return;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    r_.prompt_tokens = u->value("prompt_tokens", int64_t{0});
    r_.completion_tokens = u->value("completion_tokens", int64_t{0});
    got_usage_ = true;
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) return;
  bool output = false;
  for (const Json& c : *choices) {
    if (!c.is_object()) continue;
    if (chat_) {
      if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
        if (non_empty_string(*d, "content")) r_.content += (*d)["content"].get<std::string>();
        output = output || non_empty_string(*d, "content") || non_empty_string(*d, "reasoning_content") ||
                 non_empty_string(*d, "reasoning") ||
                 (d->contains("tool_calls") && (*d)["tool_calls"].is_array() && !(*d)["tool_calls"].empty());
      }
    } else if (non_empty_string(c, "text")) {
      r_.content += c["text"].get<std::string>();
      output = true;
    }
    if (c.contains("finish_reason") && !c["finish_reason"].is_null() && !got_finish_) {
      got_finish_ = true;
      finish_time_ = t;
      if (c["finish_reason"].is_string()) r_.finish_reason = c["finish_reason"].get<std::string>();
    }
  }
  if (!output) return;
  if (!got_output_)
    r_.ttft = seconds(t - sent_);
  else
    r_.itl.push_back(seconds(t - last_output_));
  got_output_ = true;
  last_output_ = t;
}

RequestResult StreamReader::finish(Clock::time_point end, int status, const std::string& error_body,
                                   const std::string& transport_error) {
  r_.latency = seconds(end - sent_);
  if (status != 200 && status != 0) {
    r_.error.clear();  // the status says it first
    fail("HTTP " + std::to_string(status) + ": " + error_message(error_body));
  }
  if (!transport_error.empty()) fail("connection: " + transport_error);
  if (!done_) fail("the stream ended before \"data: [DONE]\"");
  if (!got_usage_) fail("no usage in the stream (does the server honour stream_options.include_usage?)");
  if (!got_output_ && got_finish_) r_.ttft = seconds(finish_time_ - sent_);
  if (!got_output_ && !got_finish_ && r_.error.empty()) fail("the stream held no choice");
  r_.success = r_.error.empty();
  return std::move(r_);
}

}  // namespace ds::bench

#include "programs/bench_serve/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

#include "programs/bench_serve/random_image.h"
#include "programs/bench_serve/random_prompt.h"
#include "programs/bench_serve/random_video.h"

namespace ds::bench {

namespace {

Json user_message(const std::string& text) { return Json::array({{{"role", "user"}, {"content", text}}}); }

// The clips of --video-seconds / --video-size as data: URLs: min(requests, 8) distinct ones,
// request i sending clip i % 8 (encoding a long clip takes seconds; eight distinct clips in
// turn never hit a server's LRU encoder cache, which holds about one 720p clip's encodings).
std::vector<std::string> video_urls(const BenchOptions& o) {
  std::vector<std::string> out;
  if (o.video_size.empty()) return out;
  int width = 0, height = 0;
  parse_image_size(o.video_size, width, height);
  for (int k = 0; k < std::min(o.num_prompts, 8); ++k)
    out.push_back(mp4_data_url(random_mp4(width, height, o.video_seconds, o.video_fps, o.seed * 7919ULL + k)));
  return out;
}

// The clip (with --video-size) and images (with --image-size) of request `index`, then the
// text, as the content of a user message; plain text when there are neither.
Json user_content(const BenchOptions& o, int index, const std::string& text, const std::vector<std::string>& clips) {
  if (o.image_size.empty() && clips.empty()) return text;
  Json parts = Json::array();
  if (!clips.empty())
    parts.push_back({{"type", "video_url"}, {"video_url", {{"url", clips[static_cast<size_t>(index) % clips.size()]}}}});
  int width = 0, height = 0;
  if (!o.image_size.empty()) parse_image_size(o.image_size, width, height);
  const int n = o.image_size.empty() ? 0 : std::max(1, o.images_per_request);
  for (int k = 0; k < n; ++k) {
    const uint64_t seed = o.seed * 1000003ULL + static_cast<uint64_t>(index) * static_cast<uint64_t>(n) + k;
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", jpeg_data_url(random_jpeg(width, height, seed))}}}});
  }
  parts.push_back({{"type", "text"}, {"text", text}});
  return parts;
}

Session single(Json input, int max_tokens, int nominal) {
  Session s;
  s.turns.push_back(Turn{std::move(input), max_tokens, nominal});
  return s;
}

std::vector<Session> random_sessions(const BenchOptions& o, bool chat) {
  RandomPrompt r(o.seed, o.random_vocab_size);
  const std::vector<std::string> clips = video_urls(o);
  std::vector<Session> out;
  for (int i = 0; i < o.num_prompts; ++i) {
    const int in = r.length(o.random_input_len, o.random_range_ratio);
    const int max_tokens = r.length(o.random_output_len, o.random_range_ratio);
    Json input = chat ? Json::array({{{"role", "user"}, {"content", user_content(o, i, r.words(in), clips)}}}) : r.prompt(in);
    out.push_back(single(std::move(input), max_tokens, in));
  }
  return out;
}

// Request i belongs to group i % G: a group's requests are spread over the run, so a server
// sees each prefix again while other prefixes are in flight, not in one run of repeats.
std::vector<Session> shared_prefix_sessions(const BenchOptions& o, bool chat) {
  RandomPrompt r(o.seed, chat ? 0 : o.random_vocab_size);
  std::vector<Json> prefixes;
  for (int g = 0; g < o.shared_prefix_groups; ++g)
    prefixes.push_back(chat ? Json(r.words(o.shared_prefix_len)) : r.prompt(o.shared_prefix_len));
  const std::vector<std::string> clips = chat ? video_urls(o) : std::vector<std::string>{};
  std::vector<Session> out;
  const int nominal = o.shared_prefix_len + o.shared_suffix_len;
  for (int i = 0; i < o.num_prompts; ++i) {
    const Json& prefix = prefixes[static_cast<size_t>(i % o.shared_prefix_groups)];
    const int max_tokens = r.length(o.random_output_len, o.random_range_ratio);
    Json input;
    if (chat) {
      input = Json::array();
      if (o.shared_prefix_len > 0) input.push_back({{"role", "system"}, {"content", prefix}});
      input.push_back({{"role", "user"}, {"content", user_content(o, i, r.words(std::max(1, o.shared_suffix_len)), clips)}});
    } else if (r.exact()) {
      input = prefix;
      for (int32_t id : r.ids(o.shared_suffix_len)) input.push_back(id);
    } else {
      const std::string suffix = r.words(o.shared_suffix_len);
      const std::string p = prefix.get<std::string>();
      input = p.empty() ? suffix : suffix.empty() ? p : p + " " + suffix;
    }
    out.push_back(single(std::move(input), max_tokens, nominal));
  }
  return out;
}

// One system prompt for every conversation, as one application's users share it.
std::vector<Session> multi_turn_sessions(const BenchOptions& o) {
  RandomPrompt r(o.seed, 0);
  const std::string system = o.system_prompt_len > 0 ? r.words(o.system_prompt_len) : std::string();
  std::vector<Session> out;
  for (int c = 0; c < o.num_prompts; ++c) {
    Session s;
    s.conversation = true;
    s.system_prompt = system;
    for (int t = 0; t < o.turns; ++t) {
      const int in = r.length(o.random_input_len, o.random_range_ratio);
      s.turns.push_back(Turn{Json(r.words(in)), r.length(o.random_output_len, o.random_range_ratio), in});
    }
    out.push_back(std::move(s));
  }
  return out;
}

// An agent's conversations: a shared system prompt, then per turn a tool output (the user
// message) and a short reply, the outputs sized so the context reaches --agent-max-tokens at
// the last turn (or a length drawn from [--agent-min-tokens, --agent-max-tokens] for each
// conversation). All start together (the load generator's sessions), so each is revisited
// when its reply comes, round-robin with the others, and together they hold more context than
// a GPU's cache.
std::vector<Session> agent_sessions(const BenchOptions& o) {
  RandomPrompt r(o.seed, 0);
  const std::string system = o.system_prompt_len > 0 ? r.words(o.system_prompt_len) : std::string();
  const int lo = o.agent_min_tokens > 0 ? o.agent_min_tokens : o.agent_max_tokens, hi = o.agent_max_tokens;
  std::vector<Session> out;
  for (int c = 0; c < o.agent_sessions; ++c) {
    const int target = lo == hi ? hi : std::clamp(r.length((lo + hi) / 2, double(hi - lo) / (hi + lo)), lo, hi);
    const int per_turn = std::max(1, (target - o.system_prompt_len) / o.turns - o.random_output_len);
    Session s;
    s.conversation = true;
    s.system_prompt = system;
    for (int t = 0; t < o.turns; ++t) s.turns.push_back(Turn{Json(r.words(per_turn)), o.random_output_len, per_turn});
    out.push_back(std::move(s));
  }
  return out;
}

// One line of the JSONL file as a request of the endpoint.
Session file_line(const Json& j, bool chat, int default_max_tokens, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": each line must be a JSON object");
  int max_tokens = default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1)
      throw std::runtime_error(where + ": \"" + key + "\" must be a positive integer");
    max_tokens = j[key].get<int>();
  }
  if (j.contains("messages")) {
    if (!chat) throw std::runtime_error(where + ": \"messages\" needs --endpoint /v1/chat/completions");
    if (!j["messages"].is_array() || j["messages"].empty())
      throw std::runtime_error(where + ": \"messages\" must be a non-empty list");
    return single(j["messages"], max_tokens, 0);
  }
  if (!j.contains("prompt")) throw std::runtime_error(where + ": needs \"prompt\" or \"messages\"");
  const Json& p = j["prompt"];
  if (p.is_string()) return single(chat ? user_message(p.get<std::string>()) : p, max_tokens, 0);
  if (p.is_array() && !p.empty()) {
    if (chat) throw std::runtime_error(where + ": a token-id \"prompt\" needs --endpoint /v1/completions");
    for (const auto& id : p)
      if (!id.is_number_integer()) throw std::runtime_error(where + ": \"prompt\" lists must hold token ids");
    return single(p, max_tokens, static_cast<int>(p.size()));
  }
  throw std::runtime_error(where + ": \"prompt\" must be text or a non-empty list of token ids");
}

std::vector<Session> file_sessions(const BenchOptions& o, bool chat) {
  std::ifstream in(o.dataset_path);
  if (!in) throw std::runtime_error("cannot open --dataset-path " + o.dataset_path);
  std::vector<Session> lines;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = o.dataset_path + ":" + std::to_string(n);
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception& e) {
      throw std::runtime_error(where + ": not JSON: " + e.what());
    }
    lines.push_back(file_line(j, chat, o.random_output_len, where));
  }
  if (lines.empty()) throw std::runtime_error(o.dataset_path + ": no requests in the file");
  if (!o.num_prompts_given) return lines;
  // --num-prompts replays the file in order, from the top again when it runs out.
  std::vector<Session> out;
  for (int i = 0; i < o.num_prompts; ++i) out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

}  // namespace

std::vector<Session> build_workload(const BenchOptions& o) {
  const bool chat = is_chat_endpoint(o);
  std::vector<Session> sessions = o.dataset == "random"          ? random_sessions(o, chat)
                                  : o.dataset == "shared-prefix" ? shared_prefix_sessions(o, chat)
                                  : o.dataset == "multi-turn"    ? multi_turn_sessions(o)
                                  : o.dataset == "agent"         ? agent_sessions(o)
                                                                 : file_sessions(o, chat);
  mark_structured(sessions, o.structured_fraction, o.seed);
  return sessions;
}

void mark_structured(std::vector<Session>& sessions, double fraction, uint64_t seed) {
  std::vector<Turn*> turns;
  for (Session& s : sessions)
    for (Turn& t : s.turns) turns.push_back(&t);
  const auto n = static_cast<size_t>(std::llround(fraction * static_cast<double>(turns.size())));
  std::mt19937_64 rng(seed ^ 0x5d1c3a7e2b49f806ULL);
  std::shuffle(turns.begin(), turns.end(), rng);
  for (size_t i = 0; i < turns.size(); ++i) turns[i]->structured = i < std::min(n, turns.size());
}

Json conversation_messages(const Session& s, const std::vector<std::string>& replies, size_t turn) {
  Json messages = Json::array();
  if (!s.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", s.system_prompt}});
  for (size_t t = 0; t < turn; ++t) {
    messages.push_back({{"role", "user"}, {"content", s.turns[t].input}});
    messages.push_back({{"role", "assistant"}, {"content", replies.at(t)}});
  }
  messages.push_back({{"role", "user"}, {"content", s.turns.at(turn).input}});
  return messages;
}

size_t count_requests(const std::vector<Session>& sessions) {
  size_t n = 0;
  for (const auto& s : sessions) n += s.turns.size();
  return n;
}

}  // namespace ds::bench
